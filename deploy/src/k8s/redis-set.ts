// What both Redis StatefulSets (the 5 lock nodes, the 3+3 cluster) are built from: names and
// labels, the redis.conf ConfigMap, the headless Service, the pod template around a `redis`
// container (ACL init, exporter sidecar, probes, mounts, spread) and the data claim. Each caller
// adds what is its own: the conf lines, the ports, the start command, the StatefulSet's policy.
import type { IObjectMeta } from '@kubernetes-models/apimachinery/apis/meta/v1/ObjectMeta'
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap'
import type { IContainerPort } from 'kubernetes-models/v1/ContainerPort'
import type { IEnvVar } from 'kubernetes-models/v1/EnvVar'
import type { IPodTemplateSpec } from 'kubernetes-models/v1/PodTemplateSpec'
import { Service } from 'kubernetes-models/v1/Service'
import type { IServicePort } from 'kubernetes-models/v1/ServicePort'
import type { DeployConfig, Resources } from './config.js'
import {
  ACL_DIR,
  aclInitContainer,
  CONF_DIR,
  CONTAINER_SECURITY,
  exporterSidecar,
  REDIS_POD_SECURITY,
  redisProbes,
  redisVolumes,
  resources,
  SECRET_DIR,
  spreadOut,
} from './redis-common.js'
import { redisTlsMounts, tlsSecretName } from './redis-tls.js'

export interface RedisSetSpec {
  readonly name: string
  /** The ACL init writes the replication user too (the cluster's replicas). */
  readonly replicated: boolean
  /** redis.conf, one directive per line. */
  readonly conf: readonly string[]
  /** The headless Service's ports. */
  readonly servicePorts: IServicePort[]
  /** How the pods spread over zones (spreadOut). */
  readonly zoneSpread: Parameters<typeof spreadOut>[1]
  /** The `redis` container's own parts. */
  readonly redis: {
    readonly command: string[]
    readonly env?: IEnvVar[]
    readonly ports: IContainerPort[]
    readonly resources: Resources
  }
}

export function redisSetParts(cfg: DeployConfig, spec: RedisSetSpec) {
  const labels = { 'app.kubernetes.io/name': spec.name, 'app.kubernetes.io/part-of': 'kunci' }
  const metadata: IObjectMeta = { name: spec.name, namespace: cfg.namespace, labels }
  const configMap = new ConfigMap({
    metadata: { ...metadata, name: `${spec.name}-conf` },
    data: { 'redis.conf': `${spec.conf.join('\n')}\n` },
  })
  const headless = new Service({
    metadata,
    spec: {
      clusterIP: 'None',
      selector: labels,
      // Each node is addressed by its own name, before it is ready too: a node that is not ready
      // is one lost vote (locks) or one the bootstrap waits for (cluster), not a missing name.
      publishNotReadyAddresses: true,
      ports: spec.servicePorts,
    },
  })
  const template: IPodTemplateSpec = {
    metadata: { labels },
    spec: {
      ...spreadOut(labels, spec.zoneSpread),
      securityContext: REDIS_POD_SECURITY,
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: 30,
      initContainers: [aclInitContainer(cfg, spec.replicated, cfg.exporterResources)],
      containers: [
        {
          name: 'redis',
          image: cfg.redisImage,
          command: spec.redis.command,
          ...(spec.redis.env && { env: spec.redis.env }),
          ports: spec.redis.ports,
          resources: resources(spec.redis.resources),
          securityContext: CONTAINER_SECURITY,
          ...redisProbes(cfg),
          volumeMounts: [
            { name: 'data', mountPath: '/data' },
            { name: 'conf', mountPath: CONF_DIR, readOnly: true },
            { name: 'acl', mountPath: ACL_DIR, readOnly: true },
            { name: 'secret', mountPath: SECRET_DIR, readOnly: true },
            { name: 'tmp', mountPath: '/tmp' },
            ...redisTlsMounts(cfg),
          ],
        },
        exporterSidecar(cfg),
      ],
      volumes: redisVolumes(cfg, `${spec.name}-conf`, tlsSecretName(spec.name)),
    },
  }
  return { labels, metadata, configMap, headless, template }
}
