import { setTimeout as sleep } from 'node:timers/promises'
import { startNetworkFaults, until } from '@kunci/topology'
import { Cluster } from 'ioredis'
import { keySlot } from 'kunci'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { eventually } from '../support/eventually.js'
import { maxOf, minOf } from '../support/failover-checks.js'
import { runReconcile } from '../support/money.js'
import { runSalesCrowd, type SaleRequest } from '../support/partition-crowd.js'
import {
  FAILOVER_KINDS,
  type PartitionFault,
  type PartitionKind,
  partitionDriver,
} from '../support/partition-faults.js'
import { useStack } from '../support/stack-fixture.js'

// Issue 20: real network partitions (iptables DROP between nodes on their own loopback
// addresses, and between one service instance, run as another uid, and chosen nodes) under the
// retrying crowd, over a sequence of sales, at cluster-node-timeout 1 s and at Redis's default
// 15 s. What must hold: every 200 ends confirmed; no ALREADY_PURCHASED names an order that does
// not end live; nobody holds two units of one sale, in Redis or SQL; reconcile exits 0 and is
// right (a planted drift makes it exit 1), the drift gauge is 0; every 202 resolves, and only a
// failover (a, c, e) may drop one; no 5xx, no hang, every 503 within its deadline, answers again
// within 5 s of each promotion or heal.

const SOLO_UID = 65534
const STOCK = 600
/** The checkout's Redis deadline (2 s) + timers firing late on a loaded machine. */
const DEADLINE_MS = 3_000
const RECOVERY_BOUND_MS = 5_000
const answered = (r: SaleRequest) => r.status === 200 || r.status === 202 || r.status === 409

interface Config {
  nodeTimeoutMs: number
  kinds: PartitionKind[]
  base: number
}

const CONFIGS: Config[] = [
  {
    nodeTimeoutMs: 1_000,
    // Each kind once: fault b then hits the pair fault a reversed (the promoted replica as the
    // master), so the second round that ran here (a e c b d) showed nothing the first did not,
    // for 40 s of the suite's 15 minutes. PARTITION_KINDS=aaaaaaaaaaaa repeats one (20 a's: 330
    // sales, 72,218 200s, 0 lost, while this was written).
    kinds: (process.env.PARTITION_KINDS?.split('') as PartitionKind[] | undefined) ?? [
      'a',
      'b',
      'c',
      'd',
      'e',
    ],
    base: 810_000,
  },
  {
    nodeTimeoutMs: 15_000,
    kinds: (process.env.PARTITION_KINDS_15?.split('') as PartitionKind[] | undefined) ?? ['a', 'b', 'e', 'd'],
    base: 820_000,
  },
]

interface OrderRow {
  order_id: string
  product_id: string
  user_id: string
  status: string
  failure_reason: string | null
}

type Reconciled = { product_id: string; in_queue: number; problems: string[] }[]

describe.each(CONFIGS)('partitions at cluster-node-timeout $nodeTimeoutMs ms', (config) => {
  const fx = useStack(
    {
      strategy: 'lua',
      instances: 2,
      lockNodes: false,
      durability: 'replica',
      distinctHosts: true,
      clusterNodeTimeoutMs: config.nodeTimeoutMs,
      soloInstance: { uid: SOLO_UID },
    },
    { db: `fs_part_${config.nodeTimeoutMs}` },
  )

  it(`faults ${config.kinds.join(' ')} under a retrying crowd: no acknowledged reservation lost, the books hold`, {
    timeout: 900_000,
  }, async () => {
    const { stack } = fx
    const faults = await startNetworkFaults({ name: 'partition-crowd' })
    const driver = partitionDriver(stack, faults, { nodeTimeoutMs: config.nodeTimeoutMs, soloUid: SOLO_UID })
    const sales: string[] = []
    const opened: { productId: string; at: number }[] = []
    let current = ''
    const stop = new AbortController()
    try {
      const openSale = async () => {
        // Every sale in the first shard's slots (0–5460), so that whichever sale is being sold when
        // a fault starts, the sales after it are on the same master (or its promoted replica):
        // each fault hits the master taking the reservations, for as long as it lasts.
        let n = config.base + (sales.length === 0 ? 0 : Number(sales.at(-1)) - config.base + 1)
        while (keySlot(`{sale:${n}}:stock`) > 5460) n++
        const productId = String(n)
        // A partition may make the new sale's slot answer 503 for a moment: retry.
        await until(
          () =>
            stack.putSale({ productId, stock: STOCK }).then(
              () => true,
              () => false,
            ),
          `sale ${productId} created`,
          { timeoutMs: 60_000, intervalMs: 200 },
        )
        sales.push(productId)
        opened.push({ productId, at: Date.now() })
        current = productId
      }
      await openSale()
      const urls = [stack.url, stack.soloUrl!]
      const crowd = runSalesCrowd({ urls, clients: 100, current: () => current, stop: stop.signal })
      // The next sale once this one is sold out (or after 15 s: a sale a failover left with
      // units that the instances' memory still calls sold out).
      const sequence = (async () => {
        while (!stop.signal.aborted) {
          const opened = Date.now()
          await until(
            async () => {
              if (stop.signal.aborted || Date.now() - opened > 15_000) return true
              const res = await fetch(`${stack.url}/v1/products/${current}`).catch(() => undefined)
              if (res?.status !== 200) return false
              return ((await res.json()) as { remaining_stock: number }).remaining_stock === 0
            },
            'the sale sold out',
            { timeoutMs: 60_000, intervalMs: 100 },
          )
          if (!stop.signal.aborted) await openSale()
        }
      })()
      const done: PartitionFault[] = []
      await sleep(1_500)
      for (const kind of config.kinds) {
        const productId = current
        done.push(await driver.run(kind, productId, keySlot(`{sale:${productId}}:stock`)))
        await sleep(1_500)
      }
      stop.abort()
      const { requests, unanswered } = await crowd
      await sequence

      // ---- the books, once the worker has settled everything ----
      const unsettled = (r: { out: string }) => {
        try {
          return (JSON.parse(r.out) as Reconciled).filter((s) => s.in_queue !== 0)
        } catch {
          return undefined
        }
      }
      const settled = await eventually(
        () => runReconcile(fx.stack),
        (r) => r.code !== 2 && unsettled(r)?.length === 0,
        { timeoutMs: 120_000, intervalMs: 1_000, what: 'every order event settled' },
      ).catch(async (err: Error) => {
        const last = await runReconcile(fx.stack)
        const stuck = unsettled(last) ?? []
        const metrics = await fetch(stack.workerMetricsUrl).then((r) => r.text())
        const admin = new Cluster(stack.cluster.startupNodes, {
          redisOptions: { username: stack.redisAdmin.username, password: stack.redisAdmin.password },
        })
        const streams: unknown[] = []
        for (const s of stuck) {
          const key = `{sale:${s.product_id}}:orders`
          streams.push(
            await Promise.all([
              admin.xinfo('GROUPS', key),
              admin.xinfo('CONSUMERS', key, 'order-workers'),
              admin.xlen(key),
              admin.cluster('SLOTS'),
            ]).catch((e: Error) => e.message),
          )
        }
        admin.disconnect()
        throw new Error(
          `${err.message.split(';')[0]}: ${JSON.stringify(stuck)}\nstreams: ${JSON.stringify(streams)}\n` +
            `worker metrics: ${metrics
              .split('\n')
              .filter(
                (l) =>
                  /replica_acks|unconfirmed|persisted_total|stream_pending/.test(l) && !l.startsWith('#'),
              )
              .join('\n')}\nworker: ${stack.worker.output.slice(-30).join('')}`,
        )
      })
      const report = JSON.parse(settled.out) as Reconciled
      const problems = report.filter((s) => s.problems.length > 0)
      expect(problems, settled.err).toEqual([])
      expect(settled.code).toBe(0)

      const db = new pg.Client({ connectionString: stack.databaseUrl })
      await db.connect()
      let orders: OrderRow[]
      let twice: { product_id: string; user_id: string; n: number }[]
      try {
        orders = (
          await db.query<OrderRow>(
            'SELECT order_id, product_id, user_id, status, failure_reason FROM orders WHERE product_id = ANY($1)',
            [sales],
          )
        ).rows
        twice = (
          await db.query(
            `SELECT product_id, user_id, count(*)::int AS n FROM orders WHERE product_id = ANY($1)
               AND status IN ('confirmed', 'paid', 'reserved') GROUP BY product_id, user_id HAVING count(*) > 1`,
            [sales],
          )
        ).rows
      } finally {
        await db.end()
      }
      const byId = new Map(orders.map((o) => [o.order_id, o]))
      const live = (id: string | undefined) => {
        const s = byId.get(id ?? '')?.status
        return s === 'confirmed' || s === 'paid'
      }
      const broken: string[] = []
      /** Where a request falls among the faults, for a failure's message. */
      const where = (r: SaleRequest) => {
        const f = [...done].reverse().find((x) => x.startedAt <= r.sentAt) ?? done[0]!
        const at = (t: number | undefined) => (t === undefined ? '-' : `${r.sentAt - t}`)
        const why = r.status === 0 || r.status === 503 ? ` (${r.message ?? '?'})` : ''
        return `${r.url ? 'solo' : 'main'} ${r.status}${why} ${r.code ?? ''} ${Math.round(r.ms)}/${r.serverMs ?? '-'} ms, sent ${at(f.startedAt)} ms after ${f.kind} started (promoted ${at(f.promotedAt)}, healed ${at(f.healedAt)}, resynced ${at(f.resyncedAt)}, confirmed ${at(f.confirmedAt)}, recovered ${at(f.recoveredAt)})`
      }
      const ok = requests.filter((r) => r.status === 200)
      const lost200 = ok.filter((r) => !live(r.orderId))
      if (lost200.length > 0)
        broken.push(
          `${lost200.length} of ${ok.length} 200s did not end confirmed (e.g. ${JSON.stringify(byId.get(lost200[0]!.orderId!) ?? lost200[0])})`,
        )
      const already = requests.filter((r) => r.status === 409 && r.code === 'ALREADY_PURCHASED')
      const deadAlready = already.filter((r) => !live(r.orderId))
      if (deadAlready.length > 0)
        broken.push(
          `${deadAlready.length} ALREADY_PURCHASED named an order that did not end live: ${deadAlready
            .slice(0, 3)
            .map((r) => {
              const row = byId.get(r.orderId ?? '')
              const before = requests
                .filter((x) => x.userId === r.userId && x.productId === r.productId && x.sentAt < r.sentAt)
                .map(
                  (x) =>
                    `${x.status}${x.code ? ` ${x.code}` : ''} ${x.orderId === r.orderId ? 'same order' : (x.orderId ?? '')}`,
                )
              return `${where(r)}, again ${r.again}, order ${row ? `${row.status} ${row.failure_reason ?? ''}` : 'not in SQL'}, the user's earlier answers [${before.join(', ')}]`
            })
            .join('; ')}`,
        )
      if (twice.length > 0) broken.push(`${twice.length} users hold two live orders of one sale in SQL`)
      const failedBadly = orders.filter(
        (o) => o.failure_reason === 'sold_out_in_sql' || o.failure_reason === 'duplicate_unit',
      )
      if (failedBadly.length > 0)
        broken.push(
          `${failedBadly.length} orders failed ${[...new Set(failedBadly.map((o) => o.failure_reason))].join('/')} (Redis sold what SQL had sold)`,
        )
      // Redis: nobody recorded twice in a sale's buyers.
      const admin = new Cluster(stack.cluster.startupNodes, {
        redisOptions: { username: stack.redisAdmin.username, password: stack.redisAdmin.password },
      })
      try {
        for (const id of sales) {
          const counts = (await admin.hvals(`{sale:${id}}:buyers`)).map((v) => Number(v.split('|')[0]))
          const over = counts.filter((n) => n > 1).length
          if (over > 0) broken.push(`sale ${id}: ${over} users with two units in Redis`)
        }
        // A planted drift: one unit added behind the books' back makes reconcile exit 1.
        const planted = sales[0]!
        await admin.incr(`{sale:${planted}}:stock`)
        const drifted = await runReconcile(fx.stack)
        await admin.decr(`{sale:${planted}}:stock`)
        expect(drifted.code).toBe(1)
        const drift = (JSON.parse(drifted.out) as Reconciled).find((s) => s.product_id === planted)
        expect(drift?.problems.join(' ')).toContain('drift')
      } finally {
        admin.disconnect()
      }
      // 202s: each resolved (in SQL), or dropped by a failover, and then only in a failover's window.
      const pending = requests.filter((r) => r.status === 202)
      const dropped = pending.filter((r) => !byId.has(r.orderId ?? ''))
      // A failover's window: from 2 s before the cut (a 202's write not yet on the replica when the
      // cut came: WAIT did not show it there, and it never got there) to 2 s after the heal.
      const inFailover = (r: SaleRequest) =>
        done.some(
          (f) =>
            FAILOVER_KINDS.has(f.kind) && r.sentAt >= f.startedAt - 2_000 && r.sentAt <= f.healedAt + 2_000,
        )
      const droppedOutside = dropped.filter((r) => !inFailover(r))
      if (droppedOutside.length > 0)
        broken.push(
          `${droppedOutside.length} 202s dropped outside any failover window: ${droppedOutside.slice(0, 3).map(where).join('; ')}`,
        )
      // Answers: no 5xx but 503, no hang, every answer within its deadline.
      const r404 = requests.filter((r) => r.status === 404)
      if (r404.length > 0) {
        const ids = [...new Set(r404.map((r) => r.productId))]
        const diag: string[] = []
        for (const id of ids) {
          const mine = r404.filter((r) => r.productId === id)
          const o = opened.find((x) => x.productId === id)
          diag.push(
            `sale ${id} opened ${o ? o.at - done[0]!.startedAt : '-'} ms after fault 0; 404s ${mine.length} main ${mine.filter((r) => r.url === 0).length} from ${minOf(mine.map((r) => r.sentAt)) - done[0]!.startedAt} to ${maxOf(mine.map((r) => r.sentAt)) - done[0]!.startedAt}; ok after: ${requests.filter((r) => r.productId === id && r.status !== 404).length} first ${minOf(requests.filter((r) => r.productId === id && r.status !== 404).map((r) => r.sentAt)) - done[0]!.startedAt} messages ${[...new Set(mine.map((r) => (r as { message?: string }).message))].join('|')}`,
          )
        }
        console.log(
          `[partition-crowd] 404 diag: ${diag.join('\n')} faults ${JSON.stringify(done.map((f) => ({ ...f, startedAt: 0, promotedAt: (f.promotedAt ?? 0) - f.startedAt, healedAt: f.healedAt - f.startedAt, recoveredAt: f.recoveredAt - f.startedAt })))}`,
        )
      }
      const statuses: Record<string, number> = {}
      for (const r of requests) statuses[r.status] = (statuses[r.status] ?? 0) + 1
      if (Object.keys(statuses).some((s) => !['200', '202', '409', '429', '503'].includes(s))) {
        // Seen twice: 48 and 55 connections of the main instance broken at the heal of fault a
        // (status 0 after 200-400 ms): an instance that died? Its notable lines say (a crash's
        // stack, the primary's "instance exited"), with the time each arrived.
        console.log(
          `[partition-crowd] main's notable output:\n${stack.service.notable.join('\n')}\nsolo's:\n${stack.solo?.notable.join('\n') ?? ''}`,
        )
        broken.push(
          `answers outside 200/202/409/429/503 (0 = no answer in 10 s): ${JSON.stringify(statuses)}: ${requests
            .filter((r) => !['200', '202', '409', '429', '503'].includes(String(r.status)))
            .slice(0, 3)
            .map(where)
            .join('; ')}`,
        )
      }
      const slow = requests.filter((r) => (r.serverMs ?? 0) > DEADLINE_MS)
      if (slow.length > 0)
        broken.push(`${slow.length} answers past the deadline: ${slow.slice(0, 3).map(where).join('; ')}`)
      // Answering again within 5 s of each promotion (or heal, for the instance that was cut off).
      const recovery: string[] = []
      for (const [i, f] of done.entries()) {
        const until = done[i + 1]?.startedAt ?? Number.POSITIVE_INFINITY
        for (const url of [0, 1]) {
          const cut = url === 1 && (f.kind === 'c' || f.kind === 'd')
          const from = cut || f.promotedAt === undefined ? f.healedAt : f.promotedAt
          const mine = requests.filter((r) => r.url === url && r.sentAt >= from && r.sentAt < until)
          const first = minOf(mine.filter(answered).map((r) => r.sentAt + r.ms)) - from
          recovery.push(
            `${f.kind}/${url === 0 ? 'main' : 'solo'} ${Math.round(first)} ms${url === 0 ? ` (after the heal: pair in sync ${f.resyncedAt - f.healedAt} ms, acknowledging ${f.confirmedAt - f.healedAt} ms, Cluster whole ${f.recoveredAt - f.healedAt} ms)` : ''}`,
          )
          // Each promotion and each heal (a node rejoining, a replica resyncing) is a new event:
          // answered again within the bound of the latest one. The replica's resync counts: until
          // a replica holds the sale again, a buyer's repeat cannot be shown its purchase is kept
          // (durability replica) and is answered 503 on purpose (lua.ts #unconfirmedPurchase);
          // after fault e the restarted master's full sync may end seconds after the heal on a
          // loaded machine (CI: 503s 5.5 s after the heal, the Cluster whole 10.3 s after it).
          // And a replica in sync is not yet one that acknowledges: the bound counts from the
          // first write in the sale's slot that a replica acknowledged again (measured here, and
          // printed with the recovery times below).
          const last = Math.max(from, f.healedAt, f.resyncedAt, f.confirmedAt)
          // Only requests answered before the next fault began: one still in flight when it
          // began meets that fault (a 503 for its ALREADY_PURCHASED once b cuts the replica).
          const late = mine.filter((r) => r.sentAt >= last + RECOVERY_BOUND_MS && r.sentAt + r.ms < until)
          const notAnswered = late.filter((r) => !answered(r))
          if (!(first <= RECOVERY_BOUND_MS))
            broken.push(
              `fault ${i} (${f.kind}), ${url ? 'solo' : 'main'}: first answer ${first} ms after ${from === f.healedAt ? 'the heal' : 'the promotion'}`,
            )
          if (notAnswered.length > 0)
            broken.push(
              `fault ${i} (${f.kind}), ${url ? 'solo' : 'main'}: ${notAnswered.length} of ${late.length} requests after the bound not answered: ${notAnswered.slice(0, 3).map(where).join('; ')}`,
            )
        }
      }
      const droppedBy: Record<string, number> = {}
      for (const r of dropped) {
        const f = done.find(
          (x) =>
            FAILOVER_KINDS.has(x.kind) && r.sentAt >= x.startedAt - 2_000 && r.sentAt <= x.healedAt + 2_000,
        )
        droppedBy[f?.kind ?? '-'] = (droppedBy[f?.kind ?? '-'] ?? 0) + 1
      }
      console.log(
        `[partition-crowd] node timeout ${config.nodeTimeoutMs} ms: ${sales.length} sales, answers ${JSON.stringify(statuses)}, ` +
          `ALREADY_PURCHASED ${already.length}, 202 dropped by a failover ${dropped.length} ${JSON.stringify(droppedBy)}, ` +
          `unanswered at the stop ${unanswered}; answering again: ${recovery.join(', ')}`,
      )
      // The drift gauge says the same as reconcile (two readings agree, every 2 s or so).
      await eventually(
        () => fetch(stack.workerMetricsUrl).then((r) => r.text()),
        (text) =>
          sales.every((id) =>
            new RegExp(`^flash_sale_reconcile_drift\\{product_id="${id}"\\} 0$`, 'm').test(text),
          ),
        { timeoutMs: 30_000, intervalMs: 500, what: 'flash_sale_reconcile_drift 0 for every sale' },
      )
      expect(broken).toEqual([])
      expect(ok.length).toBeGreaterThan(STOCK)
    } finally {
      stop.abort()
      driver.close()
      await faults.close()
    }
  })
})
