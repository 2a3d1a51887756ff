/**
 * The committed Kubernetes YAML is what the TypeScript renders, every object passes the
 * Kubernetes schema, and the policies of docs/operations.md#security-checklist hold.
 */
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { CLUSTER_BUS_PORT, CONFIGS, EXPORTER_PORT, REDIS_PORT } from '../src/k8s/config.js'
import { buildManifests, type K8sObject, plainObjects, validateManifests } from '../src/k8s/manifests.js'
import { renderAll } from '../src/render-all.js'

const DEPLOY_DIR = new URL('..', import.meta.url)

interface Container {
  name: string
  image?: string
  env?: { name: string; value?: string; valueFrom?: unknown }[]
  ports?: { name?: string; containerPort: number }[]
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> }
  startupProbe?: unknown
  readinessProbe?: unknown
  livenessProbe?: unknown
}
interface PodSpec {
  containers: Container[]
  initContainers?: Container[]
  affinity?: {
    podAntiAffinity?: { requiredDuringSchedulingIgnoredDuringExecution?: { topologyKey: string }[] }
  }
  topologySpreadConstraints?: { topologyKey: string }[]
}
interface Workload extends K8sObject {
  spec: { template: { metadata: { labels: Record<string, string> }; spec: PodSpec }; selector?: unknown }
}

const podSpec = (o: K8sObject) => (o as Workload).spec.template.spec
const isWorkload = (o: K8sObject) => ['Deployment', 'StatefulSet', 'Job'].includes(o.kind)

describe('rendered files', () => {
  it('are committed as rendered (run `npm run deploy:render` after changing deploy/src)', () => {
    for (const [path, text] of renderAll()) {
      const committed = readFileSync(new URL(path, DEPLOY_DIR), 'utf8')
      expect(committed, `${path} is stale`).toBe(text)
    }
  })
})

for (const cfg of CONFIGS) {
  describe(`${cfg.env} manifests`, () => {
    const files = buildManifests(cfg)
    const objects = plainObjects(files)
    const of = (kind: string) => objects.filter((o) => o.kind === kind)
    const named = (kind: string, name: string) => {
      const o = objects.find((x) => x.kind === kind && x.metadata?.name === name)
      if (!o) throw new Error(`no ${kind} ${name}`)
      return o
    }
    const redisSets = [named('StatefulSet', 'redis-redlock'), named('StatefulSet', 'redis-cluster')]

    it('validate against the Kubernetes schemas (all but the ServiceMonitor CRDs)', () => {
      const validated = validateManifests(files)
      expect(validated).toBe(objects.filter((o) => o.apiVersion !== 'monitoring.coreos.com/v1').length)
      expect(validated).toBeGreaterThan(20)
    })

    it('a schema error is caught (the validation is real)', () => {
      const [first] = buildManifests(cfg)
      const ns = first!.objects[0] as unknown as { metadata: { name: unknown }; validate(): void }
      ns.metadata.name = 42
      expect(() => ns.validate()).toThrow()
    })

    it('Redis pods need one host each (required anti-affinity on hostname) and spread over zones', () => {
      for (const s of redisSets) {
        const spec = podSpec(s)
        const required = spec.affinity?.podAntiAffinity?.requiredDuringSchedulingIgnoredDuringExecution ?? []
        expect(
          required.map((r) => r.topologyKey),
          s.metadata?.name,
        ).toContain('kubernetes.io/hostname')
        expect(spec.topologySpreadConstraints?.map((t) => t.topologyKey)).toContain(
          'topology.kubernetes.io/zone',
        )
      }
    })

    it('every long-running container has startup, readiness and liveness probes', () => {
      for (const o of objects.filter((x) => x.kind === 'Deployment' || x.kind === 'StatefulSet')) {
        for (const c of podSpec(o).containers) {
          expect(c.startupProbe, `${o.metadata?.name}/${c.name}`).toBeDefined()
          expect(c.readinessProbe, `${o.metadata?.name}/${c.name}`).toBeDefined()
          expect(c.livenessProbe, `${o.metadata?.name}/${c.name}`).toBeDefined()
        }
      }
    })

    it('every container, init containers and Jobs included, has cpu/memory requests and limits', () => {
      for (const o of objects.filter(isWorkload)) {
        const spec = podSpec(o)
        for (const c of [...spec.containers, ...(spec.initContainers ?? [])]) {
          const r = c.resources
          const where = `${o.metadata?.name}/${c.name}`
          expect(
            r?.requests?.cpu && r.requests.memory && r.limits?.cpu && r.limits.memory,
            where,
          ).toBeTruthy()
        }
      }
    })

    it('Redis probes authenticate (as the monitor user, password from the Secret file)', () => {
      for (const s of redisSets) {
        const redis = podSpec(s).containers.find((c) => c.name === 'redis')!
        for (const p of [redis.startupProbe, redis.readinessProbe, redis.livenessProbe]) {
          const cmd = JSON.stringify(p)
          expect(cmd).toContain('--user monitor')
          expect(cmd).toContain('REDISCLI_AUTH=\\"$(cat /etc/redis-secret/monitor-password)\\"')
        }
      }
    })

    it('every workload has a PodDisruptionBudget with maxUnavailable 1', () => {
      const pdbs = of('PodDisruptionBudget') as unknown as {
        spec: { maxUnavailable: number; selector: { matchLabels: Record<string, string> } }
      }[]
      for (const o of objects.filter((x) => x.kind === 'Deployment' || x.kind === 'StatefulSet')) {
        const labels = (o as Workload).spec.template.metadata.labels
        const pdb = pdbs.find((p) =>
          Object.entries(p.spec.selector.matchLabels).every(([k, v]) => labels[k] === v),
        )
        expect(pdb?.spec.maxUnavailable, o.metadata?.name).toBe(1)
      }
    })

    it('contains no plaintext secret: no Secret object, no literal password/token env, no password in config', () => {
      expect(of('Secret')).toEqual([])
      for (const o of objects.filter(isWorkload)) {
        const spec = podSpec(o)
        for (const c of [...spec.containers, ...(spec.initContainers ?? [])]) {
          for (const e of c.env ?? []) {
            if (/PASSWORD|TOKEN|SECRET|DATABASE_URL|QUEUE_URL/.test(e.name)) {
              expect(e.value, `${o.metadata?.name}/${c.name} ${e.name}`).toBeUndefined()
              expect(e.valueFrom).toBeDefined()
            }
          }
        }
      }
      for (const cm of of('ConfigMap')) {
        const text = JSON.stringify(cm)
        expect(text).not.toMatch(/requirepass|masterauth|user \S+ .*>/)
      }
    })

    it('NetworkPolicies cover every Redis port, and only the cluster reaches its bus port', () => {
      const policies = of('NetworkPolicy') as unknown as {
        metadata: { name: string }
        spec: {
          podSelector: { matchLabels?: Record<string, string> }
          ingress?: {
            from?: { podSelector?: { matchLabels: Record<string, string> } }[]
            ports?: { port: number }[]
          }[]
        }
      }[]
      expect(policies.some((p) => Object.keys(p.spec.podSelector).length === 0 && !p.spec.ingress)).toBe(true)
      for (const s of redisSets) {
        const labels = (s as Workload).spec.template.metadata.labels
        const selecting = policies.filter(
          (p) =>
            p.spec.podSelector.matchLabels &&
            Object.entries(p.spec.podSelector.matchLabels).every(([k, v]) => labels[k] === v),
        )
        const ports = podSpec(s).containers.flatMap((c) => (c.ports ?? []).map((p) => p.containerPort))
        for (const port of ports) {
          const rules = selecting
            .flatMap((p) => p.spec.ingress ?? [])
            .filter((r) => r.ports?.some((x) => x.port === port))
          expect(rules.length, `${s.metadata?.name}:${port}`).toBeGreaterThan(0)
          // Every rule that opens the port names its sources: none is open to all.
          for (const r of rules) expect(r.from?.length, `${s.metadata?.name}:${port}`).toBeGreaterThan(0)
        }
        expect(ports).toEqual(expect.arrayContaining([REDIS_PORT, EXPORTER_PORT]))
      }
      const cluster = policies.find((p) => p.metadata.name === 'redis-cluster')!
      const bus = cluster.spec.ingress!.filter((r) => r.ports?.some((x) => x.port === CLUSTER_BUS_PORT))
      expect(
        bus.flatMap((r) => r.from!.map((f) => f.podSelector?.matchLabels['app.kubernetes.io/name'])),
      ).toEqual(['redis-cluster'])
    })

    it('lock nodes run AOF with the configured fsync and never evict; the cluster has maxmemory and an LFU policy', () => {
      const lockConf = String(
        (named('ConfigMap', 'redis-redlock-conf') as { data?: Record<string, string> }).data?.['redis.conf'],
      )
      expect(lockConf).toMatch(/^appendonly yes$/m)
      expect(lockConf).toMatch(new RegExp(`^appendfsync ${cfg.redlock.appendfsync}$`, 'm'))
      expect(lockConf).toMatch(/^maxmemory-policy noeviction$/m)
      expect(lockConf).not.toMatch(/^replicaof/m)
      const clusterConf = String(
        (named('ConfigMap', 'redis-cluster-conf') as { data?: Record<string, string> }).data?.['redis.conf'],
      )
      expect(clusterConf).toMatch(/^maxmemory \S+$/m)
      expect(clusterConf).toMatch(/^maxmemory-policy (volatile|allkeys)-lfu$/m)
      expect(clusterConf).toMatch(/^cluster-enabled yes$/m)
      const lockSet = named('StatefulSet', 'redis-redlock') as unknown as {
        spec: { replicas: number; volumeClaimTemplates: unknown[] }
      }
      expect(lockSet.spec.replicas).toBe(5)
      expect(lockSet.spec.volumeClaimTemplates).toHaveLength(1)
    })

    it('the service drains: preStop plus drain time fit in the termination grace period', () => {
      const spec = podSpec(named('Deployment', 'flash-sale')) as PodSpec & {
        terminationGracePeriodSeconds: number
        containers: (Container & { lifecycle?: { preStop?: { exec?: { command: string[] } } } })[]
      }
      const sleep = Number(spec.containers[0]!.lifecycle?.preStop?.exec?.command[1])
      expect(sleep).toBeGreaterThan(0)
      expect(spec.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(sleep + 10)
      expect(JSON.stringify(spec.containers[0]!.readinessProbe)).toContain('/readyz')
      expect(JSON.stringify(spec.containers[0]!.livenessProbe)).toContain('/healthz')
    })

    it('the image is a parameter', () => {
      const files = renderAll({ image: 'registry.example/flash-sale:9.9.9' })
      expect(files.get(`k8s/${cfg.env}/flash-sale.yaml`)).toContain(
        'image: registry.example/flash-sale:9.9.9',
      )
      expect(files.get(`k8s/${cfg.env}/flash-sale.yaml`)).not.toContain(cfg.image)
    })
  })
}
