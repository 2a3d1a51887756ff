/**
 * The redis.conf of both ConfigMaps is accepted by a real redis-server, which then runs with the
 * settings the manifests promise (AOF and fsync, noeviction on lock nodes, LFU + maxmemory on the
 * cluster). Directives that point at pod paths or ports (port, tls-port, bind, dir, aclfile,
 * include, cluster-config-file) are left to the test topology; the TLS files of prod are moved
 * from the pod's mount to a generated test certificate with the same file names.
 *
 * prod (TLS only): the node answers over TLS with the CA and refuses plain TCP and other CAs;
 * the manifest's probe command passes over TLS and fails without its TLS flags; redis_exporter,
 * run with the sidecar's environment, scrapes over rediss://; the cluster bus speaks TLS.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process'
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  findFreePort,
  generateCertificates,
  type NodeSet,
  readUntil,
  startNodes,
  type TopologyTls,
} from '@kunci/topology'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { CONFIGS, REDIS_PORT } from '../src/k8s/config.js'
import { type K8sObject, plainObjects } from '../src/k8s/manifests.js'
import { clusterObjects } from '../src/k8s/redis-cluster.js'
import { REDIS_USERS, SECRET_DIR } from '../src/k8s/redis-common.js'
import { CA_DIR, TLS_DIR } from '../src/k8s/redis-tls.js'
import { redlockObjects } from '../src/k8s/redlock.js'

const POD_ONLY = new Set(['port', 'tls-port', 'bind', 'dir', 'aclfile', 'include', 'cluster-config-file'])
const sets: NodeSet[] = []
const children: ChildProcess[] = []
afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.exitCode === null && c.signalCode === null) {
      const exited = new Promise((resolve) => c.once('exit', resolve))
      c.kill('SIGTERM')
      await exited
    }
  }
  for (const s of sets.splice(0)) await s.stop()
})

function confOf(objects: object[]): string {
  const cm = plainObjects([{ file: 'x', objects: objects as never }]).find(
    (o) => o.kind === 'ConfigMap',
  ) as unknown as {
    data: Record<string, string>
  }
  return cm.data['redis.conf']!
}

/**
 * redis.conf lines as command-line arguments (`key value…` → `--key value…`), with pod paths
 * moved (`moves`: pod directory → local directory).
 */
function asArgs(conf: string, opts: { moves?: Record<string, string>; dropTls?: boolean } = {}): string[] {
  const moves = opts.moves ?? {}
  const args: string[] = []
  const move = (v: string) =>
    Object.entries(moves).reduce(
      (x, [pod, local]) => (x.startsWith(`${pod}/`) ? local + x.slice(pod.length) : x),
      v,
    )
  for (const line of conf.trim().split('\n')) {
    const [key, ...rest] = line.split(' ')
    if (POD_ONLY.has(key!) || (opts.dropTls && key!.startsWith('tls-'))) continue
    args.push(`--${key}`, ...rest.map((v) => (v === '""' ? '' : move(v))))
  }
  return args
}

/** redis-cli as the default user; `tls`: the CA file to verify the server with. */
function cli(port: number, password: string, args: string[], caFile?: string) {
  const tls = caFile ? ['--tls', '--cacert', caFile] : []
  const r = spawnSync(
    'redis-cli',
    ['--no-auth-warning', ...tls, '-p', String(port), '-a', password, ...args],
    {
      encoding: 'utf8',
      timeout: 10_000,
    },
  )
  return { status: r.status, out: `${r.stdout}${r.stderr}`.trim() }
}

function configGet(port: number, password: string, key: string, caFile?: string): string {
  return cli(port, password, ['CONFIG', 'GET', key], caFile).out.split('\n')[1] ?? ''
}

for (const cfg of CONFIGS) {
  describe(`${cfg.env} redis.conf`, () => {
    it('lock nodes: redis-server accepts it and runs with AOF, the configured fsync, noeviction', async () => {
      const set = await startNodes({
        count: 1,
        proxy: false,
        password: 'pw',
        // The TLS lines (prod) run in the TLS suite below.
        extraArgs: asArgs(confOf(redlockObjects(cfg)), { dropTls: cfg.tls }),
      })
      sets.push(set)
      const port = set.nodes[0]!.port
      expect(configGet(port, 'pw', 'appendonly')).toBe('yes')
      expect(configGet(port, 'pw', 'appendfsync')).toBe(cfg.redlock.appendfsync)
      expect(configGet(port, 'pw', 'maxmemory-policy')).toBe('noeviction')
      expect(Number(configGet(port, 'pw', 'maxmemory'))).toBeGreaterThan(0)
    }, 60_000)

    it('cluster nodes: redis-server accepts it and runs in cluster mode with maxmemory and LFU eviction', async () => {
      const set = await startNodes({
        count: 1,
        proxy: false,
        password: 'pw',
        extraArgs: asArgs(confOf(clusterObjects(cfg)), { dropTls: cfg.tls }),
      })
      sets.push(set)
      const port = set.nodes[0]!.port
      expect(configGet(port, 'pw', 'cluster-enabled')).toBe('yes')
      expect(configGet(port, 'pw', 'maxmemory-policy')).toBe(cfg.cluster.evictionPolicy)
      expect(configGet(port, 'pw', 'cluster-preferred-endpoint-type')).toBe('hostname')
      // What apps/flash-sale/test/integration/stale-master.test.ts runs its cluster with (item 6).
      expect(configGet(port, 'pw', 'cluster-replica-validity-factor')).toBe('10')
      expect(Number(configGet(port, 'pw', 'maxmemory'))).toBeGreaterThan(0)
    }, 60_000)
  })
}

/** The `redis` (or another) container of the StatefulSet among `objects`. */
function container(objects: object[], name: string) {
  const set = plainObjects([{ file: 'x', objects: objects as never }]).find(
    (o) => o.kind === 'StatefulSet',
  ) as K8sObject & {
    spec: {
      template: {
        spec: {
          containers: {
            name: string
            readinessProbe?: { exec: { command: string[] } }
            env?: { name: string; value?: string }[]
          }[]
        }
      }
    }
  }
  return set.spec.template.spec.containers.find((c) => c.name === name)!
}

/** The exporter's page once it says redis_up 1; fails at once if the exporter exits. */
function waitForMetrics(url: string, child: ChildProcess, timeoutMs: number): Promise<string> {
  return readUntil(
    async () => {
      if (child.exitCode !== null) throw new Error(`redis_exporter exited with ${child.exitCode}`)
      return (await fetch(url)).text()
    },
    (page) => /^redis_up 1$/m.test(page),
    'redis_exporter to report redis_up 1',
    { timeoutMs, intervalMs: 200 },
  )
}

for (const cfg of CONFIGS.filter((c) => c.tls)) {
  describe(`${cfg.env} redis.conf over TLS`, () => {
    let dir: string
    let certs: TopologyTls
    let otherCa: string
    /** The pod's TLS mount as cert-manager's Secret lays it out: tls.crt, tls.key, ca.crt. */
    let tlsDir: string
    let secretDir: string
    const monitorPassword = 'monitor pw $x'

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'kunci-conf-tls-'))
      certs = await generateCertificates(join(dir, 'gen'))
      otherCa = (await generateCertificates(join(dir, 'other'))).caFile
      tlsDir = join(dir, 'redis-tls')
      mkdirSync(tlsDir)
      copyFileSync(certs.certFile, join(tlsDir, 'tls.crt'))
      copyFileSync(certs.keyFile, join(tlsDir, 'tls.key'))
      chmodSync(join(tlsDir, 'tls.key'), 0o600)
      copyFileSync(certs.caFile, join(tlsDir, 'ca.crt'))
      secretDir = join(dir, 'secret')
      mkdirSync(secretDir)
      writeFileSync(join(secretDir, 'monitor-password'), monitorPassword)
    }, 60_000)
    afterAll(() => {
      if (dir) rmSync(dir, { recursive: true, force: true })
    })

    const start = async (objects: object[]) => {
      const conf = confOf(objects)
      expect(conf).toMatch(/^port 0$/m)
      expect(conf).toMatch(new RegExp(`^tls-port ${REDIS_PORT}$`, 'm'))
      const set = await startNodes({
        count: 1,
        proxy: false,
        password: 'pw',
        // Topology's own PING speaks TLS with the same CA; the tls-* lines of the conf come last and win.
        tls: { certificates: certs },
        extraArgs: asArgs(conf, { moves: { [TLS_DIR]: tlsDir } }),
      })
      sets.push(set)
      return set.nodes[0]!.port
    }

    it('lock nodes: TLS only, with the mounted certificate; the probe and redis_exporter get through', async () => {
      const port = await start(redlockObjects(cfg))
      const ca = join(tlsDir, 'ca.crt')
      expect(configGet(port, 'pw', 'port', ca)).toBe('0')
      expect(configGet(port, 'pw', 'tls-port', ca)).toBe(String(port))
      expect(configGet(port, 'pw', 'tls-cert-file', ca)).toBe(join(tlsDir, 'tls.crt'))
      expect(configGet(port, 'pw', 'tls-auth-clients', ca)).toBe('no')
      expect(configGet(port, 'pw', 'tls-replication', ca)).toBe('yes')
      expect(configGet(port, 'pw', 'appendfsync', ca)).toBe(cfg.redlock.appendfsync)
      // Answers over TLS with the CA (no client certificate); refuses plain TCP and another CA.
      expect(cli(port, 'pw', ['PING'], ca).out).toBe('PONG')
      const plain = cli(port, 'pw', ['PING'])
      expect(plain.out).not.toContain('PONG')
      expect(plain.status).not.toBe(0)
      expect(cli(port, 'pw', ['PING'], otherCa).out).not.toContain('PONG')

      // The monitor user as the initContainer would create it, then the manifest's own probe.
      const monitor = REDIS_USERS.find((u) => u.name === 'monitor')!
      expect(
        cli(port, 'pw', ['ACL', 'SETUSER', 'monitor', 'reset', `>${monitorPassword}`, ...monitor.rules], ca)
          .out,
      ).toBe('OK')
      const probe = container(redlockObjects(cfg), 'redis').readinessProbe!.exec.command[2]!
      const local = probe
        .replaceAll(SECRET_DIR, secretDir)
        .replaceAll(TLS_DIR, tlsDir)
        .replace(`-p ${REDIS_PORT}`, `-p ${port}`)
      expect(local).toContain(`-p ${port}`)
      expect(spawnSync('sh', ['-c', local], { timeout: 10_000 }).status).toBe(0)
      const withoutTls = local.replace(/--tls --cacert \S+ /, '')
      expect(withoutTls).not.toContain('--tls')
      expect(spawnSync('sh', ['-c', withoutTls], { timeout: 10_000 }).status).not.toBe(0)

      // redis_exporter with the sidecar's environment (the Secret's password filled in).
      execFileSync('node', ['scripts/ensure-tools.mjs', 'redis_exporter'], {
        cwd: new URL('../../', import.meta.url),
        env: { ...process.env, KUNCI_QUIET: '1' },
      })
      const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, REDIS_PASSWORD: monitorPassword }
      for (const e of container(redlockObjects(cfg), 'redis-exporter').env ?? []) {
        if (e.value !== undefined)
          env[e.name] = e.value.replace(`:${REDIS_PORT}`, `:${port}`).replace(CA_DIR, tlsDir)
      }
      expect(env.REDIS_ADDR).toBe(`rediss://127.0.0.1:${port}`)
      expect(env.REDIS_EXPORTER_TLS_CA_CERT_FILE).toBe(join(tlsDir, 'ca.crt'))
      const listen = `127.0.0.1:${await findFreePort()}`
      const exporter = spawn('prometheus-redis-exporter', [`--web.listen-address=${listen}`], {
        env,
        stdio: 'ignore',
      })
      children.push(exporter)
      const page = await waitForMetrics(`http://${listen}/metrics`, exporter, 30_000)
      expect(page).toMatch(/^redis_up 1$/m)
    }, 90_000)

    it('cluster nodes: TLS only, the cluster bus and replication over TLS too', async () => {
      const port = await start(clusterObjects(cfg))
      const ca = join(tlsDir, 'ca.crt')
      expect(configGet(port, 'pw', 'port', ca)).toBe('0')
      expect(configGet(port, 'pw', 'cluster-enabled', ca)).toBe('yes')
      expect(configGet(port, 'pw', 'tls-cluster', ca)).toBe('yes')
      expect(configGet(port, 'pw', 'tls-replication', ca)).toBe('yes')
      expect(cli(port, 'pw', ['PING'], ca).out).toBe('PONG')
      expect(cli(port, 'pw', ['PING']).out).not.toContain('PONG')
      // The bus (tls-port + 10000, as 16379 is to 6379) completes a TLS handshake with a node's
      // certificate, verified against the CA.
      const bus = spawnSync(
        'openssl',
        [
          's_client',
          '-connect',
          `127.0.0.1:${port + 10_000}`,
          '-CAfile',
          ca,
          '-cert',
          join(tlsDir, 'tls.crt'),
          '-key',
          join(tlsDir, 'tls.key'),
          '-verify_return_error',
          '-brief',
        ],
        { input: '', encoding: 'utf8', timeout: 10_000 },
      )
      expect(bus.stderr).toContain('CONNECTION ESTABLISHED')
      expect(bus.stderr).toMatch(/Verification: OK/)
    }, 60_000)
  })
}
