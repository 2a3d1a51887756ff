import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import type { Cache } from 'kunci'
import { LOCK_CHANNELS } from 'kunci'
import { Counter, Gauge, Histogram, type Registry } from 'prom-client'

/**
 * kunci's lock events (node:diagnostics_channel) and cache events (`cache.on`) as Prometheus
 * metrics. Nothing in handlers: the service calls this once at start-up, and `observeCache` once
 * per cache it builds.
 *
 * The names are a contract with deploy/ (alerts and dashboard read them, and a test there checks
 * that each one is exported), so rename only together with those files.
 *
 * diagnostics_channel is process-wide: every Redlock in the process feeds the same series. `lockName`
 * becomes a constant `lock` label so two processes (service, worker) or two bridges in one
 * registry can still be told apart.
 */
export interface KunciBridgeOptions {
  registry: Registry
  /** Value of the `lock` label on every kunci_lock_* series. @defaultValue 'default' */
  lockName?: string
  /**
   * Lock nodes of the Redlock in this process: their per-node series are created at 0 from the
   * start, so `rate()` and `increase()` alerts work before the first error. @defaultValue 0
   */
  nodes?: number
}

export interface KunciBridge {
  /** Counts `cache`'s events under `cache="<name>"`; returns the function that stops counting. */
  observeCache(cache: Pick<Cache, 'on'>, name: string): () => void
  /** Unsubscribes from the lock channels and every observed cache. Safe to call twice. */
  close(): void
}

export const DEFAULT_KUNCI_BRIDGE_OPTIONS = Object.freeze({ lockName: 'default' })

// Acquire latency spans a free lock on a LAN (~1 ms) to a caller that waited out a holder (s).
const ACQUIRE_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
const LOAD_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

interface AcquiredMessage {
  durationMs?: number
  handedOver?: boolean
}
interface FailedMessage {
  code?: string
  durationMs?: number
}
interface NodeErrorMessage {
  node: number
  status: string
}
interface QuarantinedMessage {
  node: number
  quarantineMs: number
}
interface WarningMessage {
  code: string
}

export function bridgeKunciMetrics(options: KunciBridgeOptions): KunciBridge {
  const registers = [options.registry]
  const lock = options.lockName ?? DEFAULT_KUNCI_BRIDGE_OPTIONS.lockName
  const acquireDuration = new Histogram({
    name: 'kunci_lock_acquire_duration_seconds',
    help: 'Time from acquire() to the lock being held, including waiting for a holder (in-process hand-overs have no duration and are not observed)',
    labelNames: ['lock'] as const,
    buckets: ACQUIRE_BUCKETS,
    registers,
  })
  const acquired = new Counter({
    name: 'kunci_lock_acquired_total',
    help: 'Locks acquired (quorum reached, or handed over in-process)',
    labelNames: ['lock'] as const,
    registers,
  })
  const failed = new Counter({
    name: 'kunci_lock_failed_total',
    help: 'acquire() calls that gave up, by error code (E_LOCK_NOT_ACQUIRED: held elsewhere; E_LOCK_UNAVAILABLE: no quorum of nodes answered)',
    labelNames: ['lock', 'code'] as const,
    registers,
  })
  const contention = new Counter({
    name: 'kunci_lock_contention_total',
    help: 'Acquire attempts that found the lock held by someone else',
    labelNames: ['lock'] as const,
    registers,
  })
  const nodeErrors = new Counter({
    name: 'kunci_lock_node_errors_total',
    help: 'Per-node failures during acquire (error, timeout, stale vote, quarantined), by node index in clients',
    labelNames: ['lock', 'node', 'status'] as const,
    registers,
  })
  const lost = new Counter({
    name: 'kunci_lock_lost_total',
    help: 'Locks found lost at release or extend (expired or taken over while held)',
    labelNames: ['lock'] as const,
    registers,
  })
  const quarantined = new Counter({
    name: 'kunci_lock_quarantined_total',
    help: 'Times a lock node was put in restart quarantine (it restarted, or was seen fresh)',
    labelNames: ['lock', 'node'] as const,
    registers,
  })
  const warnings = new Counter({
    name: 'kunci_lock_warnings_total',
    help: 'Configuration warnings from the lock nodes (e.g. KUNCI_W_PERSISTENCE: AOF weaker than required)',
    labelNames: ['lock', 'code'] as const,
    registers,
  })
  // node index -> performance.now() at which its quarantine ends; read at scrape time.
  const quarantineUntil = new Map<number, number>()
  new Gauge({
    name: 'kunci_lock_nodes_quarantined',
    help: 'Lock nodes currently in restart quarantine (they do not vote)',
    labelNames: ['lock'] as const,
    registers,
    collect() {
      const now = performance.now()
      let n = 0
      for (const [node, until] of quarantineUntil) {
        if (until > now) n++
        else quarantineUntil.delete(node)
      }
      this.set({ lock }, n)
    },
  })
  // Pre-create the label-less series so rate() and absent() have something from the first scrape.
  acquired.inc({ lock }, 0)
  contention.inc({ lock }, 0)
  lost.inc({ lock }, 0)
  for (const code of ['E_LOCK_NOT_ACQUIRED', 'E_LOCK_UNAVAILABLE']) failed.inc({ lock, code }, 0)
  for (let node = 0; node < (options.nodes ?? 0); node++) {
    for (const status of ['error', 'timeout']) nodeErrors.inc({ lock, node: String(node), status }, 0)
    quarantined.inc({ lock, node: String(node) }, 0)
  }

  const handlers: Record<string, (message: unknown) => void> = {
    'kunci:lock:acquired': (m) => {
      const msg = m as AcquiredMessage
      acquired.inc({ lock })
      if (!msg.handedOver && typeof msg.durationMs === 'number') {
        acquireDuration.observe({ lock }, msg.durationMs / 1000)
      }
    },
    'kunci:lock:failed': (m) => failed.inc({ lock, code: (m as FailedMessage).code ?? 'unknown' }),
    'kunci:lock:contention': () => contention.inc({ lock }),
    'kunci:lock:node-error': (m) => {
      const msg = m as NodeErrorMessage
      nodeErrors.inc({ lock, node: String(msg.node), status: msg.status })
    },
    'kunci:lock:lost': () => lost.inc({ lock }),
    'kunci:lock:quarantined': (m) => {
      const msg = m as QuarantinedMessage
      quarantined.inc({ lock, node: String(msg.node) })
      quarantineUntil.set(msg.node, performance.now() + msg.quarantineMs)
    },
    'kunci:lock:warning': (m) => warnings.inc({ lock, code: (m as WarningMessage).code }),
  }
  const subscribed: [string, (message: unknown) => void][] = []
  for (const name of LOCK_CHANNELS) {
    const handler = handlers[name]
    if (handler === undefined) continue // released/extended: no metric of their own
    subscribe(name, handler)
    subscribed.push([name, handler])
  }

  const cacheMetrics = createCacheMetrics(registers)
  const cacheStops = new Set<() => void>()
  let closed = false

  return {
    observeCache(cache, name) {
      const offs = [
        cache.on('hit', (e) => cacheMetrics.hits.inc({ cache: name, tier: e.tier })),
        cache.on('miss', () => cacheMetrics.misses.inc({ cache: name })),
        cache.on('stale', (e) => cacheMetrics.stale.inc({ cache: name, reason: e.reason })),
        cache.on('load', (e) => {
          cacheMetrics.loads.inc({ cache: name, outcome: e.outcome })
          cacheMetrics.loadDuration.observe({ cache: name }, e.durationMs / 1000)
        }),
        cache.on('coalesced', (e) => cacheMetrics.coalesced.inc({ cache: name, scope: e.scope })),
        cache.on('error', (e) => cacheMetrics.errors.inc({ cache: name, operation: e.operation })),
        cache.on('bus-drop', () => cacheMetrics.busDrops.inc({ cache: name })),
      ]
      // Every label value the cache can report, at 0 from the first scrape (ratios and alerts
      // over rate() need both sides to exist).
      cacheMetrics.misses.inc({ cache: name }, 0)
      cacheMetrics.busDrops.inc({ cache: name }, 0)
      for (const tier of ['l1', 'l2']) cacheMetrics.hits.inc({ cache: name, tier }, 0)
      for (const reason of ['refreshing', 'loader-failed', 'soft-timeout', 'unavailable']) {
        cacheMetrics.stale.inc({ cache: name, reason }, 0)
      }
      for (const outcome of ['value', 'not-found', 'error'])
        cacheMetrics.loads.inc({ cache: name, outcome }, 0)
      for (const scope of ['process', 'fleet']) cacheMetrics.coalesced.inc({ cache: name, scope }, 0)
      for (const operation of ['read', 'write', 'lease', 'loader', 'deserialize', 'bus', 'release']) {
        cacheMetrics.errors.inc({ cache: name, operation }, 0)
      }
      const stop = () => {
        for (const off of offs.splice(0)) off()
        cacheStops.delete(stop)
      }
      cacheStops.add(stop)
      return stop
    },
    close() {
      if (closed) return
      closed = true
      for (const [name, handler] of subscribed.splice(0)) unsubscribe(name, handler)
      for (const stop of [...cacheStops]) stop()
    },
  }
}

function createCacheMetrics(registers: Registry[]) {
  return {
    hits: new Counter({
      name: 'kunci_cache_hits_total',
      help: 'Fresh values served, by tier (l1: in-process, l2: Redis)',
      labelNames: ['cache', 'tier'] as const,
      registers,
    }),
    misses: new Counter({
      name: 'kunci_cache_misses_total',
      help: 'Reads where neither tier had a usable value',
      labelNames: ['cache'] as const,
      registers,
    }),
    stale: new Counter({
      name: 'kunci_cache_stale_total',
      help: 'Expired values served within their grace period, by reason',
      labelNames: ['cache', 'reason'] as const,
      registers,
    }),
    loads: new Counter({
      name: 'kunci_cache_loads_total',
      help: 'Loader runs in this process, by outcome (value, not-found, error)',
      labelNames: ['cache', 'outcome'] as const,
      registers,
    }),
    loadDuration: new Histogram({
      name: 'kunci_cache_load_duration_seconds',
      help: 'Loader run time',
      labelNames: ['cache'] as const,
      buckets: LOAD_BUCKETS,
      registers,
    }),
    coalesced: new Counter({
      name: 'kunci_cache_coalesced_total',
      help: 'Reads that got a value without running the loader (joined a call in this process, or waited for another process)',
      labelNames: ['cache', 'scope'] as const,
      registers,
    }),
    errors: new Counter({
      name: 'kunci_cache_errors_total',
      help: 'Failures the caller did not see (write, read fallback, lease, loader with stale served, deserialize, bus, release)',
      labelNames: ['cache', 'operation'] as const,
      registers,
    }),
    busDrops: new Counter({
      name: 'kunci_cache_bus_drops_total',
      help: 'Invalidation bus subscriptions lost (L1 flushed and bypassed until the bus is back)',
      labelNames: ['cache'] as const,
      registers,
    }),
  }
}
