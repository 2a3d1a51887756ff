import type { DeployConfig } from './config.js'
import { CLUSTER_NAME } from './redis-cluster.js'
import { REDLOCK_NAME } from './redlock.js'
import { SERVICE_NAME, WORKER_NAME } from './service.js'

/**
 * prometheus-operator ServiceMonitors. Plain objects: kubernetes-models has no CRD types, and
 * the CRD is not installed everywhere (apply monitoring.yaml only where the operator runs).
 */
export interface ServiceMonitor {
  apiVersion: 'monitoring.coreos.com/v1'
  kind: 'ServiceMonitor'
  metadata: { name: string; namespace: string; labels: Record<string, string> }
  spec: {
    selector: { matchLabels: Record<string, string> }
    namespaceSelector: { matchNames: string[] }
    endpoints: { port: string; path: string; interval: string; scrapeTimeout: string }[]
  }
}

export function serviceMonitors(cfg: DeployConfig): ServiceMonitor[] {
  const monitor = (name: string, port: string, interval = '15s'): ServiceMonitor => ({
    apiVersion: 'monitoring.coreos.com/v1',
    kind: 'ServiceMonitor',
    metadata: { name, namespace: cfg.namespace, labels: { 'app.kubernetes.io/part-of': 'kunci' } },
    spec: {
      selector: { matchLabels: { 'app.kubernetes.io/name': name } },
      namespaceSelector: { matchNames: [cfg.namespace] },
      endpoints: [{ port, path: '/metrics', interval, scrapeTimeout: '10s' }],
    },
  })
  return [
    monitor(SERVICE_NAME, 'http'),
    monitor(WORKER_NAME, 'metrics'),
    monitor(REDLOCK_NAME, 'metrics'),
    monitor(CLUSTER_NAME, 'metrics'),
  ]
}
