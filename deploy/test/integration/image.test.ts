/**
 * Issue 38: the image `npm run image` builds, run exactly as the rendered dev manifests run it.
 *
 * Everything about each container is read from deploy/k8s/dev/flash-sale.yaml, not retyped: the
 * image, command and args, every env entry (values as written; `secretKeyRef`s resolved from the
 * Secrets this test plays, as the kubelet does), the user and group, the read-only root, dropped
 * capabilities, no privilege escalation, and the emptyDir mounts (tmpfs of the same size limit).
 * The only substitutions are what a Pod has and a host cannot: addresses and ports.
 *   - REDIS_CLUSTER_NODES, REDLOCK_NODES: the Services' DNS names resolve only inside Kubernetes;
 *     here the local stack's Redis Cluster (3 masters, 3 replicas) and five lock nodes.
 *   - PORT, WORKER_PORT: each Pod has its own network namespace; two instances on this host's
 *     network (`--network host`, to reach the Redis nodes on loopback) need two ports.
 * Not run here: resource limits (this kernel's cgroups), probes (polled by the test instead), TLS
 * (dev has none; prod's redis.conf is run by redis-conf.test.ts). `podman kube play` can run a
 * Deployment here, but only on the host network, where the two replicas' ports collide and the
 * Services' names do not resolve: the containers are run one by one instead, from the same YAML.
 *
 * Then: the migrate Job's container migrates a fresh database; two serve containers and a worker
 * become ready; a checkout answered 200 by one instance ends `confirmed` in SQL by the worker;
 * /healthz, /readyz and /metrics answer; SIGTERM drains an instance under requests without a 5xx.
 */
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { type LocalStack, startStack } from '@kunci/flash-sale-lab'
import { findFreePort } from '@kunci/topology'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parseAllDocuments } from 'yaml'
import { createTestDatabase } from '../../../apps/flash-sale/test/support/pg.js'

const run = promisify(execFile)
const ROOT = fileURLToPath(new URL('../../../', import.meta.url))
const MANIFEST = new URL('../../k8s/dev/flash-sale.yaml', import.meta.url)
const PREFIX = `kunci-image-test-${process.pid}`

interface EnvVar {
  name: string
  value?: string
  valueFrom?: { secretKeyRef?: { name: string; key: string; optional?: boolean } }
}
interface Container {
  name: string
  image: string
  command?: string[]
  args?: string[]
  env?: EnvVar[]
  volumeMounts?: { name: string; mountPath: string }[]
  securityContext?: SecurityContext
}
interface SecurityContext {
  runAsUser?: number
  runAsGroup?: number
  readOnlyRootFilesystem?: boolean
  allowPrivilegeEscalation?: boolean
  capabilities?: { drop?: string[] }
}
interface PodSpec {
  securityContext?: SecurityContext
  containers: Container[]
  volumes?: { name: string; emptyDir?: { sizeLimit?: string } }[]
}
interface Built {
  image: string
  id: string
  sizeBytes: number
  buildSeconds: number
  tool: string
}

const objects = parseAllDocuments(readFileSync(MANIFEST, 'utf8')).map(
  (d) => d.toJS() as { kind: string; metadata: { name: string }; spec: { template: { spec: PodSpec } } },
)
function podSpec(kind: string, namePrefix: string): PodSpec {
  const o = objects.find((x) => x.kind === kind && x.metadata.name.startsWith(namePrefix))
  if (!o) throw new Error(`no ${kind} ${namePrefix}* in ${MANIFEST.pathname}`)
  return o.spec.template.spec
}

let built: Built
let stack: LocalStack
let db: { url: string; drop(): Promise<void> }
let secrets: Record<string, Record<string, string>>
const started: string[] = []
const tool = () => built.tool

/** `<tool> run` arguments for a container of the YAML, as the kubelet would run it. */
function runArgs(spec: PodSpec, c: Container, name: string, overrides: Record<string, string>): string[] {
  const args = ['run', '--name', name, '--network', 'host']
  const sc: SecurityContext = { ...spec.securityContext, ...c.securityContext }
  if (sc.runAsUser !== undefined) args.push('--user', `${sc.runAsUser}:${sc.runAsGroup ?? sc.runAsUser}`)
  // Read-only as in the Pod: podman would add tmpfs mounts of its own on /tmp, /var/tmp and /run.
  if (sc.readOnlyRootFilesystem)
    args.push('--read-only', ...(tool() === 'podman' ? ['--read-only-tmpfs=false'] : []))
  if (sc.allowPrivilegeEscalation === false) args.push('--security-opt', 'no-new-privileges')
  for (const cap of sc.capabilities?.drop ?? []) args.push('--cap-drop', cap)
  for (const m of c.volumeMounts ?? []) {
    const volume = spec.volumes?.find((v) => v.name === m.name)
    if (!volume?.emptyDir) throw new Error(`volume ${m.name}: only emptyDir volumes are run here`)
    const size = volume.emptyDir.sizeLimit?.replace(/Mi$/, 'm').replace(/Gi$/, 'g')
    args.push('--tmpfs', `${m.mountPath}:rw,nosuid,nodev${size ? `,size=${size}` : ''}`)
  }
  for (const e of c.env ?? []) {
    let value: string | undefined
    if (e.value !== undefined) value = e.value
    else if (e.valueFrom?.secretKeyRef) {
      const ref = e.valueFrom.secretKeyRef
      value = secrets[ref.name]?.[ref.key]
      if (value === undefined && !ref.optional)
        throw new Error(`${c.name}: secret ${ref.name}/${ref.key} not played`)
    } else throw new Error(`${c.name}: env ${e.name} has a source this test does not play`)
    if (e.name in overrides) value = overrides[e.name]
    if (value !== undefined) args.push('--env', `${e.name}=${value}`)
  }
  return [...args, c.image, ...(c.command ?? []), ...(c.args ?? [])]
}

async function containerState(name: string): Promise<{ running: boolean; exitCode: number }> {
  const { stdout } = await run(tool(), [
    'inspect',
    '--format',
    '{{.State.Running}} {{.State.ExitCode}}',
    name,
  ])
  const [running, code] = stdout.trim().split(' ')
  return { running: running === 'true', exitCode: Number(code) }
}

async function logs(name: string): Promise<string> {
  const { stdout, stderr } = await run(tool(), ['logs', name], { maxBuffer: 16 << 20 }).catch((err) => ({
    stdout: '',
    stderr: String(err),
  }))
  return `${stdout}${stderr}`.slice(-4_000)
}

/** Starts a container of the YAML detached and waits for `readyUrl` to answer 200. */
async function startContainer(
  spec: PodSpec,
  name: string,
  overrides: Record<string, string>,
  readyUrl: string,
) {
  const args = runArgs(spec, spec.containers[0]!, name, overrides)
  const from = Date.now()
  await run(tool(), [args[0]!, '--detach', ...args.slice(1)])
  started.push(name)
  const deadline = Date.now() + 120_000
  for (;;) {
    const ok = await fetch(readyUrl, { signal: AbortSignal.timeout(2_000) }).then(
      (r) => r.status === 200,
      () => false,
    )
    if (ok) {
      console.log(`[image] ${name}: ${readyUrl} 200 ${Date.now() - from} ms after \`${tool()} run\``)
      return
    }
    const state = await containerState(name)
    if (!state.running)
      throw new Error(
        `${name} exited (${state.exitCode}) before ${readyUrl} answered 200:\n${await logs(name)}`,
      )
    if (Date.now() > deadline) throw new Error(`${readyUrl} not 200 within 120 s:\n${await logs(name)}`)
    await sleep(250)
  }
}

const serve = { a: '', b: '' }
let workerUrl = ''
const admin = () => ({
  authorization: `Bearer ${secrets['flash-sale']!['admin-token']}`,
  'content-type': 'application/json',
})

/** An admin call, repeated on 503 as its Retry-After asks (the sale's replica acknowledging). */
async function adminPut(url: string, body: unknown): Promise<unknown> {
  const deadline = Date.now() + 60_000
  for (;;) {
    const res = await fetch(url, { method: 'PUT', headers: admin(), body: JSON.stringify(body) })
    const json = await res.json()
    if (res.ok) return json
    if (res.status !== 503 || Date.now() > deadline)
      throw new Error(`PUT ${url}: ${res.status} ${JSON.stringify(json)}`)
    await sleep(1_000)
  }
}

async function checkout(url: string, productId: string, userId: number, key: string) {
  const res = await fetch(`${url}/v1/checkout`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify({ product_id: Number(productId), user_id: userId }),
    signal: AbortSignal.timeout(10_000),
  })
  return {
    status: res.status,
    body: (await res.json().catch(() => ({}))) as { order_id?: string; code?: string },
  }
}

beforeAll(async () => {
  // npm run image, as a user runs it (the build's own output goes to stderr; the last line is JSON).
  const { stdout } = await run('node', ['deploy/image/build.mjs'], { cwd: ROOT, maxBuffer: 64 << 20 })
  built = JSON.parse(stdout.trim().split('\n').at(-1)!) as Built
  console.log(
    `[image] ${built.image} ${(built.sizeBytes / 1e6).toFixed(0)} MB, built in ${built.buildSeconds} s with ${built.tool}`,
  )
  stack = await startStack({ instances: 1, worker: false, lockNodes: true, durability: 'replica' })
  db = await createTestDatabase('fs_image')
  secrets = {
    'redis-users': { 'app-password': stack.env.REDIS_PASSWORD! },
    'flash-sale': {
      'database-url': db.url,
      'admin-token': stack.adminToken,
      'waiting-room-secret': stack.env.WAITING_ROOM_SECRET!,
    },
  }
}, 900_000)

afterAll(async () => {
  if (built) await run(tool(), ['rm', '--force', '--time', '0', ...started]).catch(() => undefined)
  await stack?.stop()
  await db?.drop()
})

describe('the image, run as the dev manifests run it', () => {
  it('is the image the manifests name, and keeps its contract', async () => {
    const spec = podSpec('Deployment', 'flash-sale')
    expect(spec.containers[0]!.image).toBe(built.image)
    const { stdout } = await run(tool(), [
      'image',
      'inspect',
      '--format',
      '{{.Config.User}} {{.Config.WorkingDir}}',
      built.image,
    ])
    expect(stdout.trim()).toBe('1000:1000 /app')
    // No shell in the image: nothing for an intruder, and no exec hook can work (none is used).
    const shell = await run(tool(), [
      'run',
      '--rm',
      '--network',
      'none',
      built.image,
      '/bin/sh',
      '-c',
      'true',
    ]).then(
      () => 'ran',
      () => 'refused',
    )
    expect(shell).toBe('refused')
  })

  it("the migrate Job's container migrates a fresh database, and a second run changes nothing", async () => {
    const spec = podSpec('Job', 'flash-sale-migrate')
    for (const round of [1, 2]) {
      const name = `${PREFIX}-migrate-${round}`
      started.push(name)
      const { stdout } = await run(tool(), runArgs(spec, spec.containers[0]!, name, {}), {
        maxBuffer: 16 << 20,
      })
      expect((await containerState(name)).exitCode).toBe(0)
      expect(stdout.trim()).toMatch(round === 1 ? /^applied: 001_init\.sql/ : /^up to date$/)
    }
    const c = new pg.Client({ connectionString: db.url })
    await c.connect()
    try {
      const { rows } = await c.query<{ n: string }>('SELECT count(*) AS n FROM schema_migrations')
      expect(Number(rows[0]!.n)).toBeGreaterThan(0)
    } finally {
      await c.end()
    }
  })

  it('two serve containers and a worker become ready; /healthz, /readyz and /metrics answer', async () => {
    const lockNodes = stack.env.REDLOCK_NODES!
    const addresses = { REDIS_CLUSTER_NODES: stack.env.REDIS_CLUSTER_NODES!, REDLOCK_NODES: lockNodes }
    const ports = { a: await findFreePort(), b: await findFreePort(), worker: await findFreePort() }
    serve.a = `http://127.0.0.1:${ports.a}`
    serve.b = `http://127.0.0.1:${ports.b}`
    workerUrl = `http://127.0.0.1:${ports.worker}`
    const serveSpec = podSpec('Deployment', 'flash-sale')
    const workerSpec = podSpec('Deployment', 'flash-sale-worker')
    await Promise.all([
      startContainer(
        serveSpec,
        `${PREFIX}-serve-a`,
        { ...addresses, PORT: String(ports.a) },
        `${serve.a}/readyz`,
      ),
      startContainer(
        serveSpec,
        `${PREFIX}-serve-b`,
        { ...addresses, PORT: String(ports.b) },
        `${serve.b}/readyz`,
      ),
      startContainer(
        workerSpec,
        `${PREFIX}-worker`,
        { ...addresses, WORKER_PORT: String(ports.worker) },
        `${workerUrl}/readyz`,
      ),
    ])
    for (const url of [serve.a, serve.b, workerUrl]) {
      expect((await fetch(`${url}/healthz`)).status).toBe(200)
      expect((await fetch(`${url}/readyz`)).status).toBe(200)
    }
    expect(await (await fetch(`${serve.a}/metrics`)).text()).toMatch(/^flash_sale_\w+/m)
    expect(await (await fetch(`${workerUrl}/metrics`)).text()).toMatch(/^flash_sale_\w+/m)
  })

  it('a checkout answered 200 by one instance ends confirmed in SQL, by the worker', async () => {
    const productId = '3801'
    await adminPut(`${serve.a}/admin/sales/${productId}`, {
      stock: 10,
      price: 5,
      name: 'image test',
      per_user_limit: 1,
    })
    await adminPut(`${serve.a}/admin/wallets/7`, { balance: 100 })
    let answer = await checkout(serve.b, productId, 7, 'image-k1')
    // 503 asks for the same request again (a replica not yet acknowledging on a loaded machine).
    for (let i = 0; answer.status === 503 && i < 30; i++) {
      await sleep(1_000)
      answer = await checkout(serve.b, productId, 7, 'image-k1')
    }
    console.log(`[image] checkout answered ${answer.status}`)
    expect([200, 202]).toContain(answer.status)
    const orderId = answer.body.order_id!
    expect(orderId).toBeTruthy()
    const c = new pg.Client({ connectionString: db.url })
    await c.connect()
    try {
      const deadline = Date.now() + 90_000
      let status: string | undefined
      while (Date.now() < deadline) {
        const { rows } = await c.query<{ status: string }>('SELECT status FROM orders WHERE order_id = $1', [
          orderId,
        ])
        status = rows[0]?.status
        if (status !== undefined) break
        await sleep(250)
      }
      expect(status).toBe('confirmed')
    } finally {
      await c.end()
    }
  })

  it('SIGTERM drains an instance under requests: answers go on for DRAIN_DELAY_MS, no 5xx, exit 0', async () => {
    const spec = podSpec('Deployment', 'flash-sale')
    const delayMs = Number(spec.containers[0]!.env?.find((e) => e.name === 'DRAIN_DELAY_MS')?.value)
    expect(delayMs).toBeGreaterThan(0)
    const name = `${PREFIX}-serve-a`
    const answers: { at: number; status: number }[] = []
    let stop = false
    const loop = async () => {
      while (!stop) {
        const at = Date.now()
        // The sale's page, read from Redis: a request whose only possible 5xx is the drain's.
        // A connection refused once the listener has closed is not an answer (Kubernetes sends
        // nothing there by then: the endpoint was removed during the delay).
        const status = await fetch(`${serve.a}/v1/products/3801`, {
          signal: AbortSignal.timeout(10_000),
        }).then(
          async (r) => {
            await r.arrayBuffer()
            return r.status
          },
          () => 0,
        )
        answers.push({ at, status })
        if (status === 0) await sleep(50)
      }
    }
    const loops = Array.from({ length: 4 }, loop)
    await sleep(1_000)
    const termAt = Date.now()
    await run(tool(), ['kill', '--signal', 'TERM', name])
    const readyz: number[] = []
    const deadline = Date.now() + delayMs + 30_000
    while ((await containerState(name)).running && Date.now() < deadline) {
      readyz.push(
        await fetch(`${serve.a}/readyz`).then(
          (r) => r.status,
          () => 0,
        ),
      )
      await sleep(200)
    }
    const exitedAt = Date.now()
    stop = true
    await Promise.all(loops)
    const state = await containerState(name)
    expect(state.running, await logs(name)).toBe(false)
    expect(state.exitCode, await logs(name)).toBe(0)
    expect(exitedAt - termAt).toBeGreaterThanOrEqual(delayMs)
    // Readiness false during the delay, so that Kubernetes takes the endpoint out.
    expect(readyz).toContain(503)
    const fivexx = answers.filter((a) => a.status >= 500)
    expect(fivexx).toEqual([])
    const duringDelay = answers.filter((a) => a.at > termAt && a.at < termAt + delayMs - 500)
    expect(duringDelay.length).toBeGreaterThan(0)
    expect(duringDelay.filter((a) => a.status !== 200)).toEqual([])
  })
})
