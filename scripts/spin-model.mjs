// The one runner of the project's Promela models (packages/kunci/model/lock.pml,
// apps/flash-sale/model/checkout.pml): spin generates the verifier, gcc builds it, pan searches.
// A configuration that must hold reports 0 errors with the search complete (not cut by the depth
// bound); one that must fail (an old behaviour, a documented limit) reports an error, of the
// property it names in `fails` if it names one, and its shortest counterexample (pan -i) is
// printed from the trail (spin -t). Each model's check.mjs lists its configurations and calls
// modelMain().
//
// Needs spin and gcc (node scripts/ensure-tools.mjs spin gcc).
import { execFileSync } from 'node:child_process'
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'

/** Search depth bound: a search that reaches it is reported TRUNCATED, never "holds". */
const DEPTH = 20_000

function run(cmd, args, cwd) {
  try {
    const out = execFileSync(cmd, args, {
      cwd,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      maxBuffer: 64 << 20,
    })
    return { out, code: 0 }
  } catch (err) {
    return { out: `${err.stdout ?? ''}${err.stderr ?? err.message}`, code: err.status ?? 1 }
  }
}

/**
 * Verifies one configuration of `model` (a .pml path); returns what pan said and, for an error,
 * the counterexample's EVENT lines. `config`: { name, holds, fails?, defs, what };
 * `gccOpt(config)`: the optimisation flag (gcc -O2 takes seconds on pan.c, more than a small
 * search: a model may build its quick configurations with -O0).
 */
export function checkModel(model, config, gccOpt = () => '-O2') {
  const file = basename(model)
  const dir = mkdtempSync(join(tmpdir(), `model-${config.name}-`))
  const t0 = performance.now()
  try {
    copyFileSync(model, join(dir, file))
    const defs = Object.entries(config.defs).map(([k, v]) => `-D${k}=${v}`)
    const gen = run('spin', [...defs, '-a', file], dir)
    if (gen.code !== 0) throw new Error(`spin -a failed:\n${gen.out}`)
    // SAFETY: assertions only; COLLAPSE: compressed state vectors (exhaustive, less memory).
    const cc = run('gcc', [gccOpt(config), '-w', '-DSAFETY', '-DCOLLAPSE', '-o', 'pan', 'pan.c'], dir)
    if (cc.code !== 0) throw new Error(`gcc failed:\n${cc.out}`)
    // -E: the processes may stop anywhere (time runs out); -i: on an error, keep searching for
    // a shorter one, so the trail left is the shortest.
    const pan = run('./pan', [`-m${DEPTH}`, '-E', ...(config.holds ? [] : ['-i'])], dir)
    const errors = Number(/errors: (\d+)/.exec(pan.out)?.[1] ?? Number.NaN)
    const states = Number(/(\d+) states, stored/.exec(pan.out)?.[1] ?? Number.NaN)
    const truncated = /max search depth too small/.test(pan.out)
    // With -i the last one reported is the shortest (the trail left).
    const violated = [...pan.out.matchAll(/assertion violated (.*?) \(at depth/g)].at(-1)?.[1]
    let trail
    if (errors > 0) {
      const t = run('spin', [...defs, '-t', '-p', file], dir)
      trail = t.out
        .split('\n')
        .filter((l) => !l.includes('printf(') && /EVENT|assertion violated/.test(l))
        .map((l) => l.trim().replace(/^.*?EVENT /, ''))
    }
    const expected = config.holds
      ? errors === 0
      : errors > 0 && (config.fails === undefined || violated === config.fails)
    const ok = Number.isFinite(errors) && !truncated && expected
    return {
      name: config.name,
      holds: config.holds,
      fails: config.fails,
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

/**
 * The command line of a model's check.mjs: no argument runs `configs`, `--large` the large ones,
 * names run those, `--json` prints one JSON line per result (the model tests read them). Returns
 * the exit code: 0 when every outcome is the expected one, 1 otherwise, 2 for an unknown name.
 */
export function modelMain(model, { configs, large, gccOpt }, argv) {
  const json = argv.includes('--json')
  const names = argv.filter((a) => !a.startsWith('--'))
  const all = [...configs, ...large]
  const chosen =
    names.length > 0
      ? names.map((n) => all.find((c) => c.name === n) ?? n)
      : argv.includes('--large')
        ? large
        : configs
  const unknown = chosen.filter((c) => typeof c === 'string')
  if (unknown.length > 0) {
    console.error(
      `unknown configuration(s): ${unknown.join(', ')}; known: ${all.map((c) => c.name).join(', ')}`,
    )
    return 2
  }
  let failed = 0
  for (const config of chosen) {
    const r = checkModel(model, config, gccOpt)
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
