import { saleKeys } from '../redis/keys.js'

/**
 * The waiting room's Redis keys. They carry the sale's hash tag `{sale:<id>}`, so every room
 * script runs on the sale's own slot, atomically with the stock and the buyers it reads (one
 * node of the Cluster, shared by every instance, kept across instance restarts).
 */
export function roomKeys(productId: string) {
  const tag = `{sale:${productId}}`
  const sale = saleKeys(productId)
  return {
    /**
     * Hash: the room's settings (gen, admit_per_second, max_admitted, admission_ms, stock_factor,
     * drop_after_ms, lottery secret and its commitment) and its state (tokens, tokens_ms, last_key,
     * sweep_ms, sweep_offset, admitted_total, dropped_total, expired_total, r0..r9 rate ring).
     */
    room: `${tag}:room`,
    /** Sorted set: user id → order key, of the users waiting (lowest key is admitted first). */
    waiting: `${tag}:room:waiting`,
    /** Sorted set: user id → last time (ms) the waiting user joined or polled. */
    seen: `${tag}:room:seen`,
    /** Sorted set: user id → when (ms) the admission lapses, of users admitted and not done. */
    admitted: `${tag}:room:admitted`,
    /** Hash: user id → `<state>|<order key>|<joined ms>|<admitted until ms>`. */
    users: `${tag}:room:users`,
    /** Sorted set: user id → lottery rank, of every user who joined before the start. */
    draw: `${tag}:room:draw`,
    /** The sale's own keys the room reads (never writes): starts/ends, stock, buyers. */
    meta: sale.meta,
    stock: sale.stock,
    buyers: sale.buyers,
  }
}

export type RoomKeys = ReturnType<typeof roomKeys>

/** KEYS of visit.lua, in its header's order. */
export const visitKeys = (k: RoomKeys) => [
  k.room,
  k.waiting,
  k.seen,
  k.admitted,
  k.users,
  k.draw,
  k.meta,
  k.stock,
  k.buyers,
]

/** KEYS of configure.lua, in its header's order. */
export const configureKeys = (k: RoomKeys) => [k.room, k.waiting, k.seen, k.admitted, k.users, k.draw]

/** KEYS of gate.lua, in its header's order. */
export const gateKeys = (k: RoomKeys) => [k.room, k.users, k.admitted, k.waiting, k.stock, k.buyers]
