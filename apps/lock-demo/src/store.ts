import type { Redis } from 'ioredis'
import { fencedWrite, readFenced } from 'kunci'

export interface StoreSnapshot {
  readonly balance: number
  /** Writes the store applied. */
  readonly writes: number
  /** The fence stored with the record at the end. */
  readonly fence: number
  /** The highest fence of any write the store applied: the stored one, unless a lower fence wrote last. */
  readonly highestApplied: number
}

/**
 * The shared record the workers update: an account balance in its own redis-server, apart from
 * the lock nodes, the way a real service keeps its data in a database the lock does not own.
 * The balance is a record of kunci's `fencedWrite` (a hash of `value` and `fence`); the writes
 * are counted beside it, to tell lost updates (writes − balance).
 */
export class AccountStore {
  readonly #client: Redis
  readonly #key: string
  readonly #writes: string
  #highestApplied = 0

  constructor(client: Redis, name: string) {
    this.#client = client
    this.#key = `demo:${name}`
    this.#writes = `demo:${name}:writes`
  }

  async reset(balance: number): Promise<void> {
    this.#highestApplied = 0
    await this.#client.del(this.#key, this.#writes)
    await this.#client.hset(this.#key, 'value', balance, 'fence', 0)
  }

  async readBalance(): Promise<number> {
    return Number((await readFenced(this.#client, this.#key))?.value)
  }

  /** A write with no fence: what a service does without a lock, or with a lock it trusts blindly. */
  async plainWrite(balance: number): Promise<void> {
    await this.#client.multi().hset(this.#key, 'value', balance).incr(this.#writes).exec()
  }

  /** Applies the write only if `fence` is above the fence of every write applied so far (kunci's fencedWrite). */
  async fencedWrite(balance: number, fence: number): Promise<{ applied: boolean; storedFence: number }> {
    const r = await fencedWrite(this.#client, { key: this.#key, fence, value: String(balance) })
    if (r.applied) {
      this.#highestApplied = Math.max(this.#highestApplied, fence)
      await this.#client.incr(this.#writes)
    }
    return { applied: r.applied, storedFence: r.fence }
  }

  async snapshot(): Promise<StoreSnapshot> {
    const [record, writes] = await Promise.all([
      readFenced(this.#client, this.#key),
      this.#client.get(this.#writes),
    ])
    return {
      balance: Number(record?.value),
      writes: Number(writes ?? 0),
      fence: record?.fence ?? 0,
      highestApplied: this.#highestApplied,
    }
  }
}
