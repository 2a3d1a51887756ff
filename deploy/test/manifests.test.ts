/**
 * The committed Kubernetes YAML is what the TypeScript renders, every object passes the
 * Kubernetes schema, and the policies of docs/operations.md#security-checklist hold.
 */
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { parse } from 'yaml'
import { Certificate, CertManagerSchemaError, Issuer } from '../src/k8s/cert-manager.js'
import { CLUSTER_BUS_PORT, CONFIGS, EXPORTER_PORT, REDIS_PORT } from '../src/k8s/config.js'
import {
  buildManifests,
  type K8sObject,
  plainObjects,
  renderManifests,
  validateManifests,
} from '../src/k8s/manifests.js'
import { migrateJobName } from '../src/k8s/service.js'
import { renderAll } from '../src/render-all.js'

const DEPLOY_DIR = new URL('..', import.meta.url)

interface Container {
  name: string
  image?: string
  command?: string[]
  env?: { name: string; value?: string; valueFrom?: unknown }[]
  volumeMounts?: { name: string; mountPath: string }[]
  ports?: { name?: string; containerPort: number }[]
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> }
  startupProbe?: unknown
  readinessProbe?: unknown
  livenessProbe?: unknown
}
interface PodSpec {
  containers: Container[]
  initContainers?: Container[]
  volumes?: { name: string; secret?: { secretName: string; items?: { key: string; path: string }[] } }[]
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

    it("gives the service, and only it, WAITING_ROOM_SECRET from the app Secret's waiting-room-secret", () => {
      const containers = objects
        .filter(isWorkload)
        .flatMap((o) => [...podSpec(o).containers, ...(podSpec(o).initContainers ?? [])])
      const withIt = containers.filter((c) => c.env?.some((e) => e.name === 'WAITING_ROOM_SECRET'))
      expect(withIt.map((c) => c.name)).toEqual(['flash-sale'])
      const e = withIt[0]!.env!.find((x) => x.name === 'WAITING_ROOM_SECRET')!
      expect(e.value).toBeUndefined()
      expect(e.valueFrom).toEqual({ secretKeyRef: { name: 'flash-sale', key: 'waiting-room-secret' } })
      const rendered = renderManifests(cfg)
      expect(rendered.get('flash-sale.yaml') ?? '').toContain('key: waiting-room-secret')
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
        // Line by line: an ACL rule with a password is one line (`user <name> … ><password>`); the
        // dashboard's JSON as one string would match across unrelated lines.
        const lines = Object.values((cm as { data?: Record<string, string> }).data ?? {}).flatMap((v) =>
          v.split('\n'),
        )
        for (const line of lines) expect(line).not.toMatch(/requirepass|masterauth|^\s*user \S+ .*>/)
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

    it('the service drains on its own (DRAIN_DELAY_MS): no exec hook, and the delay plus the drain fit in the grace period', () => {
      const spec = podSpec(named('Deployment', 'flash-sale')) as PodSpec & {
        terminationGracePeriodSeconds: number
        containers: (Container & { lifecycle?: unknown })[]
      }
      const c = spec.containers[0]!
      // The image has no shell and no sleep binary: an exec hook would fail on every rollout.
      expect(c.lifecycle).toBeUndefined()
      const envOf = (name: string) => Number(c.env?.find((e) => e.name === name)?.value)
      expect(envOf('DRAIN_DELAY_MS')).toBeGreaterThan(0)
      expect(envOf('DRAIN_TIMEOUT_MS')).toBeGreaterThan(0)
      expect(spec.terminationGracePeriodSeconds * 1000).toBeGreaterThanOrEqual(
        envOf('DRAIN_DELAY_MS') + envOf('DRAIN_TIMEOUT_MS') + 5_000,
      )
      expect(JSON.stringify(c.readinessProbe)).toContain('/readyz')
      expect(JSON.stringify(c.livenessProbe)).toContain('/healthz')
    })

    it('images are fully qualified, and the migrate Job is named for its release', () => {
      for (const o of objects) {
        for (const image of JSON.stringify(o).match(/"image":"[^"]+"/g) ?? []) {
          // registry host (a dot, a port or localhost) / path : tag or @digest
          expect(image).toMatch(
            /^"image":"(localhost|[^/"]*[.:][^/"]*)\/[^"]+(:[\w.-]+|@sha256:[0-9a-f]{64})"$/,
          )
        }
      }
      const migrateJobs = objects.filter(
        (o) => o.kind === 'Job' && o.metadata?.name?.startsWith('flash-sale-migrate'),
      )
      expect(migrateJobs.map((j) => j.metadata?.name)).toEqual([migrateJobName(cfg.image)])
      expect(migrateJobName('localhost/kunci/flash-sale:0.1.0')).toBe('flash-sale-migrate-0-1-0')
      expect(migrateJobName('registry.example:5000/fs@sha256:' + 'ab'.repeat(32))).toBe(
        'flash-sale-migrate-abababababab',
      )
      expect(migrateJobName('registry.example:5000/fs')).toBe('flash-sale-migrate-latest')
      const next = renderAll({ image: 'localhost/kunci/flash-sale:0.2.0' }).get(
        `k8s/${cfg.env}/flash-sale.yaml`,
      )
      expect(next).toContain('name: flash-sale-migrate-0-2-0')
    })

    it('monitoring: ServiceMonitors and the PrometheusRule carry the selector labels; the rule is alerts.yml; the dashboard ConfigMap is the committed JSON', () => {
      const monitoring = of('ServiceMonitor').concat(of('PrometheusRule'))
      expect(monitoring.length).toBe(5)
      for (const o of monitoring) expect(o.metadata?.labels).toMatchObject(cfg.monitoringLabels)
      const rule = named('PrometheusRule', 'kunci') as unknown as { spec: unknown }
      expect(rule.spec).toEqual(parse(readFileSync(new URL('prometheus/alerts.yml', DEPLOY_DIR), 'utf8')))
      const board = named('ConfigMap', 'kunci-flash-sale-dashboard') as unknown as {
        metadata: { namespace: string; labels: Record<string, string> }
        data: Record<string, string>
      }
      expect(board.metadata.namespace).toBe(cfg.monitoringNamespace)
      expect(board.metadata.labels.grafana_dashboard).toBe('1')
      expect(board.data['kunci-flash-sale.json']).toBe(
        readFileSync(new URL('grafana/kunci-flash-sale.json', DEPLOY_DIR), 'utf8'),
      )
      const labelled = renderAll({ monitoringLabels: { release: 'prom' } }).get(
        `k8s/${cfg.env}/monitoring.yaml`,
      )
      expect(labelled).toContain('release: prom')
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

/** Does a certificate name (`*.` for exactly one leftmost label) cover this host? */
function covers(names: readonly string[], host: string): boolean {
  return names.some((n) =>
    n.startsWith('*.')
      ? host.slice(host.indexOf('.') + 1) === n.slice(2) && !host.startsWith('.')
      : n === host,
  )
}

interface CertObject extends K8sObject {
  spec: {
    secretName: string
    issuerRef: { name: string; kind: string }
    isCA?: boolean
    dnsNames?: string[]
    ipAddresses?: string[]
    usages?: string[]
  }
}

for (const cfg of CONFIGS) {
  describe(`${cfg.env} TLS to Redis`, () => {
    const objects = plainObjects(buildManifests(cfg))
    const named = (kind: string, name: string) => {
      const o = objects.find((x) => x.kind === kind && x.metadata?.name === name)
      if (!o) throw new Error(`no ${kind} ${name}`)
      return o
    }
    const redisSets = [named('StatefulSet', 'redis-redlock'), named('StatefulSet', 'redis-cluster')]
    const confOf = (set: K8sObject) =>
      String(
        (named('ConfigMap', `${set.metadata?.name}-conf`) as { data?: Record<string, string> }).data?.[
          'redis.conf'
        ],
      )
    const certificates = objects.filter((o) => o.kind === 'Certificate') as CertObject[]
    /** The Certificate whose Secret a pod volume mounts. */
    const certOfVolume = (spec: PodSpec, volume: string) => {
      const secret = spec.volumes?.find((v) => v.name === volume)?.secret?.secretName
      const cert = certificates.find((c) => c.spec.secretName === secret)
      if (!cert) throw new Error(`volume ${volume} (Secret ${secret}) is written by no Certificate`)
      return cert
    }
    /** The mounted volume a file lies in (its name), or undefined. */
    const volumeOf = (c: Container, file: string) =>
      c.volumeMounts?.find((m) => file.startsWith(`${m.mountPath}/`))?.name
    const envOf = (c: Container, name: string) => c.env?.find((e) => e.name === name)?.value
    /** Every container that talks to Redis: the ones given Redis nodes, and the bootstrap Job. */
    const clients = objects
      .filter(isWorkload)
      .flatMap((o) => podSpec(o).containers.map((c) => ({ o, spec: podSpec(o), c })))
      .filter(({ o, c }) => envOf(c, 'REDIS_CLUSTER_NODES') || o.metadata?.name === 'redis-cluster-bootstrap')

    it('finds the clients it checks (service, worker, bootstrap Job)', () => {
      expect(clients.map(({ c }) => c.name).sort()).toEqual(['bootstrap', 'flash-sale', 'flash-sale-worker'])
    })

    if (!cfg.tls) {
      it('is plain TCP in dev: no cert-manager object, no tls-port, no TLS env', () => {
        expect(objects.filter((o) => o.apiVersion.startsWith('cert-manager.io/'))).toEqual([])
        for (const s of redisSets) expect(confOf(s)).toMatch(new RegExp(`^port ${REDIS_PORT}$`, 'm'))
        for (const s of redisSets) expect(confOf(s)).not.toMatch(/^tls-/m)
        for (const { c } of clients) expect(envOf(c, 'REDIS_TLS')).toBeUndefined()
        expect(renderManifests(cfg).get('kustomization.yaml')).not.toContain('certificates.yaml')
      })
      return
    }

    it('every Redis container is TLS only: no plaintext port, TLS on the bus and for replication', () => {
      for (const s of redisSets) {
        const conf = confOf(s)
        const where = s.metadata?.name
        expect(conf, where).toMatch(/^port 0$/m)
        expect(conf.match(/^port .*$/gm), where).toEqual(['port 0'])
        expect(conf, where).toMatch(new RegExp(`^tls-port ${REDIS_PORT}$`, 'm'))
        expect(conf, where).toMatch(/^tls-replication yes$/m)
        const redis = podSpec(s).containers.find((c) => c.name === 'redis')!
        // The cert, key and CA files are in a volume written by a Certificate.
        for (const key of ['tls-cert-file', 'tls-key-file', 'tls-ca-cert-file']) {
          const file = conf.match(new RegExp(`^${key} (\\S+)$`, 'm'))?.[1]
          expect(file, `${where} ${key}`).toBeDefined()
          const volume = volumeOf(redis, file!)
          expect(volume, `${where} ${key} ${file} is not mounted`).toBeDefined()
          expect(certOfVolume(podSpec(s), volume!).spec.issuerRef.name).toBe('redis-ca')
        }
        // The only container port besides the exporter's is the TLS port (and the bus).
        expect(redis.ports?.map((p) => p.containerPort).filter((p) => p !== CLUSTER_BUS_PORT)).toEqual([
          REDIS_PORT,
        ])
      }
      const clusterConf = confOf(redisSets[1]!)
      expect(clusterConf).toMatch(/^tls-cluster yes$/m)
      // The bus port is derived from tls-port (+10000 = 16379) unless cluster-port moves it.
      expect(clusterConf).not.toMatch(/^cluster-port /m)
      expect(REDIS_PORT + 10_000).toBe(CLUSTER_BUS_PORT)
    })

    it('probes and exporter sidecars speak TLS with a mounted CA', () => {
      for (const s of redisSets) {
        const spec = podSpec(s)
        const redis = spec.containers.find((c) => c.name === 'redis')!
        for (const p of [redis.startupProbe, redis.readinessProbe, redis.livenessProbe]) {
          const cmd = (p as { exec: { command: string[] } }).exec.command.join(' ')
          const ca = cmd.match(/ --tls --cacert (\S+) /)?.[1]
          expect(ca, `${s.metadata?.name} probe`).toBeDefined()
          expect(volumeOf(redis, ca!), `${s.metadata?.name} probe CA`).toBeDefined()
        }
        const exporter = spec.containers.find((c) => c.name === 'redis-exporter')!
        expect(envOf(exporter, 'REDIS_ADDR')).toBe(`rediss://127.0.0.1:${REDIS_PORT}`)
        const ca = envOf(exporter, 'REDIS_EXPORTER_TLS_CA_CERT_FILE')!
        const volume = volumeOf(exporter, ca)
        expect(volume, `${s.metadata?.name} exporter CA`).toBeDefined()
        certOfVolume(spec, volume!)
        // The sidecars connect to 127.0.0.1, which redis_exporter (Go) checks against the certificate.
        expect(certOfVolume(spec, 'tls').spec.ipAddresses).toContain('127.0.0.1')
      }
    })

    it('every client container that talks to Redis has TLS on and the CA mounted (and no private key)', () => {
      for (const { o, spec, c } of clients) {
        const where = `${o.metadata?.name}/${c.name}`
        const ca =
          o.kind === 'Job'
            ? c.command?.join(' ').match(/--tls --cacert (\S+) /)?.[1]
            : envOf(c, 'REDIS_TLS_CA_FILE')
        if (o.kind !== 'Job') expect(envOf(c, 'REDIS_TLS'), where).toBe('true')
        expect(ca, where).toBeDefined()
        const volume = volumeOf(c, ca!)
        expect(volume, `${where}: ${ca} is not mounted`).toBeDefined()
        const v = spec.volumes!.find((x) => x.name === volume)!
        expect(v.secret?.items, where).toEqual([{ key: 'ca.crt', path: ca!.split('/').pop() }])
        // That CA issued every Redis certificate.
        const issuer = certOfVolume(spec, volume!).spec.issuerRef.name
        for (const s of redisSets) expect(certOfVolume(podSpec(s), 'tls').spec.issuerRef.name).toBe(issuer)
      }
    })

    it("every Certificate's names cover the pods its clients reach (by name) and allow node-to-node TLS", () => {
      const hostsOf = (list: string | undefined) => (list ?? '').split(',').map((a) => a.split(':')[0]!)
      const service = clients.find(({ c }) => c.name === 'flash-sale')!.c
      const bootstrap = clients.find(({ c }) => c.name === 'bootstrap')!.c
      const [redlock, cluster] = redisSets.map((s) => certOfVolume(podSpec(s), 'tls'))
      const reached = {
        redlock: hostsOf(envOf(service, 'REDLOCK_NODES')),
        cluster: [
          ...hostsOf(envOf(service, 'REDIS_CLUSTER_NODES')),
          ...(bootstrap
            .command!.join(' ')
            .match(/HOSTS="([^"]+)"/)?.[1]
            ?.split(' ') ?? []),
          // What MOVED replies carry (cluster-announce-hostname), for each pod.
          ...Array.from(
            { length: 6 },
            (_, i) => `redis-cluster-${i}.redis-cluster.${cfg.namespace}.svc.cluster.local`,
          ),
        ],
      }
      expect(reached.redlock).toHaveLength(5)
      expect(reached.cluster.length).toBeGreaterThanOrEqual(12)
      for (const h of reached.redlock) expect(covers(redlock!.spec.dnsNames!, h), h).toBe(true)
      for (const h of reached.cluster) expect(covers(cluster!.spec.dnsNames!, h), h).toBe(true)
      // The check is real: a lock node's name is not covered by the cluster's certificate.
      expect(covers(cluster!.spec.dnsNames!, reached.redlock[0]!)).toBe(false)
      for (const c of [redlock!, cluster!]) {
        expect(c.spec.usages).toEqual(expect.arrayContaining(['server auth', 'client auth']))
      }
    })

    it('cert-manager objects: a CA issuer built on a CA Certificate, in certificates.yaml, in the kustomization', () => {
      const ca = certificates.find((c) => c.spec.isCA)!
      const issuer = objects.find(
        (o) => o.kind === 'Issuer' && o.metadata?.name === 'redis-ca',
      ) as unknown as {
        spec: { ca: { secretName: string } }
      }
      expect(issuer.spec.ca.secretName).toBe(ca.spec.secretName)
      const rendered = renderManifests(cfg)
      expect(rendered.get('certificates.yaml')).toContain('kind: Certificate')
      expect(rendered.get('kustomization.yaml')).toContain('- certificates.yaml')
      expect(rendered.get('kustomization.yaml')).not.toContain('monitoring.yaml')
    })
  })
}

describe('cert-manager builders', () => {
  const meta = { name: 'x', namespace: 'kunci' }
  const good = () =>
    new Certificate(meta, {
      secretName: 'x-tls',
      issuerRef: { name: 'redis-ca', kind: 'Issuer', group: 'cert-manager.io' },
      dnsNames: ['*.x.kunci.svc.cluster.local'],
      usages: ['server auth'],
    })

  it('accept a well-formed Certificate and Issuer', () => {
    expect(() => good().validate()).not.toThrow()
    expect(() => new Issuer(meta, { ca: { secretName: 'redis-ca' } }).validate()).not.toThrow()
  })

  it.each([
    [
      'no secretName',
      (c: Certificate) => Object.assign(c.spec, { secretName: undefined }),
      'spec.secretName',
    ],
    ['no issuer', (c: Certificate) => Object.assign(c.spec, { issuerRef: {} }), 'spec.issuerRef.name'],
    ['no names', (c: Certificate) => Object.assign(c.spec, { dnsNames: [] }), 'spec'],
    ['a bad DNS name', (c: Certificate) => Object.assign(c.spec, { dnsNames: ['a.*.b'] }), 'spec.dnsNames'],
    ['a bad usage', (c: Certificate) => Object.assign(c.spec, { usages: ['server'] }), 'spec.usages'],
    ['a bad duration', (c: Certificate) => Object.assign(c.spec, { duration: '90d' }), 'spec.duration'],
    [
      'no namespace',
      (c: Certificate) => Object.assign(c.metadata, { namespace: undefined }),
      'metadata.namespace',
    ],
  ])('reject a Certificate with %s', (_, breakIt, field) => {
    const c = good()
    breakIt(c)
    expect(() => c.validate()).toThrow(CertManagerSchemaError)
    try {
      c.validate()
    } catch (err) {
      expect((err as CertManagerSchemaError).code).toBe('E_CERT_MANAGER_SCHEMA')
      expect((err as CertManagerSchemaError).field).toBe(field)
    }
  })

  it('reject an Issuer with no or two issuer types', () => {
    expect(() => new Issuer(meta, {}).validate()).toThrow(CertManagerSchemaError)
    expect(() => new Issuer(meta, { selfSigned: {}, ca: { secretName: 'a' } }).validate()).toThrow(
      CertManagerSchemaError,
    )
  })
})
