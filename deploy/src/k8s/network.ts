import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy'
import { Namespace } from 'kubernetes-models/v1/Namespace'
import {
  CLUSTER_BUS_PORT,
  type DeployConfig,
  EXPORTER_PORT,
  HTTP_PORT,
  REDIS_CLIENT_LABEL,
  REDIS_PORT,
  WORKER_PORT,
} from './config.js'
import { BOOTSTRAP_NAME, CLUSTER_NAME } from './redis-cluster.js'
import { REDLOCK_NAME } from './redlock.js'
import { SERVICE_NAME, WORKER_NAME } from './service.js'

const byName = (name: string) => ({ matchLabels: { 'app.kubernetes.io/name': name } })

/** The namespace, with the restricted Pod Security Standard enforced on everything in it. */
export function namespaceObjects(cfg: DeployConfig) {
  return [
    new Namespace({
      metadata: {
        name: cfg.namespace,
        labels: {
          'pod-security.kubernetes.io/enforce': 'restricted',
          'pod-security.kubernetes.io/enforce-version': 'latest',
        },
      },
    }),
  ]
}

/**
 * Default deny for ingress, then one policy per workload that opens exactly its ports:
 * Redis 6379 only to pods labelled kunci.dev/redis-client (service, worker), the cluster bus
 * 16379 only between cluster pods, exporters only to the monitoring namespace.
 */
export function networkPolicies(cfg: DeployConfig) {
  const ns = cfg.namespace
  const monitoring = {
    namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': cfg.monitoringNamespace } },
  }
  const clients = { podSelector: { matchLabels: { [REDIS_CLIENT_LABEL]: 'true' } } }
  const tcp = (port: number) => [{ protocol: 'TCP' as const, port }]
  return [
    new NetworkPolicy({
      metadata: { name: 'default-deny-ingress', namespace: ns },
      spec: { podSelector: {}, policyTypes: ['Ingress'] },
    }),
    new NetworkPolicy({
      metadata: { name: REDLOCK_NAME, namespace: ns },
      spec: {
        podSelector: byName(REDLOCK_NAME),
        policyTypes: ['Ingress'],
        ingress: [
          { from: [clients], ports: tcp(REDIS_PORT) },
          { from: [monitoring], ports: tcp(EXPORTER_PORT) },
        ],
      },
    }),
    new NetworkPolicy({
      metadata: { name: CLUSTER_NAME, namespace: ns },
      spec: {
        podSelector: byName(CLUSTER_NAME),
        policyTypes: ['Ingress'],
        ingress: [
          // Replicas sync from masters over 6379; the bootstrap Job creates/re-meets the cluster.
          {
            from: [clients, { podSelector: byName(CLUSTER_NAME) }, { podSelector: byName(BOOTSTRAP_NAME) }],
            ports: tcp(REDIS_PORT),
          },
          { from: [{ podSelector: byName(CLUSTER_NAME) }], ports: tcp(CLUSTER_BUS_PORT) },
          { from: [monitoring], ports: tcp(EXPORTER_PORT) },
        ],
      },
    }),
    new NetworkPolicy({
      metadata: { name: SERVICE_NAME, namespace: ns },
      spec: {
        podSelector: byName(SERVICE_NAME),
        policyTypes: ['Ingress'],
        // Any in-cluster caller (the ingress controller, Prometheus for /metrics); the Service
        // is ClusterIP, so nothing outside the cluster reaches it without an Ingress.
        ingress: [{ from: [{ namespaceSelector: {} }], ports: tcp(HTTP_PORT) }],
      },
    }),
    new NetworkPolicy({
      metadata: { name: WORKER_NAME, namespace: ns },
      spec: {
        podSelector: byName(WORKER_NAME),
        policyTypes: ['Ingress'],
        ingress: [{ from: [monitoring], ports: tcp(WORKER_PORT) }],
      },
    }),
  ]
}
