import type { RedisPort, Subscriber } from '../redis/port.js'

type Wake = () => void

/**
 * How long a lock stays subscribed after its last waiter left. A waiter that retries (or the
 * next waiter for a hot resource) then costs no SUBSCRIBE/UNSUBSCRIBE pair per attempt.
 */
const LINGER_MS = 2000

/** The channel on which a release wakes one named waiter of `lockKey`. */
export function personalChannel(lockKey: string, waiterId: string): string {
  return `${lockKey}#${waiterId}`
}

/**
 * Wakes waiters when a holder releases. A release pops the oldest waiter from the node's queue
 * and publishes on that waiter's personal channel (`<lock key>#<id>`), or on the lock key itself
 * when nobody is queued (anyone may try). So a release reaches one process, not all of them.
 *
 * We SUBSCRIBE to both channels on every node, on a separate connection per node (the port's
 * `subscriber`, reconnecting and resubscribing on its own) made only when somebody first has to
 * wait, and closed by `close()`. Notifications
 * only shorten a wait: a waiter always has a timer too, so a lost message or a crashed holder
 * costs latency, never liveness. A wake that arrives while nobody waits (the waiter was busy
 * with an attempt) is kept and ends the next wait at once, so it is not lost either.
 */
export class ReleaseNotifier {
  #clients: readonly RedisPort[]
  #subscribers: (Subscriber | undefined)[]
  #id: string
  #suffix: string
  /** Lock key → wake functions of the current waits. */
  #waiters = new Map<string, Set<Wake>>()
  /** Lock keys subscribed with nobody waiting, and the timer that unsubscribes them. */
  #lingering = new Map<string, NodeJS.Timeout>()
  /** Lock keys released to us while an attempt was running. */
  #missed = new Set<string>()
  /** Lock key → attempts running. */
  #attempts = new Map<string, number>()

  /** `id`: the name this manager queues under on the nodes. */
  constructor(clients: readonly RedisPort[], id: string) {
    this.#clients = clients
    this.#id = id
    this.#suffix = `#${id}`
    this.#subscribers = clients.map(() => undefined)
  }

  /** Resolves after `ms`, on a release of any of `lockKeys`, or on abort (then it resolves too). */
  wait(lockKeys: readonly string[], ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      let done = false
      const wake = () => {
        if (done) return
        done = true
        clearTimeout(timer)
        signal?.removeEventListener('abort', wake)
        for (const k of lockKeys) this.#remove(k, wake)
        resolve()
      }
      const timer = setTimeout(wake, ms)
      signal?.addEventListener('abort', wake, { once: true })
      for (const k of lockKeys) this.#add(k, wake)
      for (const k of lockKeys) {
        if (this.#missed.delete(k)) {
          queueMicrotask(wake)
          break
        }
      }
    })
  }

  /**
   * An attempt on `lockKeys` starts. A wake that arrives during an attempt is kept for the wait
   * that follows a failed attempt; at other times (e.g. duplicates from the other nodes after we
   * got the lock) it is stale and dropped.
   */
  attemptStarted(lockKeys: readonly string[]): void {
    this.#count(lockKeys, 1)
  }

  /** ... and ends (granted or not). */
  attemptEnded(lockKeys: readonly string[]): void {
    this.#count(lockKeys, -1)
  }

  /** The attempt won: wakes kept while it ran are stale. */
  granted(lockKeys: readonly string[]): void {
    if (this.#missed.size === 0) return
    for (const k of lockKeys) this.#missed.delete(k)
  }

  #count(lockKeys: readonly string[], delta: 1 | -1): void {
    // Nothing subscribed, nothing to keep: the uncontended path pays one size check.
    if (this.#waiters.size === 0 && this.#lingering.size === 0 && this.#attempts.size === 0) return
    for (const k of lockKeys) {
      const n = (this.#attempts.get(k) ?? 0) + delta
      if (n > 0) this.#attempts.set(k, n)
      else this.#attempts.delete(k)
    }
  }

  async close(): Promise<void> {
    const subs = this.#subscribers.filter((s): s is Subscriber => s !== undefined)
    this.#subscribers = this.#clients.map(() => undefined)
    for (const set of this.#waiters.values()) for (const wake of [...set]) wake()
    this.#waiters.clear()
    for (const t of this.#lingering.values()) clearTimeout(t)
    this.#lingering.clear()
    this.#missed.clear()
    await Promise.all(subs.map((s) => s.close()))
  }

  #add(lockKey: string, wake: Wake): void {
    let set = this.#waiters.get(lockKey)
    if (!set) {
      this.#waiters.set(lockKey, (set = new Set()))
      const lingering = this.#lingering.get(lockKey)
      if (lingering) {
        clearTimeout(lingering)
        this.#lingering.delete(lockKey)
      } else {
        // A release between our failed attempt and the subscription taking effect would go
        // unnoticed: once the first node confirms, wake the waiters so they check again.
        let confirmed = false
        const channels = [lockKey, personalChannel(lockKey, this.#id)]
        this.#each((s) =>
          s.subscribe(channels).then(() => {
            if (confirmed) return
            confirmed = true
            const current = this.#waiters.get(lockKey)
            if (current) for (const w of [...current]) w()
          }),
        )
      }
    }
    set.add(wake)
  }

  #remove(lockKey: string, wake: Wake): void {
    const set = this.#waiters.get(lockKey)
    if (!set?.delete(wake) || set.size > 0) return
    this.#waiters.delete(lockKey)
    const t = setTimeout(() => {
      this.#lingering.delete(lockKey)
      this.#missed.delete(lockKey)
      this.#each((s) => s.unsubscribe([lockKey, personalChannel(lockKey, this.#id)]))
    }, LINGER_MS)
    t.unref() // an idle subscription must not keep the process alive
    this.#lingering.set(lockKey, t)
  }

  #each(fn: (sub: Subscriber) => Promise<unknown>): void {
    for (let i = 0; i < this.#clients.length; i++) {
      let sub = this.#subscribers[i]
      if (!sub) {
        // Errors surface as failed commands; reconnects resubscribe on their own.
        sub = this.#clients[i]!.subscriber({ reconnect: true })
        sub.onMessage(this.#onMessage)
        this.#subscribers[i] = sub
      }
      fn(sub).catch(() => {})
    }
  }

  #onMessage = (channel: string): void => {
    const lockKey = channel.endsWith(this.#suffix) ? channel.slice(0, -this.#suffix.length) : channel
    const set = this.#waiters.get(lockKey)
    if (set && set.size > 0) for (const wake of [...set]) wake()
    else if (channel !== lockKey && this.#attempts.has(lockKey)) this.#missed.add(lockKey)
  }
}
