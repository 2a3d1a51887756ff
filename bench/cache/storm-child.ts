/**
 * One process of the cold-key storm: `concurrency` simultaneous getOrSet calls on one cold key
 * through one library. The loader counts itself with INCR on `counterKey` (its own connection),
 * so the parent reads the fleet-wide number of loader calls from Redis.
 *
 * argv[2]: JSON { name, target, prefix, key, counterKey, concurrency, loaderMs }
 * stdout: "ready", then (after "go" on stdin) a JSON line { errors }.
 */
import { createInterface } from 'node:readline'
import { type ContenderName, createContender, ioredisClient, type Target } from './contenders.js'

const cfg = JSON.parse(process.argv[2]!) as {
  name: ContenderName
  target: Target
  prefix: string
  key: string
  counterKey: string
  concurrency: number
  loaderMs: number
}
const counter = ioredisClient(cfg.target)
const cache = await createContender(cfg.name, cfg.target, cfg.prefix)
await counter.ping()
// Connect (and discover the cluster) before the start line, so no process gets a head start.
await cache.getOrSet(`warm-up:${process.pid}`, async () => 1)
process.stdout.write('ready\n')
for await (const line of createInterface({ input: process.stdin })) if (line === 'go') break

const loader = async () => {
  await counter.incr(cfg.counterKey)
  await new Promise((r) => setTimeout(r, cfg.loaderMs))
  return { key: cfg.key, pid: process.pid }
}
const results = await Promise.allSettled(
  Array.from({ length: cfg.concurrency }, () => cache.getOrSet(cfg.key, loader)),
)
process.stdout.write(JSON.stringify({ errors: results.filter((r) => r.status === 'rejected').length }) + '\n')
await cache.close()
counter.disconnect()
process.exit(0)
