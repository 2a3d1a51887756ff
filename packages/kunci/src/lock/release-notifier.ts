import type { RedisClient } from '../redis/lua-script.js'

type Wake = () => void

/**
 * How long a channel stays subscribed after its last waiter left. A waiter that retries (or
 * the next waiter for a hot resource) then costs no SUBSCRIBE/UNSUBSCRIBE pair per attempt.
 */
const LINGER_MS = 2000

/**
 * Wakes waiters when a holder releases. Release scripts PUBLISH on the lock key's name; we
 * SUBSCRIBE to it on every node (a separate connection per node, made with `duplicate()` only
 * when somebody first has to wait, and closed by `close()`). Notifications only shorten a wait:
 * a waiter always has a timer too, so a lost message or a crashed holder costs latency, never
 * liveness.
 */
export class ReleaseNotifier {
  #clients: readonly RedisClient[]
  #subscribers: (RedisClient | undefined)[]
  #waiters = new Map<string, Set<Wake>>()
  #lingering = new Map<string, NodeJS.Timeout>()

  constructor(clients: readonly RedisClient[]) {
    this.#clients = clients
    this.#subscribers = clients.map(() => undefined)
  }

  /** Resolves after `ms`, on a release of any of `channels`, or on abort (then it resolves too). */
  wait(channels: readonly string[], ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer)
        signal?.removeEventListener('abort', wake)
        for (const ch of channels) this.#remove(ch, wake)
        resolve()
      }
      const timer = setTimeout(wake, ms)
      signal?.addEventListener('abort', wake, { once: true })
      for (const ch of channels) this.#add(ch, wake)
    })
  }

  async close(): Promise<void> {
    const subs = this.#subscribers.filter((s): s is RedisClient => s !== undefined)
    this.#subscribers = this.#clients.map(() => undefined)
    for (const set of this.#waiters.values()) for (const wake of [...set]) wake()
    this.#waiters.clear()
    for (const t of this.#lingering.values()) clearTimeout(t)
    this.#lingering.clear()
    await Promise.all(
      subs.map(async (s) => {
        try {
          await s.quit()
        } catch {
          s.disconnect()
        }
      }),
    )
  }

  #add(channel: string, wake: Wake): void {
    let set = this.#waiters.get(channel)
    if (!set) {
      this.#waiters.set(channel, (set = new Set()))
      const lingering = this.#lingering.get(channel)
      if (lingering) {
        clearTimeout(lingering)
        this.#lingering.delete(channel)
      } else this.#each((s) => s.subscribe(channel))
    }
    set.add(wake)
  }

  #remove(channel: string, wake: Wake): void {
    const set = this.#waiters.get(channel)
    if (!set?.delete(wake) || set.size > 0) return
    this.#waiters.delete(channel)
    const t = setTimeout(() => {
      this.#lingering.delete(channel)
      this.#each((s) => s.unsubscribe(channel))
    }, LINGER_MS)
    t.unref() // an idle subscription must not keep the process alive
    this.#lingering.set(channel, t)
  }

  #each(fn: (sub: RedisClient) => Promise<unknown>): void {
    for (let i = 0; i < this.#clients.length; i++) {
      let sub = this.#subscribers[i]
      if (!sub) {
        sub = this.#clients[i]!.duplicate()
        // Errors surface as failed commands; reconnects resubscribe on their own.
        sub.on('error', () => {})
        sub.on('message', this.#onMessage)
        this.#subscribers[i] = sub
      }
      fn(sub).catch(() => {})
    }
  }

  #onMessage = (channel: string): void => {
    const set = this.#waiters.get(channel)
    if (set) for (const wake of [...set]) wake()
  }
}
