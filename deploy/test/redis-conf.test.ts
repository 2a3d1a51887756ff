/**
 * The redis.conf of both ConfigMaps is accepted by a real redis-server, which then runs with the
 * settings the manifests promise (AOF and fsync, noeviction on lock nodes, LFU + maxmemory on the
 * cluster). Directives that point at pod paths or ports (port, bind, dir, aclfile, include,
 * cluster-config-file) are left to the test topology.
 */
import { spawnSync } from 'node:child_process'
import { type NodeSet, startNodes } from '@kunci/topology'
import { afterEach, describe, expect, it } from 'vitest'
import { CONFIGS } from '../src/k8s/config.js'
import { plainObjects } from '../src/k8s/manifests.js'
import { clusterObjects } from '../src/k8s/redis-cluster.js'
import { redlockObjects } from '../src/k8s/redlock.js'

const POD_ONLY = new Set(['port', 'bind', 'dir', 'aclfile', 'include', 'cluster-config-file'])
const sets: NodeSet[] = []
afterEach(async () => {
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

/** redis.conf lines as command-line arguments (`key value…` → `--key value…`). */
function asArgs(conf: string): string[] {
  const args: string[] = []
  for (const line of conf.trim().split('\n')) {
    const [key, ...rest] = line.split(' ')
    if (POD_ONLY.has(key!)) continue
    args.push(`--${key}`, ...rest.map((v) => (v === '""' ? '' : v)))
  }
  return args
}

function configGet(port: number, password: string, key: string): string {
  const r = spawnSync(
    'redis-cli',
    ['--no-auth-warning', '-p', String(port), '-a', password, 'CONFIG', 'GET', key],
    {
      encoding: 'utf8',
    },
  )
  return r.stdout.trim().split('\n')[1] ?? ''
}

for (const cfg of CONFIGS) {
  describe(`${cfg.env} redis.conf`, () => {
    it('lock nodes: redis-server accepts it and runs with AOF, the configured fsync, noeviction', async () => {
      const set = await startNodes({
        count: 1,
        proxy: false,
        password: 'pw',
        extraArgs: asArgs(confOf(redlockObjects(cfg))),
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
        extraArgs: asArgs(confOf(clusterObjects(cfg))),
      })
      sets.push(set)
      const port = set.nodes[0]!.port
      expect(configGet(port, 'pw', 'cluster-enabled')).toBe('yes')
      expect(configGet(port, 'pw', 'maxmemory-policy')).toBe(cfg.cluster.evictionPolicy)
      expect(configGet(port, 'pw', 'cluster-preferred-endpoint-type')).toBe('hostname')
      expect(Number(configGet(port, 'pw', 'maxmemory'))).toBeGreaterThan(0)
    }, 60_000)
  })
}
