/**
 * What a Redis error means to the service, in one place: every other module asks these
 * predicates instead of reading messages itself.
 *
 * The lists come from the replies Redis sends when it cannot serve a command now, and from the
 * errors ioredis 5 raises itself (built/**: connection, cluster routing, timeouts). A fault must
 * never surface as HTTP 500, so anything that a dead, restarting, failing-over, overloaded or
 * misconfigured node can produce is an outage here: a checkout answers 503 and the client retries
 * with its Idempotency-Key.
 */

/** Redis replies (first word of the error) that mean "not now": the command did not run. */
const OUTAGE_REPLIES =
  /^(CLUSTERDOWN|TRYAGAIN|LOADING|MASTERDOWN|READONLY|NOREPLICAS|MOVED|ASK|BUSY|OOM|NOAUTH|WRONGPASS|UNBLOCKED) |^ERR max number of clients reached/

/**
 * Errors ioredis raises itself. "Too many Cluster redirections" is the one a failover under a
 * crowd produced as HTTP 500 (issue 13): a command bounced between the dead master's connection
 * (Connection is closed → retried after retryDelayOnFailover) and MOVED replies until
 * maxRedirections ran out.
 *
 * "All keys in the pipeline should belong to the same slots allocation group": ioredis builds an
 * auto-pipeline per node and checks it again when it sends it; if the slot table changed in
 * between (a failover, a partition healing) the keys now live on two nodes and ioredis refuses
 * the whole pipeline before sending anything (built/Pipeline.js). Nothing ran, so nothing is lost
 * or repeated: the callers (the worker's reads, settles, gauges) fail and go round again once the
 * table is current (issue 20 saw it 16–21 times per run in the worker's log).
 */
const CLIENT_OUTAGES =
  /All keys in the pipeline should belong to the same slots allocation group|Connection is closed|Cluster isn't ready|Cluster is disconnect|Node is disconnected|Stream isn't writeable|Failed to refresh slots cache|None of startup nodes is available|Too many Cluster redirections|Command timed out|Socket timeout|connect ETIMEDOUT|Ready check failed|Reached the max retries per request limit/

const SOCKET_CODES =
  /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|EHOSTUNREACH|ENETUNREACH|ENOTCONN|ECONNABORTED)$/

// TimeoutError: our own deadline on a Redis call (runtime-timeout.ts) ran out.
const OUTAGE_NAMES = new Set([
  'MaxRetriesPerRequestError',
  'ClusterAllFailedError',
  'AbortError',
  'TimeoutError',
])

/** Redis said something that means "not now" (down, failing over, loading, unreachable, overloaded). */
export function isRedisOutage(err: unknown): boolean {
  if (!(err instanceof Error)) return false
  const e = err as Error & { code?: unknown }
  if (OUTAGE_NAMES.has(e.name)) return true
  if (typeof e.code === 'string' && SOCKET_CODES.test(e.code)) return true
  return OUTAGE_REPLIES.test(e.message) || CLIENT_OUTAGES.test(e.message)
}

/** MOVED/ASK/TRYAGAIN/CLUSTERDOWN: the command was not executed; it may be sent again. */
export function isRedirect(err: unknown): boolean {
  return err instanceof Error && /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN) /.test(err.message)
}

/**
 * NOGROUP: the stream or its consumer group does not exist (a sale whose preload a failover
 * dropped, or a sale reset between a read and the next): there is nothing to read there.
 */
export function isNoGroup(err: unknown): boolean {
  return err instanceof Error && /^NOGROUP /.test(err.message)
}
