/**
 * What one uncontended acquire+release costs one Redis node, command by command (INFO
 * commandstats: calls and µs per operation, commands run inside scripts included), for kunci
 * and redis-semaphore (the 20-commands-per-op peer of bench/RESULTS.md). On one node, so the
 * numbers are per node of a Redlock: multiply by the node count. Commands run inside a script are
 * counted as their own calls too (that is how INFO counts them, and why kunci shows 6 per node).
 *
 *   npm run build && npx tsx bench/locks/server-commands.ts [--ops 20000]
 */
import { parseArgs } from 'node:util'
import { startNodes } from '@kunci/topology'
import { Redis } from 'ioredis'
import { Redlock } from 'kunci'
import { Mutex } from 'redis-semaphore'

const { values } = parseArgs({ options: { ops: { type: 'string', default: '20000' } } })
const OPS = Number(values.ops)
if (!Number.isInteger(OPS) || OPS < 100) throw new Error('--ops must be an integer ≥ 100')

const IGNORED = new Set([
  'info',
  'config|resetstat',
  'ping',
  'client|setname',
  'hello',
  'select',
  'script|load',
])

async function measure(admin: Redis, label: string, op: (i: number) => Promise<void>): Promise<void> {
  for (let i = 0; i < Math.min(2000, OPS); i++) await op(i)
  await admin.config('RESETSTAT')
  for (let i = 0; i < OPS; i++) await op(i)
  const info = await admin.info('commandstats')
  console.log(`\n${label}: per acquire+release`)
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+),usec_per_call=([\d.]+)/gm)) {
    if (IGNORED.has(m[1]!)) continue
    const usec = Number(m[3]) / OPS
    console.log(`  ${m[1]!.padEnd(8)} ${(Number(m[2]) / OPS).toFixed(2)} calls  ${usec.toFixed(2)} µs`)
  }
  // An EVALSHA's time includes the commands its script runs, which are also counted on their own.
  console.log('  (evalsha µs include the commands run inside the script; reading and parsing not included)')
}

const set = await startNodes({ count: 1, proxy: false })
const node = set.nodes[0]!
const admin = new Redis({ host: node.host, port: node.port })
const kunciClient = new Redis({ host: node.host, port: node.port })
const semaphoreClient = new Redis({ host: node.host, port: node.port })
const locks = new Redlock({ clients: [kunciClient], quarantine: false, persistence: 'none', ttlMs: 10_000 })
try {
  await measure(admin, 'kunci', async (i) => {
    await (await locks.acquire(`k${i % 10}`)).release()
  })
  await measure(admin, 'redis-semaphore', async (i) => {
    const m = new Mutex(semaphoreClient, `s${i % 10}`, {
      lockTimeout: 10_000,
      acquireTimeout: 1000,
      retryInterval: 5,
      refreshInterval: 0,
    })
    await m.acquire()
    await m.release()
  })
} finally {
  await locks.close()
  for (const c of [admin, kunciClient, semaphoreClient]) c.disconnect()
  await set.stop()
}
