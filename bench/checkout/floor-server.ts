/**
 * The cheapest checkout Node can serve here, to tell what the service's CPU per reservation
 * (issue 24: ≤ 60 µs asked, 151–165 µs measured) is made of: floor.ts runs these variants
 * side by side with wrk and measures their CPU per request.
 *
 *   fastify-bare    bare-server.ts's baseline: parsed JSON body, constant answer
 *   http-bare       the same on node:http alone (no fastify)
 *   fastify-reserve fastify, and every checkout of one event-loop turn reserved in ONE script call
 *                   on a standalone Redis: a stock counter and one XADD per order, nothing else
 *                   (no Idempotency-Key, no buyer record, no replica confirmation, no metrics, no
 *                   validation beyond JSON, no cluster routing: less than any real reservation)
 *   http-reserve    the same on node:http alone
 *
 *   node --import tsx bench/checkout/floor-server.ts <variant> <port> <redisPort> <instances>
 *
 * Process model as the service's and bare-server.ts's: a node:cluster primary with <instances>
 * workers sharing the port. The primary resets the stock and empties the orders stream, prints
 * `{"ready":true}` once every worker listens, and stops them on SIGTERM.
 */
import cluster from 'node:cluster'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import Fastify from 'fastify'
import { Redis } from 'ioredis'

const VARIANTS = ['fastify-bare', 'http-bare', 'fastify-reserve', 'http-reserve'] as const
type Variant = (typeof VARIANTS)[number]

const STOCK_KEY = 'floor:{9921}:stock'
const STREAM_KEY = 'floor:{9921}:orders'
/** Never sold out within a run: every answer is a reservation. */
const STOCK = 1_000_000_000

// KEYS[1] stock, KEYS[2] orders stream; ARGV[1] count, then per checkout: user, order id.
// One DECRBY for the batch and one XADD per order: the least a reservation with a durable order
// can write.
const RESERVE_LUA = `
local n = tonumber(ARGV[1])
local stock = tonumber(redis.call('GET', KEYS[1]) or '0')
local out = {}
local taken = 0
for i = 1, n do
  if stock - taken > 0 then
    taken = taken + 1
    redis.call('XADD', KEYS[2], '*', 'u', ARGV[2 * i], 'o', ARGV[2 * i + 1])
    out[i] = 1
  else
    out[i] = 0
  end
end
if taken > 0 then redis.call('DECRBY', KEYS[1], taken) end
return out
`

const BARE_ANSWER = JSON.stringify({ order_id: '9921.bare', status: 'confirmed' })

interface Pending {
  user: string
  orderId: string
  done: (ok: boolean) => void
}

/** Every checkout of one event-loop turn in one script call (the service's batching, reduced). */
function reserver(redisPort: number): (user: string, done: (ok: boolean, orderId: string) => void) => void {
  const redis = new Redis({ port: redisPort, host: '127.0.0.1' })
  redis.defineCommand('reserve', { numberOfKeys: 2, lua: RESERVE_LUA })
  let queue: Pending[] = []
  let seq = 0
  const prefix = `${process.pid}.`
  const flush = () => {
    const batch = queue
    queue = []
    const args: string[] = [String(batch.length)]
    for (const p of batch) args.push(p.user, p.orderId)
    ;(redis as unknown as { reserve(...a: string[]): Promise<number[]> })
      .reserve(STOCK_KEY, STREAM_KEY, ...args)
      .then(
        (r) => {
          for (let i = 0; i < batch.length; i++) batch[i]!.done(r[i] === 1)
        },
        () => {
          for (const p of batch) p.done(false)
        },
      )
  }
  return (user, done) => {
    const orderId = prefix + ++seq
    if (queue.length === 0) setImmediate(flush)
    queue.push({ user, orderId, done: (ok) => done(ok, orderId) })
  }
}

async function worker(variant: Variant, port: number, redisPort: number): Promise<void> {
  const reserve = variant.endsWith('-reserve') ? reserver(redisPort) : undefined
  const answer = (user: unknown, send: (status: number, body: string) => void) => {
    if (!reserve) return send(200, BARE_ANSWER)
    reserve(String(user), (ok, orderId) =>
      ok
        ? send(200, JSON.stringify({ order_id: orderId, status: 'reserved' }))
        : send(409, '{"code":"SOLD_OUT"}'),
    )
  }
  if (variant.startsWith('fastify')) {
    const app = Fastify({ logger: { level: 'warn' }, bodyLimit: 16_384 })
    app.removeContentTypeParser('text/plain')
    app.post('/v1/checkout', { bodyLimit: 1_024 }, (request, reply) => {
      const body = request.body as { user_id?: unknown } | null
      answer(body?.user_id, (status, text) => {
        void reply.code(status).type('application/json').send(text)
      })
    })
    await app.listen({ host: '127.0.0.1', port })
  } else {
    const server = createServer((req: IncomingMessage, res: ServerResponse) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        let user: unknown
        try {
          user = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { user_id?: unknown }).user_id
        } catch {
          res.writeHead(400).end()
          return
        }
        answer(user, (status, text) => {
          res.writeHead(status, {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(text),
          })
          res.end(text)
        })
      })
    })
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
  }
  process.send?.('listening')
}

async function primary(instances: number, redisPort: number): Promise<void> {
  const redis = new Redis({ port: redisPort, host: '127.0.0.1' })
  await redis.multi().set(STOCK_KEY, STOCK).del(STREAM_KEY).exec()
  redis.disconnect()
  let listening = 0
  for (let i = 0; i < instances; i++) {
    const w = cluster.fork()
    w.on('message', (m) => {
      if (m === 'listening' && ++listening === instances)
        process.stdout.write(`${JSON.stringify({ ready: true })}\n`)
    })
  }
  const stop = () => {
    for (const w of Object.values(cluster.workers ?? {})) w?.kill('SIGKILL')
    process.exit(0)
  }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
}

const [variant, port, redisPort, instances] = process.argv.slice(2)
if (!VARIANTS.includes(variant as Variant)) {
  process.stderr.write(`usage: floor-server.ts <${VARIANTS.join('|')}> <port> <redisPort> <instances>\n`)
  process.exit(2)
}
if (cluster.isPrimary) await primary(Number(instances ?? 2), Number(redisPort))
else await worker(variant as Variant, Number(port), Number(redisPort))
