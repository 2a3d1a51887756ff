import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { randomToken, TOKEN_LENGTH } from '../../src/lock/tokens.js'

const script = (name: string) =>
  readFileSync(new URL(`../../src/lock/scripts/${name}.lua`, import.meta.url), 'utf8')

// The scripts find a waiter's mark right after the token, so they must agree with the
// generator on its length; and every header must describe the arguments the code passes.
describe('lock scripts and the TypeScript that calls them', () => {
  it('tokens are TOKEN_LENGTH hex characters, and every script uses the same length', () => {
    for (let i = 0; i < 300; i++) expect(randomToken()).toMatch(new RegExp(`^[0-9a-f]{${TOKEN_LENGTH}}$`))
    for (const name of ['acquire', 'release', 'extend', 'unqueue']) {
      expect(script(name)).toContain(`local TOKEN_LENGTH = ${TOKEN_LENGTH}`)
    }
  })

  it('acquire.lua reads 6 values per request, as node-ops.ts passes them', () => {
    const src = script('acquire')
    expect(src).toMatch(/then per request, 6 values/)
    expect(src).toMatch(/a = a \+ 6\n/)
    const ops = readFileSync(new URL('../../src/lock/node-ops.ts', import.meta.url), 'utf8')
    const args = /const args = \[\n([\s\S]*?)\n {2}\]/.exec(ops)?.[1] ?? ''
    expect(args.split('\n').filter((l) => l.trim().length > 0)).toHaveLength(6)
  })
})
