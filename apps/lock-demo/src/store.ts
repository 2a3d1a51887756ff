import { readFileSync } from 'node:fs'
import type { Redis } from 'ioredis'

const FENCED_UPDATE = readFileSync(new URL('./scripts/fenced-update.lua', import.meta.url), 'utf8')

export interface StoreSnapshot {
  readonly balance: number
  /** Writes the store applied. */
  readonly writes: number
  /** Fences of the applied writes, in the order the store applied them. */
  readonly acceptedFences: readonly number[]
}

/**
 * The shared record the workers update: an account balance in its own redis-server, apart from
 * the lock nodes, the way a real service keeps its data in a database the lock does not own.
 */
export class AccountStore {
  readonly #client: Redis
  readonly #key: string
  readonly #log: string
  #sha = ''

  constructor(client: Redis, name: string) {
    this.#client = client
    this.#key = `demo:${name}`
    this.#log = `demo:${name}:accepted`
  }

  /** Loads the script once: the store is never restarted, so NOSCRIPT cannot happen. */
  async reset(balance: number): Promise<void> {
    this.#sha = (await this.#client.script('LOAD', FENCED_UPDATE)) as string
    await this.#client.del(this.#key, this.#log)
    await this.#client.hset(this.#key, 'balance', balance, 'fence', 0, 'writes', 0)
  }

  async readBalance(): Promise<number> {
    return Number(await this.#client.hget(this.#key, 'balance'))
  }

  /** A write with no fence: what a service does without a lock, or with a lock it trusts blindly. */
  async plainWrite(balance: number): Promise<void> {
    await this.#client.multi().hset(this.#key, 'balance', balance).hincrby(this.#key, 'writes', 1).exec()
  }

  /** Applies the write only if `fence` is above the fence of every write applied so far. */
  async fencedWrite(balance: number, fence: number): Promise<{ applied: boolean; storedFence: number }> {
    const [applied, stored] = (await this.#client.evalsha(
      this.#sha,
      2,
      this.#key,
      this.#log,
      fence,
      balance,
    )) as [number, number]
    return { applied: applied === 1, storedFence: stored }
  }

  async snapshot(): Promise<StoreSnapshot> {
    const [record, log] = await Promise.all([
      this.#client.hgetall(this.#key),
      this.#client.lrange(this.#log, 0, -1),
    ])
    return {
      balance: Number(record.balance),
      writes: Number(record.writes),
      acceptedFences: log.map(Number),
    }
  }
}
