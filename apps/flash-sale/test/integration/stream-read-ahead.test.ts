/**
 * orders/stream-consumer.ts reads the next batch of a sale's events while the sink persists a full
 * one (issue 24: the Redis round trips overlap the SQL transaction). On a real Redis: the next
 * batch is pending in the consumer's name while the sink still holds the first; every event is
 * handed on once, in stream order; an event that failed is retried in the very next batch even
 * while new events keep coming; stop() persists and acknowledges the batch read ahead.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { OrderSink, SinkEntry, SinkResult } from '../../src/orders/stream-consumer.js'
import { StreamConsumer } from '../../src/orders/stream-consumer.js'
import type { RedisClient } from '../../src/redis/connect.js'
import { saleKeys, WORKER_GROUP } from '../../src/redis/keys.js'
import { eventually } from '../support/eventually.js'
import { type OneNode, startOneNode } from '../support/one-node.js'

const BATCH = 100

let one: OneNode
let redis: RedisClient

beforeAll(async () => {
  one = await startOneNode()
  redis = one.redis
}, 60_000)

afterAll(async () => {
  await one?.stop()
})

/** A sale's stream with `n` order events; their ids in stream order. */
async function stream(productId: string, n: number, from = 0): Promise<string[]> {
  const k = saleKeys(productId)
  if (from === 0) await redis.xgroup('CREATE', k.orders, WORKER_GROUP, '0', 'MKSTREAM')
  const p = redis.pipeline()
  for (let i = from; i < from + n; i++) {
    p.xadd(
      k.orders,
      '*',
      'order_id',
      `o-${productId}-${i}`,
      'user_id',
      String(i),
      'round',
      '1',
      'unit',
      String(i),
      'price_cents',
      '100',
      'reserved_at',
      String(Date.now()),
    )
  }
  // The statuses the reservations wrote: settle.lua sets only those still there.
  for (let i = from; i < from + n; i++) p.hset(k.status, `o-${productId}-${i}`, 'reserved')
  const replies = ((await p.exec()) ?? []).slice(0, n)
  return replies.map(([err, id]) => {
    if (err) throw err
    return String(id)
  })
}

/** Events pending in the group (delivered, not acknowledged). */
async function pending(productId: string): Promise<number> {
  const summary = (await redis.xpending(saleKeys(productId).orders, WORKER_GROUP)) as [number, ...unknown[]]
  return Number(summary[0])
}

/** A sink that records each batch; `during(i, ids)` runs while batch i is in its hands. */
function recordingSink(
  during: (i: number, ids: string[]) => Promise<void>,
  fail: (i: number, e: SinkEntry) => boolean = () => false,
): OrderSink & { batches: string[][] } {
  const batches: string[][] = []
  return {
    batches,
    async handle(entries: readonly SinkEntry[]): Promise<SinkResult[]> {
      const i = batches.length
      const ids = entries.map((e) => e.id)
      batches.push(ids)
      await during(i, ids)
      return entries.map((e) =>
        fail(i, e)
          ? { kind: 'error', error: new Error('planted failure') }
          : { kind: 'settled', status: 'confirmed' },
      )
    },
  }
}

describe('StreamConsumer reads ahead', () => {
  it('the next batch is read while the sink holds a full one; every event once, in stream order', async () => {
    const productId = 'ra-1'
    const ids = await stream(productId, BATCH * 3 + 40)
    const sink = recordingSink(async (i) => {
      // While the first batch is in the sink, the second is already delivered to this consumer.
      if (i === 0)
        await eventually(
          () => pending(productId),
          (n) => n === BATCH * 2,
          {
            timeoutMs: 10_000,
            intervalMs: 20,
            what: 'the next batch read ahead while the sink holds the first',
          },
        )
    })
    const consumer = new StreamConsumer({ redis, sink, batchSize: BATCH, consumer: 'c1' })
    consumer.start(async () => [productId])
    try {
      await eventually(
        async () => consumer.handled,
        (n) => n === ids.length,
        { timeoutMs: 20_000, what: 'every event handed on' },
      )
    } finally {
      await consumer.stop()
    }
    expect(sink.batches.flat()).toEqual(ids)
    expect(sink.batches.map((b) => b.length)).toEqual([BATCH, BATCH, BATCH, 40])
    expect(await pending(productId)).toBe(0)
    // settle.lua wrote each order's status.
    const statuses = await redis.hmget(saleKeys(productId).status, 'o-ra-1-0', `o-ra-1-${ids.length - 1}`)
    expect(statuses).toEqual(['confirmed', 'confirmed'])
  })

  it('an event that failed is retried in the next batch, ahead of the new events that keep coming', async () => {
    const productId = 'ra-2'
    const ids = await stream(productId, BATCH * 3)
    let failed: string | undefined
    let more: Promise<string[]> | undefined
    const sink = recordingSink(
      async (i) => {
        // New events keep arriving while the batches are persisted.
        if (i === 0) more = stream(productId, BATCH * 2, BATCH * 3)
      },
      (i, e) => {
        if (i === 0 && e.id === ids[7]) {
          failed = e.id
          return true
        }
        return false
      },
    )
    const consumer = new StreamConsumer({ redis, sink, batchSize: BATCH, consumer: 'c2' })
    consumer.start(async () => [productId])
    let all: string[] = ids
    try {
      await eventually(
        async () => {
          all = [...ids, ...((await more) ?? [])]
          return consumer.handled
        },
        (n) => more !== undefined && n === all.length,
        { timeoutMs: 20_000, what: 'every event handed on' },
      )
    } finally {
      await consumer.stop()
    }
    expect(failed).toBe(ids[7])
    // The next batch is the consumer's own pending events, the failed one first (its retry), not
    // the batch that was read ahead and then the flow of new events.
    expect(sink.batches[1]![0]).toBe(ids[7])
    const handedOn = sink.batches.flat()
    expect(handedOn.filter((id) => id === ids[7])).toHaveLength(2)
    expect(new Set(handedOn).size).toBe(all.length)
    expect(handedOn.length).toBe(all.length + 1)
    expect(await pending(productId)).toBe(0)
  })

  it('an acknowledgement that fails (it runs beside the next batch) leaves its batch pending: read again, acknowledged', async () => {
    const productId = 'ra-4'
    const k = saleKeys(productId)
    const ids = await stream(productId, BATCH * 3)
    const errors: string[] = []
    const sink = recordingSink(async (i) => {
      // settle.lua's HMGET of the statuses fails on a key of the wrong type (WRONGTYPE).
      if (i === 0) await redis.set(k.status, 'not a hash')
      if (i === 1) {
        await eventually(
          async () => errors.length,
          (n) => n > 0,
          { timeoutMs: 10_000, intervalMs: 20, what: "the first batch's acknowledgement to fail" },
        )
        await redis.del(k.status)
      }
    })
    const consumer = new StreamConsumer({
      redis,
      sink,
      batchSize: BATCH,
      consumer: 'c4',
      onError: (e) => errors.push((e as Error).message),
    })
    consumer.start(async () => [productId])
    try {
      await eventually(
        async () => ({ handled: consumer.handled, pending: await pending(productId) }),
        // The failed acknowledgement counted nothing: the redelivered batch is counted once.
        (s) =>
          s.handled === ids.length && s.pending === 0 && sink.batches.flat().length === ids.length + BATCH,
        { timeoutMs: 20_000, what: 'every event acknowledged, the first batch twice' },
      )
    } finally {
      await consumer.stop()
    }
    expect(errors.join(' ')).toContain('WRONGTYPE')
    const handedOn = sink.batches.flat()
    // Read again before any event after the batch that was in the sink when it failed: the next
    // clean batch does not make the consumer forget it (the flow of new events would starve it).
    expect(handedOn.lastIndexOf(ids[0]!)).toBeLessThan(handedOn.indexOf(ids[BATCH * 2]!))
    // The first batch went to the sink again (the sink finds it done: an idempotent duplicate).
    expect(handedOn.filter((id) => ids.slice(0, BATCH).includes(id))).toHaveLength(BATCH * 2)
    expect(new Set(handedOn)).toEqual(new Set(ids))
    expect(handedOn).toHaveLength(ids.length + BATCH)
  })

  it('stop() persists and acknowledges the batch read ahead before it resolves', async () => {
    const productId = 'ra-3'
    const ids = await stream(productId, BATCH * 4)
    let stopped: Promise<void> | undefined
    let consumer: StreamConsumer | undefined
    const sink = recordingSink(async (i) => {
      if (i !== 0) return
      await eventually(
        () => pending(productId),
        (n) => n === BATCH * 2,
        { timeoutMs: 10_000, intervalMs: 20, what: 'the next batch read ahead' },
      )
      // Stopped while the first batch is in the sink and the second read ahead.
      stopped = consumer!.stop()
    })
    consumer = new StreamConsumer({ redis, sink, batchSize: BATCH, consumer: 'c3' })
    consumer.start(async () => [productId])
    // (Wrapped: an async read returning the promise itself would wait for it.)
    await eventually(
      async () => ({ stopped }),
      (s) => s.stopped !== undefined,
      { timeoutMs: 10_000, what: 'the stop' },
    )
    await stopped
    expect(sink.batches.flat()).toEqual(ids.slice(0, BATCH * 2))
    expect(await pending(productId)).toBe(0)
    // The rest was never read: the next consumer finds it as new events.
    const info = (await redis.xinfo('GROUPS', saleKeys(productId).orders)) as unknown[][]
    const group = info[0]!
    expect(String(group[group.indexOf('last-delivered-id') + 1])).toBe(ids[BATCH * 2 - 1])
  })
})
