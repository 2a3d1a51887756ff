import { Counter, Gauge, Histogram, type Registry } from 'prom-client'
import { RETURN_REASONS } from '../domain/order-states.js'
import { createWaitingRoomMetrics } from './room-metrics.js'

/**
 * The service's own metrics. Names are a contract with deploy/ (alerts, dashboard): a test there
 * reads them from a live /metrics, so rename only together with the rules that use them.
 * Lock and cache figures do not live here: they come from kunci's events through kunci-bridge.ts.
 */
export function createServiceMetrics(registry: Registry) {
  const registers = [registry]
  const metrics = {
    /** Every checkout answer. outcome: reserved, confirmed, pending, sold_out, already_purchased,
     * sale_not_started, sale_ended, busy, unavailable, invalid, unknown_product, idempotency_mismatch. */
    checkouts: new Counter({
      name: 'flash_sale_checkout_requests_total',
      help: 'Checkout answers by strategy, outcome and HTTP status',
      labelNames: ['strategy', 'outcome', 'status'] as const,
      registers,
    }),
    checkoutDuration: new Histogram({
      name: 'flash_sale_checkout_duration_seconds',
      help: 'Checkout latency from request to answer',
      labelNames: ['strategy'] as const,
      buckets: [0.0005, 0.001, 0.002, 0.003, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    }),
    inflight: new Gauge({
      name: 'flash_sale_checkout_inflight',
      help: 'Checkouts being processed by this instance',
      registers,
    }),
    shed: new Counter({
      name: 'flash_sale_shed_total',
      help: 'Requests refused before any work because the instance was saturated',
      labelNames: ['reason'] as const,
      registers,
    }),
    stockRemaining: new Gauge({
      name: 'flash_sale_stock_remaining',
      help: 'Units not yet reserved, as last seen by this process',
      labelNames: ['product_id'] as const,
      registers,
    }),
    replicaAcks: new Counter({
      name: 'flash_sale_replica_acks_total',
      help: 'Replica confirmations by how they ended: acked (a replica holds the writes: 200), alone (the Cluster majority shows no replica that could be promoted), or timeout, no_replica, error (not shown: 202 pending)',
      labelNames: ['outcome'] as const,
      registers,
    }),
    saleStoreUnreachable: new Gauge({
      name: 'flash_sale_sale_store_unreachable_seconds',
      help: "Seconds since the sale's Redis slot last answered this instance (0 while it answers)",
      labelNames: ['product_id'] as const,
      // Summed over the instances of one pod it would mean nothing: the worst instance counts.
      aggregator: 'max',
      registers,
    }),
    localAnswers: new Counter({
      name: 'flash_sale_local_answers_total',
      help: 'Checkouts of a sold-out sale answered from the instance memory, without a reservation call, by code',
      labelNames: ['code'] as const,
      registers,
    }),
    refusalLane: new Counter({
      name: 'flash_sale_refusal_lane_answers_total',
      help: 'Answers from memory given before the HTTP framework (routes/refusal-lane.ts); the rest of flash_sale_local_answers_total went through the checkout route',
      registers,
    }),
    saleEpoch: new Gauge({
      name: 'flash_sale_sale_epoch',
      help: "The sale's epoch as this instance knows it (it grows with every reset, restock or returned unit)",
      labelNames: ['product_id'] as const,
      aggregator: 'max',
      registers,
    }),
    saleNotifications: new Counter({
      name: 'flash_sale_sale_notifications_total',
      help: "Messages received on the sales' sharded channels, by kind (sold-out, epoch)",
      labelNames: ['kind'] as const,
      registers,
    }),
    saleResyncs: new Counter({
      name: 'flash_sale_sale_resyncs_total',
      help: 'Epoch changes found by the per-second check that no notification had brought (a missed notification)',
      labelNames: ['product_id'] as const,
      registers,
    }),
    reserveBatchSize: new Histogram({
      name: 'flash_sale_reserve_batch_size',
      help: 'Checkouts per script call to Redis (reserve: reserve.lua; refuse: recorded answers of a sold-out sale)',
      labelNames: ['kind'] as const,
      buckets: [1, 2, 5, 10, 20, 50, 100],
      registers,
    }),
    /** Worker side. */
    streamPending: new Gauge({
      name: 'flash_sale_stream_pending',
      help: 'Order events not settled yet: delivered to a worker and not acknowledged, or not delivered (counted from the entries)',
      labelNames: ['product_id'] as const,
      registers,
    }),
    streamLag: new Gauge({
      name: 'flash_sale_stream_lag',
      help: 'Order events in the stream not yet delivered to the worker group',
      labelNames: ['product_id'] as const,
      registers,
    }),
    unconfirmedReads: new Counter({
      name: 'flash_sale_worker_unconfirmed_reads_total',
      help: 'Batches the worker read and held back because no replica was shown to hold them and the master was not shown alone (a partition): they are persisted once it is shown, or never if a failover drops them',
      labelNames: ['product_id'] as const,
      registers,
    }),
    deadLetters: new Counter({
      name: 'flash_sale_dead_letters_total',
      help: 'Order events moved to the dead-letter stream after repeated failures',
      labelNames: ['product_id'] as const,
      registers,
    }),
    ordersPersisted: new Counter({
      name: 'flash_sale_orders_persisted_total',
      help: 'Orders written to SQL (confirmed) by the worker',
      labelNames: ['product_id'] as const,
      registers,
    }),
    ordersFailed: new Counter({
      name: 'flash_sale_orders_failed_total',
      help: 'Orders the worker refused (stale sale round, SQL stock guard)',
      labelNames: ['product_id', 'reason'] as const,
      registers,
    }),
    workerBatchSeconds: new Histogram({
      name: 'flash_sale_worker_batch_seconds',
      help: "Where a worker's batch spends its time, by phase: read (XREADGROUP), confirm (the replica round that shows it durable), sink (SQL or the relay; for SQL split into sql, the transaction, and returns, the units given back), settle (XACK and statuses in one script)",
      labelNames: ['phase'] as const,
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
      registers,
    }),
    sqlBatchSize: new Histogram({
      name: 'flash_sale_sql_batch_size',
      help: 'Order events the worker persisted per SQL transaction',
      buckets: [1, 2, 5, 10, 25, 50, 100, 250, 500],
      registers,
    }),
    walletCharges: new Counter({
      name: 'flash_sale_wallet_charges_total',
      help: 'Wallet charges written (at most one per order)',
      registers,
    }),
    /** Issue 16: money and returned units. */
    unitsReturned: new Counter({
      name: 'flash_sale_units_returned_total',
      help: 'Units given back to a sale in Redis (each order at most once), by why: INSUFFICIENT_FUNDS, duplicate_unit, cancelled, expired',
      labelNames: ['product_id', 'reason'] as const,
      registers,
    }),
    payments: new Counter({
      name: 'flash_sale_payments_total',
      help: 'Charges of orders by result: charged, insufficient_funds (refused, nothing taken), already_charged (a repeat)',
      labelNames: ['result'] as const,
      registers,
    }),
    walletBalanceNegative: new Gauge({
      name: 'flash_sale_wallet_balance_negative',
      help: 'Wallets whose balance is below zero, as last counted (the CHECK forbids it: never above 0)',
      registers,
    }),
    drift: new Gauge({
      name: 'flash_sale_reconcile_drift',
      help: 'Units per sale that neither SQL nor Redis accounts for: stock − sold − remaining − returns pending − dead letters − order events not yet in SQL (counted from the stream entries and order ids, never from lag), continuously; 0 when the books hold',
      labelNames: ['product_id'] as const,
      registers,
    }),
    notKept: new Gauge({
      name: 'flash_sale_orders_not_kept',
      help: "Orders of a sale's current round that were reserved (answered 200 or 202) and did not end live for a reason that is not the buyer's: dead-lettered events, failed duplicate_unit or sold_out_in_sql; reconcile names them; 0 when every reservation was kept",
      labelNames: ['product_id'] as const,
      registers,
    }),
    /** Hold sales (issue 16): pay and cancel, and the expiry sweeper (orders/hold-sweeper.ts). */
    orderActions: new Counter({
      name: 'flash_sale_order_actions_total',
      help: 'Answers of POST /v1/orders/:id/pay and /cancel, by action and outcome (the order status, or the error code)',
      labelNames: ['action', 'outcome'] as const,
      registers,
    }),
    ordersExpired: new Counter({
      name: 'flash_sale_orders_expired_total',
      help: 'Held orders that were not paid by pay_by and expired (their unit goes back to the sale)',
      labelNames: ['product_id'] as const,
      registers,
    }),
    holdsActive: new Gauge({
      name: 'flash_sale_holds_active',
      help: 'Orders reserved and waiting for their payment, as the last sweep of the sale counted them',
      labelNames: ['product_id'] as const,
      aggregator: 'max',
      registers,
    }),
    holdSweeps: new Counter({
      name: 'flash_sale_hold_sweeps_total',
      help: "Expiry sweeps of a hold sale by outcome: swept (this process held the sale's lock), busy (another process held it), fenced_out (a newer lock holder had written: this one wrote nothing), unavailable, error",
      labelNames: ['outcome'] as const,
      registers,
    }),
    holdSweepFencedOut: new Counter({
      name: 'flash_sale_hold_sweep_fenced_writes_refused_total',
      help: "Sweeper transactions refused by the sale's fence: this sweeper had lost its lock (stalled past its TTL) and a newer holder had written; nothing was written",
      labelNames: ['product_id'] as const,
      registers,
    }),
    /** flash_sale_waiting_room_*: see room-metrics.ts. */
    waitingRoom: createWaitingRoomMetrics(registry),
  }
  for (const reason of ['inflight', 'eventLoopDelay']) metrics.shed.inc({ reason }, 0)
  for (const outcome of ['acked', 'alone', 'timeout', 'no_replica', 'error'])
    metrics.replicaAcks.inc({ outcome }, 0)
  for (const code of ['SOLD_OUT', 'ALREADY_PURCHASED', 'SALE_ENDED']) metrics.localAnswers.inc({ code }, 0)
  for (const kind of ['sold-out', 'epoch']) metrics.saleNotifications.inc({ kind }, 0)
  for (const outcome of ['swept', 'busy', 'fenced_out', 'unavailable', 'error'])
    metrics.holdSweeps.inc({ outcome }, 0)
  for (const result of ['charged', 'insufficient_funds', 'already_charged'])
    metrics.payments.inc({ result }, 0)
  return metrics
}

/** Creates the series a sale's alerts read at 0, so rate() works before the first event. */
export function initSaleSeries(metrics: ServiceMetrics, productId: string): void {
  const product_id = productId
  metrics.ordersPersisted.inc({ product_id }, 0)
  metrics.deadLetters.inc({ product_id }, 0)
  metrics.unconfirmedReads.inc({ product_id }, 0)
  for (const reason of ['stale_round', 'sold_out_in_sql', 'duplicate_unit', 'INSUFFICIENT_FUNDS']) {
    metrics.ordersFailed.inc({ product_id, reason }, 0)
  }
  for (const reason of RETURN_REASONS) {
    metrics.unitsReturned.inc({ product_id, reason }, 0)
  }
}

export type ServiceMetrics = ReturnType<typeof createServiceMetrics>
