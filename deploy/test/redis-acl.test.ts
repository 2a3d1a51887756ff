/**
 * The ACL the Redis pods generate at start, applied to a real redis-server: the init script
 * runs as in the initContainer (paths moved to a temp dir), its users are loaded, and then the
 * default user is off, the probe command of the manifests authenticates, the monitor user sees
 * INFO but no key, the app user works but cannot run dangerous commands, and redis_exporter
 * scrapes with the monitor user. And the AOF (issue 42): a node with the file's users, killed
 * with -9 and restarted from its AOF, keeps what the app user's scripts wrote, because the
 * default user stays off but keeps its permissions (DEFAULT_USER_ACL); the previous line
 * (`-@all`) dropped it.
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type NodeSet, readKeyspace, startNodes } from '@kunci/topology'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  type Observability,
  startObservability,
} from '../../apps/flash-sale-lab/src/observe/local-observability.js'
import { DEV_CONFIG } from '../src/k8s/config.js'
import { plainObjects } from '../src/k8s/manifests.js'
import {
  ACL_DIR,
  aclInitScript,
  DEFAULT_USER_ACL,
  monitorCli,
  SECRET_DIR,
  SECRET_KEYS,
} from '../src/k8s/redis-common.js'
import { redlockObjects } from '../src/k8s/redlock.js'

const ADMIN = 'boot-admin-pw'
const PASSWORDS: Record<string, string> = {
  'app-password': 'app pw with spaces & $ymbols',
  'monitor-password': 'monitor-pw-1',
  'admin-password': 'admin-pw-1',
  'replication-password': 'repl-pw-1',
}

let nodes: NodeSet
let dir: string
let port: number
let obs: Observability | undefined

function cli(user: string | undefined, password: string | undefined, ...args: string[]) {
  const auth = user ? ['--user', user, '--pass', password ?? ''] : []
  const r = spawnSync(
    'redis-cli',
    ['--no-auth-warning', '-h', '127.0.0.1', '-p', String(port), ...auth, ...args],
    {
      encoding: 'utf8',
    },
  )
  return (r.stdout + r.stderr).trim()
}

beforeAll(async () => {
  expect(Object.keys(PASSWORDS).sort()).toEqual([...SECRET_KEYS].sort())
  dir = mkdtempSync(join(tmpdir(), 'kunci-acl-'))
  const secretDir = join(dir, 'secret')
  const aclDir = join(dir, 'acl')
  mkdirSync(secretDir)
  mkdirSync(aclDir)
  for (const [k, v] of Object.entries(PASSWORDS)) writeFileSync(join(secretDir, k), v)
  // The initContainer's script, with its mount points moved here.
  const script = aclInitScript(true).replaceAll(SECRET_DIR, secretDir).replaceAll(ACL_DIR, aclDir)
  execFileSync('sh', ['-c', script])
  nodes = await startNodes({ count: 1, proxy: false, password: ADMIN })
  port = nodes.nodes[0]!.port
  // Load the generated users as `aclfile` would (the default user's line last, since this
  // connection is the default user until then).
  const lines = readFileSync(join(aclDir, 'users.acl'), 'utf8').trim().split('\n')
  const ordered = [
    ...lines.filter((l) => !l.startsWith('user default ')),
    ...lines.filter((l) => l.startsWith('user default ')),
  ]
  for (const line of ordered) {
    const [, ...args] = line.split(' ')
    expect(cli('default', ADMIN, 'ACL', 'SETUSER', ...args)).toBe('OK')
  }
}, 60_000)

afterAll(async () => {
  await obs?.stop()
  await nodes?.stop()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

describe('generated Redis ACL', () => {
  it('stores only password hashes, never a password in clear', () => {
    const acl = readFileSync(join(dir, 'acl', 'users.acl'), 'utf8')
    for (const [key, pw] of Object.entries(PASSWORDS)) {
      expect(acl, key).not.toContain(pw)
    }
    expect(acl).toMatch(/^user flash-sale reset #[0-9a-f]{64} /m)
  })

  it('turns the default user off', () => {
    expect(cli(undefined, undefined, 'PING')).toMatch(/NOAUTH|WRONGPASS|NOPERM/)
    expect(cli('default', ADMIN, 'PING')).toMatch(/WRONGPASS|disabled/i)
  })

  it('lets the probe command of the manifests authenticate as the monitor user', () => {
    // The plain-TCP (dev) probe: the prod one differs only by its TLS flags, and runs over TLS in
    // redis-conf.test.ts.
    const redis = plainObjects([{ file: 'x', objects: redlockObjects(DEV_CONFIG) }]).find(
      (o) => o.kind === 'StatefulSet',
    ) as unknown as {
      spec: {
        template: {
          spec: { containers: { name: string; readinessProbe: { exec: { command: string[] } } }[] }
        }
      }
    }
    const probe = redis.spec.template.spec.containers.find((c) => c.name === 'redis')!.readinessProbe.exec
      .command
    expect(probe.slice(0, 2)).toEqual(['sh', '-c'])
    expect(probe[2]).toContain(monitorCli(DEV_CONFIG, 'ping'))
    const local = probe[2]!.replaceAll(SECRET_DIR, join(dir, 'secret')).replace('-p 6379', `-p ${port}`)
    expect(spawnSync('sh', ['-c', local]).status).toBe(0)
    const wrong = local.replace('monitor-password', 'admin-password')
    expect(spawnSync('sh', ['-c', wrong]).status).not.toBe(0)
  })

  it('gives the monitor user introspection and no key access', () => {
    const pw = PASSWORDS['monitor-password']
    expect(cli('monitor', pw, 'INFO', 'server')).toContain('redis_version')
    expect(cli('monitor', pw, 'CONFIG', 'GET', 'maxmemory-policy')).toContain('maxmemory-policy')
    expect(cli('monitor', pw, 'GET', 'k')).toContain('NOPERM')
    expect(cli('monitor', pw, 'CONFIG', 'SET', 'maxmemory', '1')).toContain('NOPERM')
  })

  it('lets the app user work but denies dangerous commands', () => {
    const pw = PASSWORDS['app-password']
    expect(cli('flash-sale', pw, 'SET', 'acl-test', '1')).toBe('OK')
    expect(cli('flash-sale', pw, 'EVAL', "return redis.call('GET', KEYS[1])", '1', 'acl-test')).toBe('1')
    expect(cli('flash-sale', pw, 'INFO', 'server')).toContain('run_id')
    for (const cmd of [
      ['FLUSHALL'],
      ['FLUSHDB'],
      ['KEYS', '*'],
      ['CONFIG', 'SET', 'maxmemory', '1'],
      ['ACL', 'SETUSER', 'x'],
      ['REPLICAOF', 'NO', 'ONE'],
      ['SHUTDOWN'],
    ]) {
      expect(cli('flash-sale', pw, ...cmd), cmd.join(' ')).toContain('NOPERM')
    }
  })

  it('keeps the admin user away from FLUSHALL and KEYS too', () => {
    const pw = PASSWORDS['admin-password']
    expect(cli('admin', pw, 'CLUSTER', 'INFO')).toMatch(/cluster support disabled|cluster_state/)
    expect(cli('admin', pw, 'FLUSHALL')).toContain('NOPERM')
    expect(cli('admin', pw, 'KEYS', '*')).toContain('NOPERM')
  })

  it('lets redis_exporter scrape as the monitor user', async () => {
    execFileSync('node', ['scripts/ensure-tools.mjs', 'redis_exporter', 'prometheus'], {
      cwd: new URL('../../', import.meta.url),
      env: { ...process.env, KUNCI_QUIET: '1' },
    })
    obs = await startObservability({
      dir: join(dir, 'observe'),
      serviceTargets: [],
      workerTargets: [],
      redis: [{ addr: `127.0.0.1:${port}`, username: 'monitor', password: PASSWORDS['monitor-password'] }],
    })
    const page = await (await fetch(obs.exporterUrls[0]!)).text()
    expect(page).toMatch(/^redis_up 1$/m)
    expect(page).toMatch(/^redis_memory_max_bytes /m)
    expect(page).toMatch(/^redis_instance_info\{.*maxmemory_policy=/m)
  }, 60_000)
})

describe('generated Redis ACL and the AOF (issue 42)', () => {
  const sets: NodeSet[] = []
  afterAll(async () => {
    for (const s of sets.splice(0)) await s.stop()
  })

  /** users.acl as the pod writes it: the default user's rules, and the other users' lines. */
  function generated(): { defaultRules: string; others: string[][] } {
    const lines = readFileSync(join(dir, 'acl', 'users.acl'), 'utf8')
      .trim()
      .split('\n')
    const others = lines.filter((l) => !l.startsWith('user default ')).map((l) => l.split(' ').slice(1))
    const defaultLine = lines.find((l) => l.startsWith('user default '))!
    return { defaultRules: defaultLine.slice('user default '.length), others }
  }

  /**
   * A node with AOF (`appendfsync always`) and the file's users: topology's admin user for its
   * own connections, the default user with `defaultRules`, every other user from the file.
   * The app user runs a script and a plain SET; then kill -9 and a restart from the AOF.
   */
  async function restartWith(defaultRules: string) {
    const set = await startNodes({
      count: 1,
      proxy: false,
      aof: 'always',
      adminUser: { defaultUserRules: defaultRules },
      extraArgs: generated().others.flatMap((args) => ['--user', ...args]),
    })
    sets.push(set)
    const node = set.nodes[0]!
    const app = new Redis({ port: node.port, username: 'flash-sale', password: PASSWORDS['app-password']! })
    try {
      await app.eval(
        "redis.call('SET', KEYS[1], ARGV[1]); redis.call('HSET', KEYS[2], 'u1', '1'); redis.call('XADD', KEYS[3], '*', 'order', 'o1')",
        3,
        '{sale:1}:stock',
        '{sale:1}:buyers',
        '{sale:1}:orders',
        '9',
      )
      await app.set('plain', 'p')
    } finally {
      app.disconnect()
    }
    const before = await readKeyspace(node)
    await node.kill()
    await node.restart()
    return { before, after: await readKeyspace(node) }
  }

  it('the file turns the default user off with every permission and no password', () => {
    const { defaultRules } = generated()
    expect(`user default ${defaultRules}`).toBe(DEFAULT_USER_ACL)
    expect(defaultRules.split(' ')).toEqual(expect.arrayContaining(['off', 'resetpass', '~*', '&*', '+@all']))
  })

  it("with the file's lines, a restart from the AOF keeps what the app's script wrote", async () => {
    const { before, after } = await restartWith(generated().defaultRules)
    expect(Object.keys(before).sort()).toEqual([
      'plain',
      '{sale:1}:buyers',
      '{sale:1}:orders',
      '{sale:1}:stock',
    ])
    expect(after).toEqual(before)
  }, 60_000)

  it('with the previous default line (-@all) the same restart keeps only the plain SET', async () => {
    const { before, after } = await restartWith('off resetkeys resetchannels -@all')
    expect(Object.keys(before)).toHaveLength(4)
    expect(Object.keys(after)).toEqual(['plain'])
  }, 60_000)
})
