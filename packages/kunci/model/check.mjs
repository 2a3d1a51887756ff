#!/usr/bin/env node
// Runs spin on every configuration of the lock model (lock.pml) and checks each outcome:
// a configuration that must hold reports 0 errors with the search complete (not cut by the
// depth bound); a documented limit must report an error, and its shortest counterexample
// (pan -i) is printed from the trail (spin -t). README.md says what each one shows.
//
//   node packages/kunci/model/check.mjs                 the CI configurations
//   node packages/kunci/model/check.mjs --large         the larger ones (by hand: minutes, GBs)
//   node packages/kunci/model/check.mjs NAME...         only those
//   node packages/kunci/model/check.mjs --json NAME     one result as JSON (model.test.ts)
//
// Needs spin and gcc (node scripts/ensure-tools.mjs spin gcc).
import { execFileSync } from 'node:child_process'
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const MODEL = fileURLToPath(new URL('./lock.pml', import.meta.url))

/**
 * `defs`: the model's knobs (lock.pml); `holds`: true = must hold, false = must fail.
 * CHECK picks the properties: 1 mutual exclusion, 2 fence order, 4 fenced resource.
 */
export const CONFIGS = [
  // Must hold: quarantine on (the new one, QMODE 2), message loss everywhere.
  { name: 'crash-empty', holds: true, defs: {}, what: 'a node crashes and restarts empty' },
  {
    name: 'crash-data-kept',
    holds: true,
    defs: { EMPTY: 0 },
    what: 'a node crashes and restarts with its data',
  },
  { name: 'extension', holds: true, defs: { EXTEND: 1 }, what: 'an empty restart while holders extend' },
  {
    name: 'hand-over',
    holds: true,
    defs: { HANDOVER: 1, ATT0: 2 },
    what: 'an empty restart while a holder hands over to a local waiter',
  },
  {
    name: 'restart-step',
    holds: true,
    defs: { STEPS: 1, FIRST: 1 },
    what: 'an empty restart, then the node clock steps forward by more than maxTtl; client 1 is new',
  },
  {
    name: 'restart-behind-full',
    holds: true,
    defs: { BEHIND: 1, STEPS: 1, FIRST: 1, QMODE: 3, HORIZON: 4 },
    what: "the node restarts empty with its clock behind, then is stepped right; firstContact: 'full' (4 ticks)",
  },
  {
    name: 'skew-below-bound',
    holds: true,
    defs: { SKEW: 1, FIRST: 1 },
    what: 'an empty restart; client clocks 1 apart (< maxTtl - nodeTimeout = 2)',
  },
  // Must fail: the documented limits.
  {
    name: 'no-quarantine',
    holds: false,
    defs: { QMODE: 0, CHECK: 1 },
    what: 'an empty restart with quarantine: false (mutual exclusion)',
  },
  {
    name: 'skew-whole-ttl',
    holds: false,
    defs: { SKEW: 3, FIRST: 1, CHECK: 6 },
    what: 'an empty restart; client clocks a whole TTL apart (fence order, fenced resource)',
  },
  {
    name: 'skew-at-bound',
    holds: false,
    defs: { SKEW: 2, FIRST: 1, CHECK: 2 },
    what: 'an empty restart; client clocks maxTtl - nodeTimeout apart: the bound is tight (fence order)',
  },
  {
    name: 'restart-step-old',
    holds: false,
    defs: { QMODE: 1, STEPS: 1, FIRST: 1, CHECK: 1 },
    what: 'an empty restart, then a clock step, with the OLD uptime-based quarantine (mutual exclusion)',
  },
  {
    name: 'restart-behind-first-contact',
    holds: false,
    defs: { BEHIND: 1, STEPS: 1, FIRST: 1, CHECK: 1 },
    what: 'the node restarts empty with its clock behind, then is stepped right; a new client trusts uptime',
  },
  {
    name: 'step-live-key',
    holds: false,
    defs: { CRASHES: 0, STEPS: 1, STEPLIVE: 1, CHECK: 1 },
    what: 'no restart; a node clock steps forward while it holds a lock key (its TTL ends early)',
  },
]

/** Larger bounds, to run by hand (README.md): more time explored, more attempts, both features. */
export const LARGE_CONFIGS = [
  {
    name: 'large-restart-behind-full',
    holds: true,
    defs: { BEHIND: 1, STEPS: 1, FIRST: 1, QMODE: 3 },
    what: 'restart-behind-full with 5 ticks (31.6 M states, ~3 min, ~2 GB)',
  },
  {
    name: 'large-crash-empty',
    holds: true,
    defs: { HORIZON: 7, ATT1: 2 },
    what: 'crash-empty, 7 ticks, 2 attempts for client 1',
  },
  {
    name: 'large-restart-step',
    holds: true,
    defs: { HORIZON: 6, STEPS: 1, FIRST: 1, ATT1: 2 },
    what: 'restart-step, 6 ticks, 2 attempts for client 1',
  },
  {
    name: 'large-extension-hand-over',
    holds: true,
    defs: { EXTEND: 1, HANDOVER: 1, ATT0: 2, HORIZON: 6 },
    what: 'extension and hand-over together, 6 ticks',
  },
]

const DEPTH = 20_000

function run(cmd, args, cwd) {
  try {
    return {
      out: execFileSync(cmd, args, {
        cwd,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
        maxBuffer: 64 << 20,
      }),
      code: 0,
    }
  } catch (err) {
    return { out: `${err.stdout ?? ''}${err.stderr ?? ''}`, code: err.status ?? 1 }
  }
}

/** Verifies one configuration; returns what pan said and, for an error, the counterexample. */
export function check(config) {
  const dir = mkdtempSync(join(tmpdir(), `kunci-model-${config.name}-`))
  const t0 = performance.now()
  try {
    copyFileSync(MODEL, join(dir, 'lock.pml'))
    const defs = Object.entries(config.defs).map(([k, v]) => `-D${k}=${v}`)
    const gen = run('spin', [...defs, '-a', 'lock.pml'], dir)
    if (gen.code !== 0) throw new Error(`spin -a failed:\n${gen.out}`)
    // SAFETY: assertions only; COLLAPSE: compressed state vectors (exhaustive, less memory).
    const cc = run('gcc', ['-O2', '-w', '-DSAFETY', '-DCOLLAPSE', '-o', 'pan', 'pan.c'], dir)
    if (cc.code !== 0) throw new Error(`gcc failed:\n${cc.out}`)
    // -E: the processes may stop anywhere (time runs out); -i: on an error, keep searching for
    // a shorter one, so the trail left is the shortest.
    const pan = run('./pan', [`-m${DEPTH}`, '-E', ...(config.holds ? [] : ['-i'])], dir)
    const errors = Number(/errors: (\d+)/.exec(pan.out)?.[1] ?? Number.NaN)
    const states = Number(/(\d+) states, stored/.exec(pan.out)?.[1] ?? Number.NaN)
    const truncated = /max search depth too small/.test(pan.out)
    const violated = /assertion violated (.*?) \(at depth/.exec(pan.out)?.[1]
    let trail
    if (errors > 0) {
      const t = run('spin', [...defs, '-t', '-p', 'lock.pml'], dir)
      writeFileSync(join(dir, 'trail.txt'), t.out)
      trail = t.out
        .split('\n')
        .filter((l) => !l.includes('printf(') && /EVENT|assertion violated/.test(l))
        .map((l) => l.trim().replace(/^.*?EVENT /, ''))
    }
    const ok = Number.isFinite(errors) && !truncated && (config.holds ? errors === 0 : errors > 0)
    return {
      name: config.name,
      holds: config.holds,
      what: config.what,
      ok,
      errors,
      states,
      truncated,
      violated,
      trail,
      seconds: Math.round((performance.now() - t0) / 100) / 10,
      pan: ok ? undefined : pan.out,
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

function main(argv) {
  const json = argv.includes('--json')
  const large = argv.includes('--large')
  const names = argv.filter((a) => !a.startsWith('--'))
  const all = [...CONFIGS, ...LARGE_CONFIGS]
  const chosen =
    names.length > 0 ? names.map((n) => all.find((c) => c.name === n) ?? n) : large ? LARGE_CONFIGS : CONFIGS
  const unknown = chosen.filter((c) => typeof c === 'string')
  if (unknown.length > 0) {
    console.error(
      `unknown configuration(s): ${unknown.join(', ')}; known: ${all.map((c) => c.name).join(', ')}`,
    )
    return 2
  }
  let failed = 0
  for (const config of chosen) {
    const r = check(config)
    if (!r.ok) failed++
    if (json) {
      console.log(JSON.stringify(r))
      continue
    }
    const verdict = r.errors === 0 ? 'holds' : `fails (${r.violated})`
    console.log(
      `${r.ok ? 'ok  ' : 'FAIL'} ${r.name.padEnd(30)} ${verdict}  ${r.states} states, ${r.seconds} s${r.truncated ? ', TRUNCATED by depth' : ''}`,
    )
    if (r.trail) for (const line of r.trail) console.log(`       ${line}`)
    if (r.pan) console.log(r.pan)
  }
  return failed === 0 ? 0 : 1
}

if (process.argv[1] === fileURLToPath(import.meta.url)) process.exit(main(process.argv.slice(2)))
