// Every failure the topology helpers raise is a TopologyError with a stable `code`, so tests
// and the CLI can branch on `code`/`instanceof` instead of message text.
export type TopologyErrorCode =
  | 'E_INVALID_OPTION'
  | 'E_NODE_START_FAILED'
  | 'E_PORT_UNAVAILABLE'
  | 'E_TOPOLOGY_TIMEOUT'
  | 'E_CLUSTER_COMMAND'
  | 'E_IPTABLES_MISSING'
  | 'E_NOT_ROOT'
  | 'E_IPTABLES_COMMAND'
  | 'E_WALL_CLOCK_UNAVAILABLE'
  | 'E_DELAY_LINK_UNAVAILABLE'

export abstract class TopologyError extends Error {
  abstract readonly code: TopologyErrorCode
  constructor(message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = new.target.name
  }
}

export class InvalidOptionError extends TopologyError {
  readonly code = 'E_INVALID_OPTION'
  constructor(
    readonly option: string,
    message: string,
  ) {
    super(`${option}: ${message}`)
  }
}

/** redis-server exited (or never answered PING) while starting; `logTail` holds its last log lines. */
export class NodeStartError extends TopologyError {
  readonly code = 'E_NODE_START_FAILED'
  constructor(
    readonly nodeName: string,
    readonly port: number,
    readonly logTail: string,
    options?: ErrorOptions,
  ) {
    super(`${nodeName} (port ${port}) failed to start:\n${logTail}`, options)
  }
}

/** No free port could be found or bound after several attempts. */
export class PortUnavailableError extends TopologyError {
  readonly code = 'E_PORT_UNAVAILABLE'
  constructor(readonly attempts: number) {
    super(`no free port found after ${attempts} attempts`)
  }
}

export class TopologyTimeoutError extends TopologyError {
  readonly code = 'E_TOPOLOGY_TIMEOUT'
  constructor(
    readonly waitingFor: string,
    readonly timeoutMs: number,
    options?: ErrorOptions,
  ) {
    super(`timed out after ${timeoutMs} ms waiting for ${waitingFor}`, options)
  }
}

/** A management command (CLUSTER ..., MIGRATE) sent to a node answered with an error. */
export class ClusterCommandError extends TopologyError {
  readonly code = 'E_CLUSTER_COMMAND'
  constructor(
    readonly port: number,
    readonly command: string,
    readonly reply: string,
  ) {
    super(`${command} on port ${port} failed: ${reply}`)
  }
}

/** startNetworkFaults needs the iptables command, which is not on PATH. */
export class IptablesMissingError extends TopologyError {
  readonly code = 'E_IPTABLES_MISSING'
  constructor(options?: ErrorOptions) {
    super(
      'iptables is not installed: network partitions (startNetworkFaults) drop packets with iptables. ' +
        'Install it with `apt-get install -y iptables` (or `node scripts/ensure-tools.mjs iptables`, as root), then run again.',
      options,
    )
  }
}

/** startNetworkFaults changes the machine's packet filter, which only root may do. */
export class NotRootError extends TopologyError {
  readonly code = 'E_NOT_ROOT'
  constructor(readonly uid: number | undefined) {
    super(
      `network partitions (startNetworkFaults) need root to change iptables rules, but this process runs as uid ${uid ?? 'unknown'}: ` +
        'run the tests as root (CI does), e.g. `sudo npx vitest run <file>`, in a container or VM of your own.',
    )
  }
}

/** An iptables command failed (a missing kernel module, no CAP_NET_ADMIN in a container, a typo). */
export class IptablesCommandError extends TopologyError {
  readonly code = 'E_IPTABLES_COMMAND'
  constructor(
    readonly args: readonly string[],
    readonly stderr: string,
    options?: ErrorOptions,
  ) {
    super(
      `iptables ${args.join(' ')} failed: ${stderr.trim() || 'no message'}` +
        (/permission denied|not permitted/i.test(stderr)
          ? ' (root without CAP_NET_ADMIN? A container needs --cap-add=NET_ADMIN)'
          : ''),
      options,
    )
  }
}

/** The steppable wall clock (wall-clock.ts) cannot be built here: no gcc, or not Linux. */
export class WallClockUnavailableError extends TopologyError {
  readonly code = 'E_WALL_CLOCK_UNAVAILABLE'
}

/** The delay links (delay-link.ts) cannot run here: no gcc, not Linux, or the forwarder failed. */
export class DelayLinkUnavailableError extends TopologyError {
  readonly code = 'E_DELAY_LINK_UNAVAILABLE'
}
