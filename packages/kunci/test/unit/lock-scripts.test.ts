import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { randomToken, TOKEN_LENGTH } from '../../src/lock/tokens.js'

// What calls the scripts: the acquisition (node-ops.ts) and the scripts' batched forms (lock-scripts.ts).
const callers = () =>
  ['node-ops', 'lock-scripts']
    .map((f) => readFileSync(new URL(`../../src/lock/${f}.ts`, import.meta.url), 'utf8'))
    .join('\n')

const script = (name: string) =>
  readFileSync(new URL(`../../src/lock/scripts/${name}.lua`, import.meta.url), 'utf8')

// The scripts find a waiter's mark right after the token, so they must agree with the
// generator on its length; and every header must describe the arguments the code passes.
describe('lock scripts and the TypeScript that calls them', () => {
  it('tokens are TOKEN_LENGTH hex characters, and every script uses the same length', () => {
    for (let i = 0; i < 300; i++) expect(randomToken()).toMatch(new RegExp(`^[0-9a-f]{${TOKEN_LENGTH}}$`))
    for (const name of ['acquire', 'acquire-one', 'release', 'release-one', 'extend', 'unqueue']) {
      expect(script(name)).toContain(`local TOKEN_LENGTH = ${TOKEN_LENGTH}`)
    }
  })

  it('acquire.lua reads 6 values per request, as node-ops.ts passes and lock-scripts.ts packs them', () => {
    const src = script('acquire')
    expect(src).toMatch(/then per request, 6 values/)
    expect(src).toMatch(/a = a \+ 6\n/)
    const ops = callers()
    // The batched request built in attemptAcquire, and a lean request packed for a batch.
    const batched = /: \[\n(\s+token,[\s\S]*?)\n\s+\]\n/.exec(ops)?.[1] ?? ''
    expect(topLevelItems(batched)).toBe(6)
    const packed = /pack: \(a\) => \[(.*)\],\n/.exec(ops)?.[1] ?? ''
    expect(topLevelItems(packed)).toBe(6)
  })

  it('acquire-one.lua and release-one.lua read the arguments node-ops.ts passes', () => {
    const ops = callers()
    // token, ttl, fence[, waiter id, since, queued]
    expect(ops).toMatch(/\? \[token, ttlArg, fenceArg, w\.id, String\(w\.since\), w\.queued \? '1' : '0'\]/)
    expect(ops).toMatch(/: \[token, ttlArg, fenceArg\]/)
    const one = script('acquire-one')
    for (const a of ['ARGV[1]', 'ARGV[2]', 'ARGV[3]', 'ARGV[4]', 'ARGV[5]', 'ARGV[6]'])
      expect(one).toContain(a)
    expect(one).not.toContain('ARGV[7]')
    expect(script('release-one')).not.toContain('ARGV[2]')
  })
})

/** Counts the comma-separated items of an array literal's body, ignoring nested brackets and template strings. */
function topLevelItems(body: string): number {
  let depth = 0
  let items = body.trim().length > 0 ? 1 : 0
  let inTemplate = false
  for (const ch of body) {
    if (ch === '`') inTemplate = !inTemplate
    else if (inTemplate) continue
    else if ('([{'.includes(ch)) depth++
    else if (')]}'.includes(ch)) depth--
    else if (ch === ',' && depth === 0) items++
  }
  // A trailing comma adds no item.
  return body.trim().endsWith(',') ? items - 1 : items
}
