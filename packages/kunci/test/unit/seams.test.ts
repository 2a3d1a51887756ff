/**
 * Guards over src/ for the one port to Redis (src/redis/port.ts, STYLE.md §10): only the two
 * adapters know a client library, nothing casts across the seam, and nothing loads a client
 * library at runtime (a user may have only one of them installed).
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const SRC = fileURLToPath(new URL('../../src/', import.meta.url))
const ADAPTERS = ['redis/ioredis/', 'redis/node-redis/']

function sources(dir = SRC): { path: string; text: string }[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name)
    if (e.isDirectory()) return sources(p)
    return e.name.endsWith('.ts') ? [{ path: p.slice(SRC.length), text: readFileSync(p, 'utf8') }] : []
  })
}

/** Every module specifier a file imports or re-exports (also `import type`, also dynamic). */
function specifiers(text: string): string[] {
  const out: string[] = []
  for (const m of text.matchAll(/^\s*(?:import|export)\b[^'"]*?from\s+'([^']+)'/gms)) out.push(m[1]!)
  for (const m of text.matchAll(/^\s*import\s+'([^']+)'/gm)) out.push(m[1]!)
  for (const m of text.matchAll(/\bimport\(\s*'([^']+)'\s*\)/g)) out.push(m[1]!)
  for (const m of text.matchAll(/\brequire\)?\(\s*'([^']+)'\s*\)/g)) out.push(m[1]!)
  return out
}

const CLIENT_LIBRARY = /^(ioredis|redis|@redis\/.+)$/

describe('the port to Redis', () => {
  it('the file list is read (the guards below see the sources)', () => {
    const files = sources().map((f) => f.path)
    expect(files).toContain('redis/port.ts')
    expect(files).toContain('redis/ioredis/port.ts')
    expect(files).toContain('redis/node-redis/standalone.ts')
    expect(specifiers("import type { Redis } from 'ioredis'\nexport { x } from './y.js'")).toEqual([
      'ioredis',
      './y.js',
    ])
  })

  it('no file outside src/redis/ioredis/ and src/redis/node-redis/ imports ioredis or redis, not even a type', () => {
    const offenders = sources().flatMap(({ path, text }) =>
      ADAPTERS.some((a) => path.startsWith(a))
        ? []
        : specifiers(text)
            .filter((s) => CLIENT_LIBRARY.test(s))
            .map((s) => `${path}: ${s}`),
    )
    expect(offenders).toEqual([])
  })

  it('each adapter knows only its own library', () => {
    const offenders = sources().flatMap(({ path, text }) => {
      const other = path.startsWith('redis/ioredis/')
        ? /^(redis|@redis\/.+)$/
        : path.startsWith('redis/node-redis/')
          ? /^ioredis$/
          : undefined
      return other
        ? specifiers(text)
            .filter((s) => other.test(s))
            .map((s) => `${path}: ${s}`)
        : []
    })
    expect(offenders).toEqual([])
  })

  it('nothing in src/ loads a client library at runtime by import (type-only imports are erased)', () => {
    const offenders = sources().flatMap(({ path, text }) =>
      // `import { type X }` stays a runtime import under verbatimModuleSyntax: only `import type` is erased.
      [
        ...text.matchAll(
          /^import\s+(?!type\s)(?:[^'\n]*|\{[^}]*\})\s*(?:from\s+)?'(ioredis|redis|@redis\/[^']+)'/gm,
        ),
      ].map((m) => `${path}: ${m[0].split('\n')[0]}`),
    )
    expect(offenders).toEqual([])
  })

  it('no `as unknown as` anywhere in src/ (a cast across layers is a missing seam)', () => {
    const offenders = sources().flatMap(({ path, text }) =>
      text
        .split('\n')
        .flatMap((line, i) =>
          /\bas\s+unknown\s+as\b/.test(line) ? [`${path}:${i + 1}: ${line.trim()}`] : [],
        ),
    )
    expect(offenders).toEqual([])
  })
})
