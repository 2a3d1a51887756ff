import { describe, expect, it } from 'vitest'
import { CACHE_SCRIPTS } from '../../src/cache/stampede.js'

// The headers document KEYS/ARGV; the wrappers in stampede.ts pass exactly these counts.
const CALLS: Record<string, { keys: number; args: number }> = {
  'cache-fetch': { keys: 2, args: 4 },
  'cache-write': { keys: 2, args: 5 },
  'cache-release': { keys: 1, args: 3 },
  'cache-extend': { keys: 1, args: 2 },
  'cache-delete': { keys: 2, args: 2 },
}

function documented(source: string, name: 'KEYS' | 'ARGV'): number {
  const header = source.split('\n').filter((l) => l.startsWith('--'))
  return header.filter((l) => new RegExp(`^--\\s+${name}\\[\\d+\\]`).test(l)).length
}

function usedMax(source: string, name: 'KEYS' | 'ARGV'): number {
  const body = source
    .split('\n')
    .filter((l) => !l.startsWith('--'))
    .join('\n')
  let max = 0
  for (const m of body.matchAll(new RegExp(`${name}\\[(\\d+)\\]`, 'g'))) max = Math.max(max, Number(m[1]))
  return max
}

describe('cache Lua scripts', () => {
  it.each(Object.values(CACHE_SCRIPTS).map((s) => [s.name, s] as const))(
    '%s: header, body and caller agree on KEYS and ARGV',
    (name, script) => {
      const call = CALLS[name]!
      expect(documented(script.source, 'KEYS')).toBe(call.keys)
      expect(documented(script.source, 'ARGV')).toBe(call.args)
      expect(usedMax(script.source, 'KEYS')).toBe(call.keys)
      expect(usedMax(script.source, 'ARGV')).toBe(call.args)
    },
  )
})
