#!/usr/bin/env node
// Runs spin on every configuration of the checkout model (checkout.pml) and checks each outcome:
// a configuration that must hold reports 0 errors with the search complete (not cut by the
// depth bound); an old behaviour or a documented limit must violate the property it names, and
// its shortest counterexample (pan -i) is printed from the trail (spin -t). README.md says what
// each one shows.
//
//   node apps/flash-sale/model/check.mjs                 the CI configurations (seconds)
//   node apps/flash-sale/model/check.mjs --large         the larger ones (by hand)
//   node apps/flash-sale/model/check.mjs NAME...         only those
//   node apps/flash-sale/model/check.mjs --json NAME     one result as JSON (checkout-model.test.ts)
//
// The runner is scripts/spin-model.mjs (shared with the other model). Needs spin and gcc
// (node scripts/ensure-tools.mjs spin gcc).
import { fileURLToPath } from 'node:url'
import { modelMain } from '../../../scripts/spin-model.mjs'

const MODEL = fileURLToPath(new URL('./checkout.pml', import.meta.url))

/**
 * `defs`: the model's knobs (checkout.pml); `holds`: true = must hold, false = must fail, and
 * `fails` names the property its shortest counterexample violates.
 */
export const CONFIGS = [
  // Must hold: the protocol as fixed (issue 37).
  {
    name: 'limit-2-refund',
    holds: true,
    defs: { LIMIT: 2, STOCK: 3, CLICKS: 3, REFUNDS: 1, FAILOVERS: 1 },
    what: 'limit 2, three checkouts, a refund, a failover',
  },
  {
    name: 'limit-2-funds',
    holds: true,
    defs: { LIMIT: 2, STOCK: 2, CLICKS: 3, FUNDS: 1, FAILOVERS: 1 },
    what: 'limit 2, three checkouts, one fails INSUFFICIENT_FUNDS (its unit goes back), a failover',
  },
  {
    name: 'worker-faults',
    holds: true,
    defs: { U: 2, STOCK: 2, CRASHES: 1, OUTAGES: 1, FAILOVERS: 1 },
    what: 'two users; the worker crashes at any step, SQL is down once, a failover',
  },
  {
    name: 'scripts-run-twice',
    holds: true,
    defs: { LIMIT: 2, STOCK: 2, RESEND: 1, RESTOCKS: 1, OPRESEND: 1, PRELOADRESEND: 1, FAILOVERS: 1 },
    what: 'reserve, restock and preload each run twice by the client; a failover',
  },
  {
    name: 'keyed-refusals',
    holds: true,
    defs: { U: 2, KEYED: 2, RETRIES: 1, RESEND: 1, FAILOVERS: 1 },
    what: 'one unit, a keyless and a keyed user who repeats its key; a failover; a reserve run twice',
  },
  {
    name: 'stale-master-validity',
    holds: true,
    defs: { CLICKS: 2, STOCK: 2, FAILOVERS: 2, REJOIN: 1, VALIDITY: 1, CRASHES: 1 },
    what: 'two failovers, the deposed master rejoins; a replica is promotable only once synced',
  },
  // Must fail: the old behaviours (issue 37 items 1-5) ...
  {
    name: 'units-count-plus-one',
    holds: false,
    fails: 'every200EndsLive',
    defs: { LIMIT: 2, STOCK: 3, CLICKS: 3, REFUNDS: 1, OLD_UNITS: 1 },
    what: 'item 1, OLD: unit = count + 1, a return decrements the count (refund, buy: duplicate_unit)',
  },
  {
    name: 'delivery-count',
    holds: false,
    fails: 'noPersistableOrderDeadLettered',
    defs: { CRASHES: 1, COUNTS: 0 },
    what: "item 2, OLD: Redis's delivery count, raised by every read while held back; one crash",
  },
  {
    name: 'attempt-count-in-redis',
    holds: false,
    fails: 'noPersistableOrderDeadLettered',
    defs: { CRASHES: 1, FAILOVERS: 1, COUNTS: 1 },
    what: 'item 2 with the attempt count in Redis: a failover loses its lowering',
  },
  {
    name: 'reserve-run-twice',
    holds: false,
    fails: 'booksBalance',
    defs: { LIMIT: 2, STOCK: 2, RESEND: 1, OLD_RESERVE: 1 },
    what: 'item 3, OLD: reserve.lua not idempotent by order id, run twice (two units, one order)',
  },
  {
    name: 'restock-run-twice',
    holds: false,
    fails: 'booksBalance',
    defs: { RESTOCKS: 1, OPRESEND: 1, OLD_RESTOCK: 1 },
    what: 'item 3, OLD: restock.lua without an operation id, run twice',
  },
  {
    name: 'preload-run-twice',
    holds: false,
    fails: 'booksBalance',
    defs: { STOCK: 2, CLICKS: 2, PRELOADRESEND: 1, OLD_PRELOAD: 1 },
    what: 'item 3, OLD: preload.lua without an operation id, run again after a sale',
  },
  {
    name: 'refusal-at-once',
    holds: false,
    fails: 'oneKeyOneFinalAnswer',
    defs: { U: 2, KEYED: 2, RETRIES: 1, FAILOVERS: 1, OLD_REFUSALS: 1 },
    what: 'item 5, OLD: SOLD_OUT under a key answered at once on a master a failover deposes',
  },
  // ... and the documented limits.
  {
    name: 'stale-master',
    holds: false,
    fails: 'every200EndsLive',
    defs: { FAILOVERS: 2, REJOIN: 1 },
    what: 'item 6: the deposed master rejoins with its old data and is promoted before it synced',
  },
  {
    name: 'restock-two-commits',
    holds: false,
    fails: 'booksBalance',
    defs: { RESTOCKS: 1, OLD_RESTOCK_TX: 1 },
    what: 'item 4, the current restock: restock.lua inside the SQL transaction, which rolls back',
  },
  {
    name: 'worker-dies-max-times',
    holds: false,
    fails: 'every200EndsLive',
    defs: { CRASHES: 2, FAILOVERS: 1 },
    what: 'the worker dies during maxDeliveries (2) attempts on one event: poison by definition',
  },
]

/** Larger bounds, to run by hand (README.md). */
export const LARGE_CONFIGS = [
  {
    name: 'large-worker-faults-funds',
    holds: true,
    defs: { U: 2, STOCK: 2, CRASHES: 1, OUTAGES: 1, FAILOVERS: 1, FUNDS: 1 },
    what: 'worker-faults with a funds failure',
  },
  {
    name: 'large-limit-2-refund-funds',
    holds: true,
    defs: { LIMIT: 2, STOCK: 3, CLICKS: 3, REFUNDS: 1, FUNDS: 1, FAILOVERS: 1 },
    what: 'limit-2-refund with a funds failure',
  },
  {
    name: 'large-limit-2-refund-crash',
    holds: true,
    defs: { LIMIT: 2, STOCK: 3, CLICKS: 3, REFUNDS: 1, FUNDS: 1, FAILOVERS: 1, CRASHES: 1 },
    what: 'limit-2-refund with a funds failure and a worker crash',
  },
  {
    name: 'large-two-users-limit-2',
    holds: true,
    defs: { U: 2, LIMIT: 2, STOCK: 3, CLICKS: 2, KEYED: 2, REFUNDS: 1, FAILOVERS: 1 },
    what: 'two users at limit 2, one keyed; a refund, a failover',
  },
  {
    name: 'large-scripts-run-twice-faults',
    holds: true,
    defs: {
      U: 2,
      LIMIT: 2,
      STOCK: 2,
      CLICKS: 2,
      RESEND: 1,
      RESTOCKS: 1,
      OPRESEND: 1,
      PRELOADRESEND: 1,
      FAILOVERS: 1,
      CRASHES: 1,
      OUTAGES: 1,
    },
    what: 'scripts-run-twice with two users, a worker crash and an outage',
  },
  {
    name: 'large-stale-master-validity',
    holds: true,
    defs: {
      U: 2,
      CLICKS: 2,
      STOCK: 3,
      LIMIT: 2,
      FAILOVERS: 2,
      REJOIN: 1,
      VALIDITY: 1,
      CRASHES: 1,
      REFUNDS: 1,
    },
    what: 'stale-master-validity with two users at limit 2 and a refund',
  },
]

// -O0 for the CI ones: gcc -O2 takes ~6 s on pan.c, longer than their whole search.
const gccOpt = (config) => (config.name.startsWith('large-') ? '-O2' : '-O0')

if (process.argv[1] === fileURLToPath(import.meta.url))
  process.exit(modelMain(MODEL, { configs: CONFIGS, large: LARGE_CONFIGS, gccOpt }, process.argv.slice(2)))
