import { Deployment } from 'kubernetes-models/apps/v1/Deployment'
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler'
import { Job } from 'kubernetes-models/batch/v1/Job'
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget'
import type { IContainer } from 'kubernetes-models/v1/Container'
import type { IEnvVar } from 'kubernetes-models/v1/EnvVar'
import type { IPodSpec } from 'kubernetes-models/v1/PodSpec'
import { Service } from 'kubernetes-models/v1/Service'
import {
  APP_SECRET,
  type DeployConfig,
  HTTP_PORT,
  REDIS_CLIENT_LABEL,
  REDIS_USERS_SECRET,
  WORKER_PORT,
} from './config.js'
import { CLUSTER_NAME, clusterNodeAddresses } from './redis-cluster.js'
import { CONTAINER_SECURITY, resources } from './redis-common.js'
import { caMounts, clientTlsEnv, tlsSecretName, tlsVolumes } from './redis-tls.js'
import { redlockNodeAddresses } from './redlock.js'

export const SERVICE_NAME = 'flash-sale'
export const WORKER_NAME = 'flash-sale-worker'
export const MIGRATE_NAME = 'flash-sale-migrate'
const MAIN = 'apps/flash-sale/dist/cli/main.js'

/**
 * Drain budget. On SIGTERM the service keeps serving for DRAIN_DELAY_MS with /readyz false while
 * the endpoint is removed from every kube-proxy and load balancer (no new requests), then closes
 * its listener and finishes what is in flight (DRAIN_TIMEOUT_MS, 10 s). The delay is the
 * service's own, not a preStop `sleep`: the image has no shell and no sleep binary (issue 38).
 * terminationGracePeriodSeconds covers both plus a margin before SIGKILL.
 */
export const DRAIN_DELAY_SECONDS = 5
export const DRAIN_SECONDS = 10
export const TERMINATION_GRACE_SECONDS = DRAIN_DELAY_SECONDS + DRAIN_SECONDS + 10

/**
 * The migrate Job's name, one per release: a Job's pod template is immutable, so a Job that kept
 * its name across releases made the next `kubectl apply` fail ("field is immutable") while the
 * finished Job was kept (ttlSecondsAfterFinished). The release is the image's tag, or the first 12
 * hex digits of its digest. Re-applying the same release is a no-op. Rendering sets it; an image
 * changed afterwards (kustomize `images:`) leaves the name as it was: docs/operations.md
 * ("Upgrades") says what to do then.
 */
export function migrateJobName(image: string): string {
  const at = image.indexOf('@')
  const name = at === -1 ? image : image.slice(0, at)
  const colon = name.lastIndexOf(':')
  const tag = colon > name.lastIndexOf('/') ? name.slice(colon + 1) : 'latest'
  const release =
    at === -1
      ? tag
      : image
          .slice(at + 1)
          .replace(/^sha256:/, '')
          .slice(0, 12)
  const label = release
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
  return `${MIGRATE_NAME}-${label}`.slice(0, 63).replace(/-+$/, '')
}

function env(cfg: DeployConfig): IEnvVar[] {
  const secret = (name: string, key: string) => ({ secretKeyRef: { name, key } })
  return [
    { name: 'REDIS_CLUSTER_NODES', value: clusterNodeAddresses(cfg).join(',') },
    { name: 'REDLOCK_NODES', value: redlockNodeAddresses(cfg).join(',') },
    { name: 'REDIS_USERNAME', value: 'flash-sale' },
    { name: 'REDIS_PASSWORD', valueFrom: secret(REDIS_USERS_SECRET, 'app-password') },
    ...clientTlsEnv(cfg),
    { name: 'DATABASE_URL', valueFrom: secret(APP_SECRET, 'database-url') },
    {
      name: 'QUEUE_URL',
      valueFrom: { secretKeyRef: { name: APP_SECRET, key: 'queue-url', optional: true } },
    },
    { name: 'ADMIN_TOKEN', valueFrom: secret(APP_SECRET, 'admin-token') },
    { name: 'STRATEGY', value: cfg.service.strategy },
    { name: 'DURABILITY', value: 'replica' },
    { name: 'PORT', value: String(HTTP_PORT) },
    { name: 'WORKER_PORT', value: String(WORKER_PORT) },
    { name: 'NODE_ENV', value: 'production' },
  ]
}

function podSpec(container: IContainer, volumes: NonNullable<IPodSpec['volumes']> = []): IPodSpec {
  return {
    securityContext: {
      runAsNonRoot: true,
      runAsUser: 1000,
      runAsGroup: 1000,
      seccompProfile: { type: 'RuntimeDefault' },
    },
    automountServiceAccountToken: false,
    enableServiceLinks: false,
    terminationGracePeriodSeconds: TERMINATION_GRACE_SECONDS,
    containers: [container],
    volumes: [{ name: 'tmp', emptyDir: { sizeLimit: '64Mi' } }, ...volumes],
    // Spread replicas over hosts when possible; losing a host must not take the whole service.
    topologySpreadConstraints: [
      {
        maxSkew: 1,
        topologyKey: 'kubernetes.io/hostname',
        whenUnsatisfiable: 'ScheduleAnyway',
        labelSelector: { matchLabels: { 'app.kubernetes.io/name': container.name } },
      },
    ],
  }
}

function httpProbes(port: number): Pick<IContainer, 'startupProbe' | 'readinessProbe' | 'livenessProbe'> {
  return {
    startupProbe: { httpGet: { path: '/healthz', port }, periodSeconds: 2, failureThreshold: 60 },
    readinessProbe: {
      httpGet: { path: '/readyz', port },
      periodSeconds: 5,
      timeoutSeconds: 2,
      failureThreshold: 1,
    },
    livenessProbe: {
      httpGet: { path: '/healthz', port },
      periodSeconds: 10,
      timeoutSeconds: 3,
      failureThreshold: 3,
    },
  }
}

export function serviceObjects(cfg: DeployConfig) {
  const ns = cfg.namespace
  // The CA that signed every Redis certificate (both Certificates have one issuer): the cluster
  // Secret's ca.crt verifies the lock nodes too.
  const caVolumes = tlsVolumes(cfg, tlsSecretName(CLUSTER_NAME), false)
  const labels = { 'app.kubernetes.io/name': SERVICE_NAME, 'app.kubernetes.io/part-of': 'kunci' }
  const podLabels = { ...labels, [REDIS_CLIENT_LABEL]: 'true' }
  const server: IContainer = {
    name: SERVICE_NAME,
    image: cfg.image,
    command: ['node', MAIN, 'serve'],
    env: [
      ...env(cfg),
      // The waiting room's ticket key: the same on every instance (a ticket signed by one pod is
      // checked by another). Only the service signs and checks tickets; the worker never sees it.
      {
        name: 'WAITING_ROOM_SECRET',
        valueFrom: { secretKeyRef: { name: APP_SECRET, key: 'waiting-room-secret' } },
      },
      { name: 'DRAIN_DELAY_MS', value: String(DRAIN_DELAY_SECONDS * 1000) },
      { name: 'DRAIN_TIMEOUT_MS', value: String(DRAIN_SECONDS * 1000) },
    ],
    ports: [{ name: 'http', containerPort: HTTP_PORT }],
    resources: resources(cfg.service.resources),
    securityContext: CONTAINER_SECURITY,
    ...httpProbes(HTTP_PORT),
    volumeMounts: [{ name: 'tmp', mountPath: '/tmp' }, ...caMounts(cfg)],
  }
  const deployment = new Deployment({
    metadata: { name: SERVICE_NAME, namespace: ns, labels },
    spec: {
      selector: { matchLabels: labels },
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0, maxSurge: '25%' } },
      template: { metadata: { labels: podLabels }, spec: podSpec(server, caVolumes) },
    },
  })
  const service = new Service({
    metadata: { name: SERVICE_NAME, namespace: ns, labels },
    spec: { selector: labels, ports: [{ name: 'http', port: 80, targetPort: 'http' }] },
  })
  const hpa = new HorizontalPodAutoscaler({
    metadata: { name: SERVICE_NAME, namespace: ns, labels },
    spec: {
      scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: SERVICE_NAME },
      minReplicas: cfg.service.minReplicas,
      maxReplicas: cfg.service.maxReplicas,
      metrics: [
        {
          type: 'Resource',
          resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: 60 } },
        },
      ],
      // A sale opens as a spike: scale up at once, down slowly (a second wave often follows).
      behavior: {
        scaleUp: {
          stabilizationWindowSeconds: 0,
          policies: [{ type: 'Percent', value: 100, periodSeconds: 15 }],
        },
        scaleDown: {
          stabilizationWindowSeconds: 300,
          policies: [{ type: 'Percent', value: 20, periodSeconds: 60 }],
        },
      },
    },
  })
  const pdb = new PodDisruptionBudget({
    metadata: { name: SERVICE_NAME, namespace: ns, labels },
    spec: { maxUnavailable: 1, selector: { matchLabels: labels } },
  })

  const workerLabels = { 'app.kubernetes.io/name': WORKER_NAME, 'app.kubernetes.io/part-of': 'kunci' }
  const worker: IContainer = {
    name: WORKER_NAME,
    image: cfg.image,
    command: ['node', MAIN, 'worker'],
    env: env(cfg),
    ports: [{ name: 'metrics', containerPort: WORKER_PORT }],
    resources: resources(cfg.worker.resources),
    securityContext: CONTAINER_SECURITY,
    ...httpProbes(WORKER_PORT),
    volumeMounts: [{ name: 'tmp', mountPath: '/tmp' }, ...caMounts(cfg)],
  }
  const workerDeployment = new Deployment({
    metadata: { name: WORKER_NAME, namespace: ns, labels: workerLabels },
    spec: {
      replicas: cfg.worker.replicas,
      selector: { matchLabels: workerLabels },
      template: {
        metadata: { labels: { ...workerLabels, [REDIS_CLIENT_LABEL]: 'true' } },
        spec: podSpec(worker, caVolumes),
      },
    },
  })
  const workerService = new Service({
    metadata: { name: WORKER_NAME, namespace: ns, labels: workerLabels },
    spec: { selector: workerLabels, ports: [{ name: 'metrics', port: WORKER_PORT, targetPort: 'metrics' }] },
  })
  const workerPdb = new PodDisruptionBudget({
    metadata: { name: WORKER_NAME, namespace: ns, labels: workerLabels },
    spec: { maxUnavailable: 1, selector: { matchLabels: workerLabels } },
  })

  // Migrations run once per release as a Job, not as an initContainer of every replica: N
  // replicas starting together would race on the same schema change.
  const migrateLabels = { 'app.kubernetes.io/name': MIGRATE_NAME, 'app.kubernetes.io/part-of': 'kunci' }
  const migrate = new Job({
    metadata: { name: migrateJobName(cfg.image), namespace: ns, labels: migrateLabels },
    spec: {
      backoffLimit: 3,
      ttlSecondsAfterFinished: 3600,
      template: {
        metadata: { labels: migrateLabels },
        spec: {
          ...podSpec({
            name: MIGRATE_NAME,
            image: cfg.image,
            command: ['node', MAIN, 'migrate'],
            env: [
              {
                name: 'DATABASE_URL',
                valueFrom: { secretKeyRef: { name: APP_SECRET, key: 'database-url' } },
              },
            ],
            resources: resources(cfg.worker.resources),
            securityContext: CONTAINER_SECURITY,
            volumeMounts: [{ name: 'tmp', mountPath: '/tmp' }],
          }),
          restartPolicy: 'OnFailure',
        },
      },
    },
  })
  return [deployment, service, hpa, pdb, workerDeployment, workerService, workerPdb, migrate]
}
