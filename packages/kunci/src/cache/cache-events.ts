/**
 * What the cache reports. Listeners are plain arrays checked before an event object is even
 * built, so a cache nobody listens to pays one property read per would-be event.
 *
 * Listeners run synchronously inside cache calls: keep them cheap, and do not throw (a throwing
 * listener is isolated and ignored, never turned into a cache failure).
 */

export type CacheTier = 'l1' | 'l2'

export interface CacheEvents {
  /** A fresh value (or a cached "not found") was served. */
  hit: { key: string; tier: CacheTier }
  /** Neither tier had a usable value for the key. */
  miss: { key: string }
  /** An expired value within its grace period was served. */
  stale: { key: string; reason: 'refreshing' | 'loader-failed' | 'soft-timeout' | 'unavailable' }
  /** This process ran the loader. `early` for an XFetch refresh ahead of expiry. */
  load: { key: string; durationMs: number; outcome: 'value' | 'not-found' | 'error'; early: boolean }
  /**
   * A caller got a value without running the loader itself: it joined a call already in flight
   * in this process (`process`), or waited for another process's loader (`fleet`).
   */
  coalesced: { key: string; scope: 'process' | 'fleet' }
  /** An XFetch early refresh was started for the key. */
  'early-refresh': { key: string }
  /**
   * Something failed that the caller did not see as an error: a write (e.g. OOM under
   * `noeviction`), a read that fell back to the loader, a lease renewal, a loader whose stale
   * value was served instead, an unreadable cached value, the bus.
   */
  error: {
    key: string | undefined
    operation: 'read' | 'write' | 'lease' | 'loader' | 'deserialize' | 'bus' | 'release'
    error: Error
  }
  /** The bus subscription was lost: L1 was flushed and is bypassed until `bus-up`. */
  'bus-drop': { reason: string }
  /** The bus is subscribed again (also emitted once at start). */
  'bus-up': Record<string, never>
}

export type CacheEventName = keyof CacheEvents
export type CacheListener<E extends CacheEventName> = (event: CacheEvents[E]) => void

export class CacheEmitter {
  // One array per event, created on the first `on`; `undefined` means nobody listens.
  readonly #listeners: { [E in CacheEventName]?: CacheListener<E>[] } = {}

  on<E extends CacheEventName>(name: E, listener: CacheListener<E>): () => void {
    const list = (this.#listeners[name] ??= []) as CacheListener<E>[]
    list.push(listener)
    return () => this.off(name, listener)
  }

  off<E extends CacheEventName>(name: E, listener: CacheListener<E>): void {
    const list = this.#listeners[name] as CacheListener<E>[] | undefined
    const i = list ? list.indexOf(listener) : -1
    if (i < 0) return
    list!.splice(i, 1)
    if (list!.length === 0) delete this.#listeners[name]
  }

  /** Whether anyone listens: check before building an expensive event. */
  has(name: CacheEventName): boolean {
    return this.#listeners[name] !== undefined
  }

  emit<E extends CacheEventName>(name: E, event: CacheEvents[E]): void {
    const list = this.#listeners[name] as CacheListener<E>[] | undefined
    if (list === undefined) return
    for (const listener of list.slice()) {
      try {
        listener(event)
      } catch {
        // A listener's bug must not fail or corrupt the cache call that emitted the event.
      }
    }
  }
}
