import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Cluster, type Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  generateCertificates,
  type NodeSet,
  type RedisCluster,
  type RedisNode,
  startCluster,
  startNodes,
  until,
} from '../src/index.js'
import { client } from './support.js'

/** Resolves to the command's reply, or the error it failed with. */
async function settle<T>(p: Promise<T>): Promise<T | Error> {
  try {
    return await p
  } catch (err) {
    return err as Error
  }
}

/** ioredis over TLS to 127.0.0.1: the certificate's SAN names that address. */
function tlsClient(port: number, ca: string, opts: Parameters<typeof client>[1] = {}): Redis {
  return client(port, { tls: { ca }, ...opts })
}

describe('TLS on independent nodes', () => {
  let set: NodeSet

  beforeAll(async () => {
    set = await startNodes({ count: 1, tls: true })
  })
  afterAll(async () => {
    await set?.stop()
  })

  it('generates a CA and a server certificate for 127.0.0.1 into the topology dir', () => {
    const tls = set.tls!
    expect(tls.ca).toContain('BEGIN CERTIFICATE')
    expect(readFileSync(tls.caFile, 'utf8')).toBe(tls.ca)
    expect(set.nodes[0]!.tls).toBe(tls)
  })

  it('answers over TLS, directly and through the fault proxy, and has no plain TCP port', async () => {
    const node = set.nodes[0]!
    expect(node.port).not.toBe(node.serverPort) // behind the proxy
    for (const port of [node.port, node.serverPort]) {
      const c = tlsClient(port, set.tls!.ca)
      try {
        expect(await c.ping()).toBe('PONG')
        expect(await c.config('GET', 'port')).toEqual(['port', '0'])
        expect(await c.config('GET', 'tls-auth-clients')).toEqual(['tls-auth-clients', 'no'])
        expect(await c.config('GET', 'tls-port')).toEqual(['tls-port', String(node.serverPort)])
      } finally {
        c.disconnect()
      }
    }
  })

  it('refuses plain TCP on its port and a TLS client that does not trust the CA', async () => {
    const node = set.nodes[0]!
    const plain = client(node.serverPort, { connectTimeout: 2_000 })
    const untrusting = client(node.serverPort, { tls: {}, connectTimeout: 2_000 })
    try {
      const [plainReply, untrustedReply] = await Promise.all([
        settle(plain.ping()),
        settle(untrusting.ping()),
      ])
      expect(plainReply).toBeInstanceOf(Error)
      expect(untrustedReply).toBeInstanceOf(Error)
    } finally {
      plain.disconnect()
      untrusting.disconnect()
    }
  })

  it('comes back with TLS after kill -9 and restart', async () => {
    const node = set.nodes[0]!
    await node.kill()
    await node.restart()
    const c = tlsClient(node.port, set.tls!.ca)
    try {
      expect(await c.ping()).toBe('PONG')
    } finally {
      c.disconnect()
    }
  })
})

describe('TLS with authClients: clients present a certificate', () => {
  let set: NodeSet

  beforeAll(async () => {
    set = await startNodes({ count: 1, proxy: false, tls: { authClients: true }, adminUser: true })
  })
  afterAll(async () => {
    await set?.stop()
  })

  it('refuses a TLS client without a certificate, accepts one with the client certificate', async () => {
    const node = set.nodes[0]!
    const tls = set.tls!
    const creds = { username: set.username!, password: set.password! }
    const anonymous = tlsClient(node.port, tls.ca, { ...creds, connectTimeout: 2_000 })
    const mutual = client(node.port, {
      ...creds,
      tls: { ca: tls.ca, cert: tls.clientCert, key: tls.clientKey },
    })
    try {
      expect(await settle(anonymous.ping())).toBeInstanceOf(Error)
      expect(await mutual.ping()).toBe('PONG')
      expect(await mutual.config('GET', 'tls-auth-clients')).toEqual(['tls-auth-clients', 'yes'])
    } finally {
      anonymous.disconnect()
      mutual.disconnect()
    }
  })
})

describe('TLS with certificates the caller made (one CA for several topologies)', () => {
  it('uses them instead of generating its own, and leaves them to the caller', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kunci-tls-test-'))
    try {
      const certificates = await generateCertificates(dir)
      const set = await startNodes({ count: 1, proxy: false, tls: { certificates } })
      try {
        expect(set.tls).toBe(certificates)
        const c = tlsClient(set.nodes[0]!.port, certificates.ca)
        try {
          expect(await c.ping()).toBe('PONG')
        } finally {
          c.disconnect()
        }
      } finally {
        await set.stop()
      }
      expect(existsSync(certificates.caFile)).toBe(true)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe('a TLS cluster with the default user off', () => {
  let cluster: RedisCluster
  let redis: Cluster

  beforeAll(async () => {
    cluster = await startCluster({ tls: true, adminUser: true })
    redis = new Cluster(cluster.startupNodes, {
      redisOptions: {
        username: cluster.username!,
        password: cluster.password!,
        tls: { ca: cluster.tls!.ca },
      },
      slotsRefreshTimeout: 2_000,
    })
    redis.on('error', () => {})
  })
  afterAll(async () => {
    redis?.disconnect()
    await cluster?.stop()
  })

  it('serves ioredis Cluster over TLS, with TLS on the bus and for replication', async () => {
    for (let i = 0; i < 50; i++) await redis.set(`k:${i}`, String(i))
    for (let i = 0; i < 50; i++) expect(await redis.get(`k:${i}`)).toBe(String(i))
    const node = cluster.nodes[0]!
    const admin = tlsClient(node.port, cluster.tls!.ca, {
      username: cluster.username!,
      password: cluster.password!,
    })
    try {
      expect(await admin.config('GET', 'tls-cluster')).toEqual(['tls-cluster', 'yes'])
      expect(await admin.config('GET', 'tls-replication')).toEqual(['tls-replication', 'yes'])
      // CLUSTER SLOTS announces the TLS ports: the only ones there are.
      const slots = await admin.cluster('SLOTS')
      const ports = new Set(cluster.nodes.map((n) => n.serverPort))
      const announced = slots.flatMap(([, , ...holders]) => holders.map(([, port]) => port))
      // Replicas are listed once their offset has gossiped round; the 3 masters always are.
      expect(announced.length).toBeGreaterThanOrEqual(3)
      for (const port of announced) expect(ports.has(port)).toBe(true)
    } finally {
      admin.disconnect()
    }
  })

  it('refuses plain TCP on every node', async () => {
    const replies = await Promise.all(
      cluster.nodes.map(async (n) => {
        const plain = client(n.port, { connectTimeout: 2_000 })
        try {
          return await settle(plain.ping())
        } finally {
          plain.disconnect()
        }
      }),
    )
    for (const reply of replies) expect(reply).toBeInstanceOf(Error)
  })

  it('migrates a slot (MIGRATE over TLS) and fails over to a replica that synced over TLS', async () => {
    const tag = '{tls}'
    const slot = (await redis.cluster('KEYSLOT', tag)) as number
    for (let i = 0; i < 10; i++) await redis.set(`${tag}:${i}`, 'v')
    const from = await cluster.slotOwner(slot)
    const to = (await cluster.masters()).find((m) => m !== from)!
    await cluster.migrateSlot(slot, to)
    expect(await cluster.slotOwner(slot)).toBe(to)
    for (let i = 0; i < 10; i++) expect(await redis.get(`${tag}:${i}`)).toBe('v')

    const master: RedisNode = (await cluster.masters())[0]!
    const promoted = await cluster.failover(master)
    expect(await cluster.masters()).toContain(promoted)
    const readsAll = async () => {
      try {
        for (let i = 0; i < 50; i++) if ((await redis.get(`k:${i}`)) !== String(i)) return false
        return true
      } catch {
        return false
      }
    }
    await until(readsAll, 'reads to succeed on every node', 15_000)
    await cluster.rejoin(master)
    expect(await cluster.replicaOf(promoted)).toBe(master)
  })
})
