import { Counter, Gauge, Histogram, type Registry } from 'prom-client'

/**
 * The waiting room's metrics, created with the service's (service-metrics.ts). The room's state
 * lives in Redis, shared by every instance, so its gauges are the same value wherever read:
 * they aggregate with `max` across node:cluster workers, and dashboards should use max() across
 * pods too. Counters and the histogram count what this instance did (sum them). They live in
 * metrics/ with the rest: service-metrics.ts composes them, and metrics/ sits below the waiting
 * room, which only records into them (test/unit/layers.test.ts).
 */
export function createWaitingRoomMetrics(registry: Registry) {
  const registers = [registry]
  return {
    waiting: new Gauge({
      name: 'flash_sale_waiting_room_waiting',
      help: 'Users waiting in the room, as last seen by this process',
      labelNames: ['product_id'] as const,
      aggregator: 'max',
      registers,
    }),
    admitted: new Gauge({
      name: 'flash_sale_waiting_room_admitted',
      help: 'Users holding a live admission (admitted, not yet bought, not lapsed), as last seen',
      labelNames: ['product_id'] as const,
      aggregator: 'max',
      registers,
    }),
    admitRate: new Gauge({
      name: 'flash_sale_waiting_room_admit_rate',
      help: 'Admissions per second measured over the last 10 s (the rate the ETAs use)',
      labelNames: ['product_id'] as const,
      aggregator: 'max',
      registers,
    }),
    admittedTotal: new Counter({
      name: 'flash_sale_waiting_room_admitted_total',
      help: 'Users admitted by the room advances this instance ran (rate() = admissions per second)',
      labelNames: ['product_id'] as const,
      registers,
    }),
    waitSeconds: new Histogram({
      name: 'flash_sale_waiting_room_wait_seconds',
      help: 'Time in line from joining (or the opening, for early joiners) to admission',
      labelNames: ['product_id'] as const,
      buckets: [0.5, 1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600],
      registers,
    }),
    dropped: new Counter({
      name: 'flash_sale_waiting_room_dropped_total',
      help: 'Places given up: idle = not polled for drop_after_seconds, admission_expired = admitted but did not buy in time',
      labelNames: ['product_id', 'reason'] as const,
      registers,
    }),
    refusals: new Counter({
      name: 'flash_sale_waiting_room_refusals_total',
      help: 'Checkouts refused by the room: WAITING_ROOM (no ticket), NOT_ADMITTED, INVALID_TICKET (by reason)',
      labelNames: ['code', 'reason'] as const,
      registers,
    }),
    requests: new Counter({
      name: 'flash_sale_waiting_room_requests_total',
      help: 'Joins and polls by answer (waiting, admitted, sold_out, closed, or an error code)',
      labelNames: ['op', 'outcome'] as const,
      registers,
    }),
    unreplicated: new Counter({
      name: 'flash_sale_waiting_room_unreplicated_total',
      help: 'Room answers (and the admissions in them) sent before a replica confirmed them: what a failover may take back',
      labelNames: ['what'] as const,
      registers,
    }),
  }
}

export type WaitingRoomMetrics = ReturnType<typeof createWaitingRoomMetrics>

/** Series the alerts will read, at 0 before the first event. */
export function initWaitingRoomSeries(m: WaitingRoomMetrics): void {
  for (const code of ['WAITING_ROOM', 'NOT_ADMITTED']) m.refusals.inc({ code, reason: '' }, 0)
  for (const what of ['answers', 'admissions']) m.unreplicated.inc({ what }, 0)
}
