export type { TopologyTls } from './certificates.js'
export { generateCertificates } from './certificates.js'
export type {
  ChaosContext,
  ChaosEvent,
  ChaosSchedule,
  ChaosStep,
  ChaosUndo,
  ChaosUpdate,
  FaultHandler,
  KillableProcess,
  KillMasterOptions,
  PartitionMasterOptions,
  ResolvedChaosStep,
  RunChaosOptions,
} from './chaos.js'
export {
  isolateNode,
  killClusterMaster,
  killNode,
  killProcess,
  parseDuration,
  partitionMaster,
  pauseNode,
  pickNode,
  resolveSchedule,
  runChaos,
} from './chaos.js'
export { lineReader } from './child-lines.js'
export type { MigrateSlotOptions, RedisCluster, StartClusterOptions } from './cluster.js'
export { DEFAULT_CLUSTER_OPTIONS, startCluster } from './cluster.js'
export type { DelayLinks, DelayLinkTarget } from './delay-link.js'
export { startDelayLinks } from './delay-link.js'
export type { TopologyErrorCode } from './errors.js'
export {
  ClusterCommandError,
  DelayLinkUnavailableError,
  InvalidOptionError,
  IptablesCommandError,
  IptablesMissingError,
  NodeStartError,
  NotRootError,
  PortUnavailableError,
  TopologyError,
  TopologyTimeoutError,
  WallClockUnavailableError,
} from './errors.js'
export type { KeyContents, Keyspace } from './keyspace.js'
export { readKeyspace } from './keyspace.js'
export type { NetworkCut, NetworkFaults, NetworkFaultsOptions } from './network.js'
export { startNetworkFaults } from './network.js'
export type { RedisNode } from './node.js'
export { distinctHost } from './node.js'
export type { AofMode, NodeSet, StartNodesOptions } from './node-set.js'
export { DEFAULT_NODES_OPTIONS, startNodes } from './node-set.js'
export { findFreePort } from './ports.js'
export type { FaultProxy, LatencyDirection, ProxyListenOptions } from './proxy.js'
export { startProxy } from './proxy.js'
export { trackServer as trackChildProcess, untrackServer as untrackChildProcess } from './reaper.js'
export type { AdminUserOptions, TlsOptions } from './security.js'
export { DEFAULT_ADMIN_USERNAME, DEFAULT_USER_LINE } from './security.js'
export type { WaitOptions } from './wait.js'
export { DEFAULT_WAIT_OPTIONS, eventually, readDefined, readUntil, until } from './wait.js'
