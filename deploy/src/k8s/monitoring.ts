import { ConfigMap } from 'kubernetes-models/v1/ConfigMap'
import { renderDashboard } from '../grafana/dashboard.js'
import { RULE_GROUPS } from '../prometheus/rules.js'
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
    metadata: { name, namespace: cfg.namespace, labels: monitoringLabels(cfg) },
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

const monitoringLabels = (cfg: DeployConfig) => ({
  'app.kubernetes.io/part-of': 'kunci',
  ...cfg.monitoringLabels,
})

/** The alert rules of deploy/prometheus/alerts.yml as the operator loads them. */
export interface PrometheusRule {
  apiVersion: 'monitoring.coreos.com/v1'
  kind: 'PrometheusRule'
  metadata: { name: string; namespace: string; labels: Record<string, string> }
  spec: { groups: { name: string; rules: unknown[] }[] }
}

export function prometheusRule(cfg: DeployConfig): PrometheusRule {
  return {
    apiVersion: 'monitoring.coreos.com/v1',
    kind: 'PrometheusRule',
    metadata: { name: 'kunci', namespace: cfg.namespace, labels: monitoringLabels(cfg) },
    spec: { groups: RULE_GROUPS.map((g) => ({ name: g.name, rules: [...g.rules] })) },
  }
}

/**
 * The Grafana dashboard as a ConfigMap for Grafana's dashboard sidecar (kube-prometheus-stack's
 * picks up ConfigMaps labelled `grafana_dashboard: "1"` in its own namespace by default): in the
 * monitoring namespace.
 */
export function dashboardConfigMap(cfg: DeployConfig): ConfigMap {
  return new ConfigMap({
    metadata: {
      name: 'kunci-flash-sale-dashboard',
      namespace: cfg.monitoringNamespace,
      labels: { 'app.kubernetes.io/part-of': 'kunci', grafana_dashboard: '1' },
    },
    data: { 'kunci-flash-sale.json': renderDashboard() },
  })
}
