/**
 * What differs between the dev and prod renderings. Everything else (ACLs, policies, probes apart
 * from their TLS flags) is the same in both, so what is tested in dev is what runs in prod; the
 * TLS-only redis.conf of prod is run on a real redis-server by deploy/test/redis-conf.test.ts.
 */
export interface Resources {
  cpuRequest: string
  memoryRequest: string
  cpuLimit: string
  memoryLimit: string
}

export interface DeployConfig {
  /** 'dev' | 'prod': the folder under deploy/k8s/. */
  env: string
  namespace: string
  /** Namespace Prometheus (and its ServiceMonitor scrapes) runs in: allowed to reach the exporters. */
  monitoringNamespace: string
  /**
   * Labels on the ServiceMonitors and the PrometheusRule, for the operator's selectors: a default
   * kube-prometheus-stack selects only objects labelled `release: <its Helm release>`, and skips
   * the others without a word. Set yours (`kubectl get prometheus -A -o yaml | grep -A3 Selector`).
   * @defaultValue { release: 'kube-prometheus-stack' }
   */
  monitoringLabels: Readonly<Record<string, string>>
  /**
   * The service's image, fully qualified: an unqualified `kunci/flash-sale` is pulled from Docker
   * Hub, from a namespace this project does not own. The default is the name `npm run image` gives
   * the image it builds (deploy/image/build.mjs); push it to your registry and set yours (kustomize
   * `images:`, or `npm run deploy:render -- --image`), by digest where you can.
   * @defaultValue 'localhost/kunci/flash-sale:0.1.0'
   */
  image: string
  /**
   * Official Redis image, 7.2.11 or later: hostname announcements (cluster-announce-hostname) need
   * Redis ≥ 7, and 7.2.11 has the fixes for CVE-2025-49844 (Lua use-after-free; this service runs
   * Lua all day) and CVE-2024-31228. The AOF's EXEC with the default user off (redis/redis#14541)
   * is handled by the ACL rule, whatever the version (docs/cluster.md).
   */
  redisImage: string
  /** The same major version as Debian's prometheus-redis-exporter the metric names are checked against. */
  exporterImage: string
  /**
   * TLS only between every client and Redis, on the cluster bus and for replication, with
   * certificates from cert-manager (certificates.yaml; see docs/operations.md#decisions). Off in
   * dev so that a kind cluster needs no cert-manager.
   */
  tls: boolean
  /** Storage class of the Redis PVCs; undefined takes the cluster default. */
  storageClassName: string | undefined
  redlock: {
    /** appendfsync of the lock nodes (see docs/operations.md#decisions). */
    appendfsync: 'always' | 'everysec'
    storage: string
    /** Lock keys are tiny; maxmemory stops a runaway client long before the node is OOM-killed. */
    maxmemory: string
    resources: Resources
    /** How zones are spread: DoNotSchedule refuses to put 3 of 5 nodes in one zone. */
    zoneSpread: 'DoNotSchedule' | 'ScheduleAnyway'
  }
  cluster: {
    storage: string
    maxmemory: string
    /** See docs/operations.md#decisions: volatile-lfu evicts only keys with a TTL (cache entries). */
    evictionPolicy: 'volatile-lfu' | 'allkeys-lfu'
    resources: Resources
    zoneSpread: 'DoNotSchedule' | 'ScheduleAnyway'
  }
  service: {
    minReplicas: number
    maxReplicas: number
    resources: Resources
    strategy: 'lua' | 'redlock' | 'naive'
  }
  worker: { replicas: number; resources: Resources }
  exporterResources: Resources
}

const EXPORTER: Resources = {
  cpuRequest: '20m',
  memoryRequest: '32Mi',
  cpuLimit: '100m',
  memoryLimit: '64Mi',
}
const COMMON = {
  namespace: 'kunci',
  monitoringNamespace: 'monitoring',
  monitoringLabels: { release: 'kube-prometheus-stack' },
  image: 'localhost/kunci/flash-sale:0.1.0',
  redisImage: 'docker.io/library/redis:7.2.11',
  exporterImage: 'docker.io/oliver006/redis_exporter:v1.45.0',
  storageClassName: undefined,
  exporterResources: EXPORTER,
} as const

export const DEV_CONFIG: DeployConfig = Object.freeze({
  ...COMMON,
  env: 'dev',
  tls: false,
  redlock: {
    appendfsync: 'everysec',
    storage: '1Gi',
    maxmemory: '100mb',
    resources: { cpuRequest: '50m', memoryRequest: '64Mi', cpuLimit: '500m', memoryLimit: '192Mi' },
    zoneSpread: 'ScheduleAnyway',
  },
  cluster: {
    storage: '1Gi',
    maxmemory: '200mb',
    evictionPolicy: 'volatile-lfu',
    resources: { cpuRequest: '100m', memoryRequest: '128Mi', cpuLimit: '1', memoryLimit: '320Mi' },
    zoneSpread: 'ScheduleAnyway',
  },
  service: {
    minReplicas: 1,
    maxReplicas: 3,
    strategy: 'lua',
    resources: { cpuRequest: '100m', memoryRequest: '128Mi', cpuLimit: '1', memoryLimit: '256Mi' },
  },
  worker: {
    replicas: 1,
    resources: { cpuRequest: '50m', memoryRequest: '128Mi', cpuLimit: '500m', memoryLimit: '256Mi' },
  },
} satisfies DeployConfig)

export const PROD_CONFIG: DeployConfig = Object.freeze({
  ...COMMON,
  env: 'prod',
  tls: true,
  redlock: {
    appendfsync: 'always',
    storage: '10Gi',
    maxmemory: '256mb',
    resources: { cpuRequest: '250m', memoryRequest: '384Mi', cpuLimit: '1', memoryLimit: '512Mi' },
    zoneSpread: 'DoNotSchedule',
  },
  cluster: {
    storage: '20Gi',
    maxmemory: '3gb',
    evictionPolicy: 'volatile-lfu',
    resources: { cpuRequest: '1', memoryRequest: '4Gi', cpuLimit: '2', memoryLimit: '5Gi' },
    zoneSpread: 'DoNotSchedule',
  },
  service: {
    minReplicas: 3,
    maxReplicas: 20,
    strategy: 'lua',
    resources: { cpuRequest: '500m', memoryRequest: '256Mi', cpuLimit: '1', memoryLimit: '512Mi' },
  },
  worker: {
    replicas: 2,
    resources: { cpuRequest: '250m', memoryRequest: '256Mi', cpuLimit: '1', memoryLimit: '512Mi' },
  },
} satisfies DeployConfig)

export const CONFIGS: readonly DeployConfig[] = Object.freeze([DEV_CONFIG, PROD_CONFIG])

/** A config with the image (and anything else) overridden, e.g. `withOverrides(PROD_CONFIG, { image })`. */
export function withOverrides(base: DeployConfig, overrides: Partial<DeployConfig>): DeployConfig {
  return { ...base, ...overrides }
}

export const REDIS_PORT = 6379
export const CLUSTER_BUS_PORT = 16379
export const EXPORTER_PORT = 9121
export const HTTP_PORT = 8080
export const WORKER_PORT = 9464

/** Secrets the manifests reference and never contain (created with kubectl, see docs/operations.md). */
export const REDIS_USERS_SECRET = 'redis-users'
export const APP_SECRET = 'flash-sale'
/** Pods with this label may reach Redis (NetworkPolicy). */
export const REDIS_CLIENT_LABEL = 'kunci.dev/redis-client'
