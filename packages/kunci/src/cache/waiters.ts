/**
 * Callers waiting for another process's loader, by key. The bus wakes them when a key
 * changes; a poll timer covers lost messages (see cache `pollIntervalMs`).
 */

export interface Wait {
  /** Resolves when the key is announced (never rejects). */
  readonly promise: Promise<void>
  cancel(): void
}

export class Waiters {
  readonly #byKey = new Map<string, Set<() => void>>()

  /** Register *before* asking Redis, so an announcement racing the reply is not lost. */
  waitFor(key: string): Wait {
    let wake!: () => void
    const promise = new Promise<void>((resolve) => (wake = resolve))
    let set = this.#byKey.get(key)
    if (set === undefined) this.#byKey.set(key, (set = new Set()))
    set.add(wake)
    const waiters = set
    return {
      promise,
      cancel: () => {
        waiters.delete(wake)
        if (waiters.size === 0 && this.#byKey.get(key) === waiters) this.#byKey.delete(key)
      },
    }
  }

  wake(key: string): void {
    const set = this.#byKey.get(key)
    if (set !== undefined) for (const wake of set) wake()
  }

  wakePrefix(prefix: string): void {
    for (const [key, set] of this.#byKey) if (key.startsWith(prefix)) for (const wake of set) wake()
  }

  wakeAll(): void {
    for (const set of this.#byKey.values()) for (const wake of set) wake()
  }
}
