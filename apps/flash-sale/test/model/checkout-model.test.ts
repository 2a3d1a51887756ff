/**
 * The checkout protocol's model (apps/flash-sale/model/checkout.pml), checked by spin in every CI
 * configuration: those that must hold report 0 errors with the search complete; the old
 * behaviours and the documented limits must violate the property each names, and print their
 * shortest counterexample. One `node check.mjs --json` per configuration (it builds and runs
 * spin's verifier in a temp dir). Without spin or gcc every test fails (spin -a failed), never
 * skips. See model/README.md.
 */
import { execFile, execFileSync } from 'node:child_process'
import { availableParallelism } from 'node:os'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const CHECK = fileURLToPath(new URL('../../model/check.mjs', import.meta.url))

interface Result {
  name: string
  holds: boolean
  fails?: string
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
    { encoding: 'utf8' },
  )
  return JSON.parse(src) as string[]
}

function check(name: string): Promise<Result> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [CHECK, '--json', name],
      { encoding: 'utf8', maxBuffer: 64 << 20 },
      (err, stdout) => {
        // Exit 1 = the outcome was not the expected one; the JSON line says why.
        if (err && stdout === '') return reject(err)
        try {
          resolve(JSON.parse(stdout.trim().split('\n').pop()!) as Result)
        } catch (parseErr) {
          reject(parseErr)
        }
      },
    )
  })
}

/**
 * Every configuration checked in the background, as many at once as there are cores (at most 2),
 * each test awaiting its own; started at collection.
 */
function checkAll(all: string[]): Map<string, Promise<Result>> {
  const queue = [...all]
  const results = new Map<string, Promise<Result>>()
  const settle = new Map<string, { resolve: (r: Result) => void; reject: (e: unknown) => void }>()
  for (const name of all) {
    const p = new Promise<Result>((resolve, reject) => settle.set(name, { resolve, reject }))
    // Handled here so that a failure before its test awaits it is not an unhandled rejection.
    p.catch(() => {})
    results.set(name, p)
  }
  const worker = async () => {
    for (let name = queue.shift(); name !== undefined; name = queue.shift()) {
      const s = settle.get(name)!
      await check(name).then(s.resolve, s.reject)
    }
  }
  for (let i = 0; i < Math.min(2, availableParallelism()); i++) void worker()
  return results
}

const CONFIG_NAMES = names()
const results = checkAll(CONFIG_NAMES)

describe('the checkout model (spin)', () => {
  it.each(CONFIG_NAMES)(
    '%s',
    async (name) => {
      const r = await results.get(name)!
      if (r.trail) console.log(`${name}: shortest counterexample (${r.violated})\n  ${r.trail.join('\n  ')}`)
      expect(r.truncated, 'the search was cut by the depth bound').toBe(false)
      if (r.holds) expect(r.errors, r.pan).toBe(0)
      else {
        expect(r.errors, r.pan).toBeGreaterThan(0)
        expect(r.violated, r.pan).toBe(r.fails)
        expect(
          r.trail?.some((l) => l.includes('drained') || l.includes('DEAD-LETTERS') || l.includes('409')),
        ).toBe(true)
      }
      expect(r.ok).toBe(true)
    },
    600_000,
  )
})
