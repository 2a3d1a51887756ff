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
// The runner is scripts/spin-model.mjs (shared with the other model). Needs spin and gcc
// (node scripts/ensure-tools.mjs spin gcc).
import { fileURLToPath } from 'node:url'
import { modelMain } from '../../../scripts/spin-model.mjs'

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

if (process.argv[1] === fileURLToPath(import.meta.url))
  process.exit(modelMain(MODEL, { configs: CONFIGS, large: LARGE_CONFIGS }, process.argv.slice(2)))
