/**
 * The only place that looks inside Redis error replies. Everything else asks these
 * predicates, so a change in wording across Redis versions is fixed here once.
 */

function message(err: unknown): string {
  return err instanceof Error ? err.message : ''
}

/** The script cache does not have the script (restart, SCRIPT FLUSH, failover to a fresh replica). */
export function isNoScriptError(err: unknown): boolean {
  return message(err).startsWith('NOSCRIPT')
}

/** The server is out of memory under `maxmemory-policy noeviction`. */
export function isOomError(err: unknown): boolean {
  return message(err).startsWith('OOM')
}
