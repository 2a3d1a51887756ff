import type { RedisClient } from '../redis/lua-script.js'

type Wake = () => void

/**
 * How long a channel stays subscribed after its last waiter left. A waiter that retries (or
 * the next waiter for a hot resource) then costs no SUBSCRIBE/UNSUBSCRIBE pair per attempt.
 */
const LINGER_MS = 2000

/**
 * Wakes waiters when a holder releases. Release scripts PUBLISH on the lock key's name, naming
 * the oldest queued waiter (a manager's id) or nobody (everyone may try); we SUBSCRIBE to it on
 * every node (a separate connection per node, made with `duplicate()` only
 * when somebody first has to wait, and closed by `close()`). Notifications only shorten a wait:
 * a waiter always has a timer too, so a lost message or a crashed holder costs latency, never
 * liveness.
 */
export class ReleaseNotifier {
  #clients: readonly RedisClient[]
  #subscribers: (RedisClient | undefined)[]
  #waiters = new Map<string, Set<Wake>>()
  #lingering = new Map<string, NodeJS.Timeout>()

  #id: string

  /** `id`: the waiter name this manager queues under; messages naming someone else are ignored. */
  constructor(clients: readonly RedisClient[], id: string) {
    this.#clients = clients
    this.#id = id
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
      } else {
        // A release between our failed attempt and the subscription taking effect would go
        // unnoticed: once the first node confirms, wake the waiters so they check again.
        let confirmed = false
        this.#each((s) =>
          s.subscribe(channel).then(() => {
            if (confirmed) return
            confirmed = true
            const current = this.#waiters.get(channel)
            if (current) for (const w of [...current]) w()
          }),
        )
      }
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

  #onMessage = (channel: string, message: string): void => {
    // A release names the oldest waiter it woke; an empty message wakes everybody.
    if (message !== '' && message !== this.#id) return
    const set = this.#waiters.get(channel)
    if (set) for (const wake of [...set]) wake()
  }
}
