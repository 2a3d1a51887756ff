/**
 * The lock protocol's model (packages/kunci/model/lock.pml), checked by spin in every CI
 * configuration: those that must hold report 0 errors with the search complete, the documented
 * limits report an error and print their shortest counterexample. One `node check.mjs --json`
 * per configuration (it builds and runs spin's verifier in a temp dir). See model/README.md.
 */
import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const CHECK = fileURLToPath(new URL('../../model/check.mjs', import.meta.url))

interface Result {
  name: string
  holds: boolean
  ok: boolean
  errors: number
  states: number
  truncated: boolean
  violated?: string
  trail?: string[]
  seconds: number
  pan?: string
}

function names(): string[] {
  const src = execFileSync(
    process.execPath,
    [
      '-e',
      `import(${JSON.stringify(CHECK)}).then((m) => console.log(JSON.stringify(m.CONFIGS.map((c) => c.name))))`,
    ],
    {
      encoding: 'utf8',
    },
  )
  return JSON.parse(src) as string[]
}

function check(name: string): Result {
  let out: string
  try {
    out = execFileSync(process.execPath, [CHECK, '--json', name], { encoding: 'utf8', maxBuffer: 64 << 20 })
  } catch (err) {
    // Exit 1 = the outcome was not the expected one; the JSON line says why.
    out = String((err as { stdout?: string }).stdout ?? '')
    if (out === '') throw err
  }
  return JSON.parse(out.trim().split('\n').pop()!) as Result
}

describe('the lock model (spin)', () => {
  it.each(names())(
    '%s',
    (name) => {
      const r = check(name)
      if (r.trail) console.log(`${name}: shortest counterexample (${r.violated})\n  ${r.trail.join('\n  ')}`)
      expect(r.truncated, 'the search was cut by the depth bound').toBe(false)
      if (r.holds) expect(r.errors, r.pan).toBe(0)
      else {
        expect(r.errors, r.pan).toBeGreaterThan(0)
        expect(r.trail?.some((l) => l.includes('GRANTED'))).toBe(true)
      }
      expect(r.ok).toBe(true)
    },
    600_000,
  )
})
