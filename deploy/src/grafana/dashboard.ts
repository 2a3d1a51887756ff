import type * as cog from '@grafana/grafana-foundation-sdk/cog'
import {
  LegendDisplayMode,
  LegendPlacement,
  VizLegendOptionsBuilder,
} from '@grafana/grafana-foundation-sdk/common'
import {
  type Dashboard,
  DashboardBuilder,
  DatasourceVariableBuilder,
  type Panel,
  RowBuilder,
} from '@grafana/grafana-foundation-sdk/dashboard'
import { DataqueryBuilder } from '@grafana/grafana-foundation-sdk/prometheus'
import { PanelBuilder as StatBuilder } from '@grafana/grafana-foundation-sdk/stat'
import { PanelBuilder as TimeseriesBuilder } from '@grafana/grafana-foundation-sdk/timeseries'

/**
 * The kunci / flash-sale dashboard, built with @grafana/grafana-foundation-sdk (it runs on
 * Node 20; see docs/operations.md#decisions). Every query is listed in DASHBOARD_QUERIES, so the
 * metric-name test reads exactly what the panels ask Prometheus for.
 */
const DS = { type: 'prometheus', uid: '$datasource' }
const RATE = '$__rate_interval'

interface Query {
  expr: string
  legend: string
}
interface PanelSpec {
  title: string
  unit: string
  queries: Query[]
  kind?: 'timeseries' | 'stat'
  description?: string
}
interface RowSpec {
  title: string
  panels: PanelSpec[]
}

const q = (expr: string, legend: string): Query => ({ expr, legend })

export const DASHBOARD_ROWS: readonly RowSpec[] = Object.freeze([
  {
    title: 'Checkout',
    panels: [
      {
        title: 'Checkouts by strategy and outcome',
        unit: 'reqps',
        queries: [
          q(
            `sum by (strategy, outcome) (rate(flash_sale_checkout_requests_total[${RATE}]))`,
            '{{strategy}} {{outcome}}',
          ),
        ],
      },
      {
        title: 'Checkout latency by strategy',
        unit: 's',
        queries: [
          q(
            `histogram_quantile(0.99, sum by (le, strategy) (rate(flash_sale_checkout_duration_seconds_bucket[${RATE}])))`,
            'p99 {{strategy}}',
          ),
          q(
            `histogram_quantile(0.5, sum by (le, strategy) (rate(flash_sale_checkout_duration_seconds_bucket[${RATE}])))`,
            'p50 {{strategy}}',
          ),
        ],
      },
      {
        title: '5xx ratio by strategy',
        unit: 'percentunit',
        queries: [
          q(
            `sum by (strategy) (rate(flash_sale_checkout_requests_total{status=~"5.."}[${RATE}])) / sum by (strategy) (rate(flash_sale_checkout_requests_total[${RATE}]))`,
            '{{strategy}}',
          ),
        ],
      },
      {
        title: 'In flight and shed',
        unit: 'short',
        queries: [
          q('sum(flash_sale_checkout_inflight)', 'in flight'),
          q(`sum by (reason) (rate(flash_sale_shed_total[${RATE}]))`, 'shed/s {{reason}}'),
        ],
      },
      {
        title: 'Stock remaining',
        unit: 'short',
        queries: [q('min by (product_id) (flash_sale_stock_remaining)', 'product {{product_id}}')],
      },
      {
        title: "Time since the sale's Redis slot answered",
        unit: 's',
        description:
          'Per sale, the worst instance: 0 while the slot answers. A failover shows as a spike of a few seconds; a line that keeps rising is an outage (alert FlashSaleSaleStoreUnreachable).',
        queries: [
          q('max by (product_id) (flash_sale_sale_store_unreachable_seconds)', 'product {{product_id}}'),
        ],
      },
      {
        title: 'Replica confirmations of reservations',
        unit: 'reqps',
        description:
          'acked: answered 200. timeout, no_replica, error: answered 202 pending (no replica could confirm: after a failover until a replica is back).',
        queries: [q(`sum by (outcome) (rate(flash_sale_replica_acks_total[${RATE}]))`, '{{outcome}}')],
      },
    ],
  },
  {
    title: 'Waiting room',
    panels: [
      {
        title: 'In line and admitted',
        unit: 'short',
        description:
          "The room's state in Redis as the last join or poll saw it (the same on every instance: max, not sum). Admitted = holding a live admission, not yet bought.",
        queries: [
          q('max by (product_id) (flash_sale_waiting_room_waiting)', 'waiting {{product_id}}'),
          q('max by (product_id) (flash_sale_waiting_room_admitted)', 'admitted {{product_id}}'),
        ],
      },
      {
        title: 'Admitted per second',
        unit: 'ops',
        description:
          "Admissions the rooms made, summed over instances, and the rate the room measured over its last 10 s (what the ETAs use). The setting (admit_per_second) is not exported: compare with the sale's PUT. A flat 0 while people wait is a stall (alert FlashSaleWaitingRoomStalled).",
        queries: [
          q(
            `sum by (product_id) (rate(flash_sale_waiting_room_admitted_total[${RATE}]))`,
            'admitted/s {{product_id}}',
          ),
          q('max by (product_id) (flash_sale_waiting_room_admit_rate)', 'measured {{product_id}}'),
        ],
      },
      {
        title: 'Wait from join to admission',
        unit: 's',
        description: 'From the join (or the opening, for those who joined before it) to the admission.',
        queries: [
          q(
            `histogram_quantile(0.5, sum by (le, product_id) (rate(flash_sale_waiting_room_wait_seconds_bucket[${RATE}])))`,
            'p50 {{product_id}}',
          ),
          q(
            `histogram_quantile(0.99, sum by (le, product_id) (rate(flash_sale_waiting_room_wait_seconds_bucket[${RATE}])))`,
            'p99 {{product_id}}',
          ),
        ],
      },
      {
        title: 'Places dropped',
        unit: 'ops',
        description:
          'idle: a waiting page stopped polling for drop_after_seconds. admission_expired: admitted, did not buy in admission_seconds.',
        queries: [
          q(
            `sum by (product_id, reason) (rate(flash_sale_waiting_room_dropped_total[${RATE}]))`,
            '{{reason}} {{product_id}}',
          ),
        ],
      },
      {
        title: 'Checkouts refused by the room',
        unit: 'reqps',
        description:
          'NOT_ADMITTED: a ticket whose turn has not come (a client not waiting for its page). INVALID_TICKET by reason: forged, of another user or sale, stale after a reset, expired. WAITING_ROOM: no ticket at all.',
        queries: [
          q(
            `sum by (code) (rate(flash_sale_waiting_room_refusals_total{code=~"NOT_ADMITTED|WAITING_ROOM"}[${RATE}]))`,
            '{{code}}',
          ),
          q(
            `sum by (reason) (rate(flash_sale_waiting_room_refusals_total{code="INVALID_TICKET"}[${RATE}]))`,
            'INVALID_TICKET {{reason}}',
          ),
        ],
      },
      {
        title: 'Joins and polls',
        unit: 'reqps',
        description:
          'By answer. unreplicated: answers sent before a replica confirmed them, the ones a failover may take back.',
        queries: [
          q(
            `sum by (op, outcome) (rate(flash_sale_waiting_room_requests_total[${RATE}]))`,
            '{{op}} {{outcome}}',
          ),
          q(
            `sum by (what) (rate(flash_sale_waiting_room_unreplicated_total[${RATE}]))`,
            'unreplicated {{what}}',
          ),
        ],
      },
    ],
  },
  {
    title: 'Locks (kunci)',
    panels: [
      {
        title: 'Lock acquire latency',
        unit: 's',
        queries: [
          q(
            `histogram_quantile(0.99, sum by (le) (rate(kunci_lock_acquire_duration_seconds_bucket[${RATE}])))`,
            'p99',
          ),
          q(
            `histogram_quantile(0.5, sum by (le) (rate(kunci_lock_acquire_duration_seconds_bucket[${RATE}])))`,
            'p50',
          ),
        ],
      },
      {
        title: 'Quorum success ratio',
        unit: 'percentunit',
        description: 'Acquires that reached a quorum, over all acquires that ended (acquired or failed).',
        queries: [
          q(
            `sum(rate(kunci_lock_acquired_total[${RATE}])) / (sum(rate(kunci_lock_acquired_total[${RATE}])) + sum(rate(kunci_lock_failed_total[${RATE}])))`,
            'success',
          ),
          q(`sum by (code) (rate(kunci_lock_failed_total[${RATE}]))`, 'failed/s {{code}}'),
        ],
      },
      {
        title: 'Votes lost per lock node',
        unit: 'short',
        description:
          'Per-node errors, timeouts, stale and quarantined votes seen by the service, and each node up.',
        queries: [
          q(
            `sum by (node, status) (rate(kunci_lock_node_errors_total[${RATE}]))`,
            'node {{node}} {{status}}/s',
          ),
          q('redis_up{job="redis-redlock"}', 'up {{instance}}'),
        ],
      },
      {
        title: 'Contention, lost locks, quarantined nodes',
        unit: 'short',
        queries: [
          q(`sum(rate(kunci_lock_contention_total[${RATE}]))`, 'contention/s'),
          q(`sum(increase(kunci_lock_lost_total[${RATE}]))`, 'lost'),
          q('max(kunci_lock_nodes_quarantined)', 'quarantined nodes'),
        ],
      },
    ],
  },
  {
    title: 'Cache (kunci)',
    panels: [
      {
        title: 'Cache hit ratio',
        unit: 'percentunit',
        queries: [
          q(
            `sum by (cache) (rate(kunci_cache_hits_total[${RATE}])) / (sum by (cache) (rate(kunci_cache_hits_total[${RATE}])) + sum by (cache) (rate(kunci_cache_misses_total[${RATE}])))`,
            '{{cache}}',
          ),
        ],
      },
      {
        title: 'Coalesced reads and loads',
        unit: 'ops',
        queries: [
          q(
            `sum by (cache, scope) (rate(kunci_cache_coalesced_total[${RATE}]))`,
            'coalesced {{cache}} {{scope}}',
          ),
          q(
            `sum by (cache, outcome) (rate(kunci_cache_loads_total[${RATE}]))`,
            'loads {{cache}} {{outcome}}',
          ),
        ],
      },
      {
        title: 'Loader latency p99',
        unit: 's',
        queries: [
          q(
            `histogram_quantile(0.99, sum by (le, cache) (rate(kunci_cache_load_duration_seconds_bucket[${RATE}])))`,
            '{{cache}}',
          ),
        ],
      },
      {
        title: 'Stale serves, errors, bus drops',
        unit: 'ops',
        queries: [
          q(`sum by (cache, reason) (rate(kunci_cache_stale_total[${RATE}]))`, 'stale {{cache}} {{reason}}'),
          q(
            `sum by (cache, operation) (rate(kunci_cache_errors_total[${RATE}]))`,
            'error {{cache}} {{operation}}',
          ),
          q(`sum by (cache) (increase(kunci_cache_bus_drops_total[${RATE}]))`, 'bus drops {{cache}}'),
        ],
      },
    ],
  },
  {
    title: 'Sold out at line rate',
    panels: [
      {
        title: 'Answered from memory, by code',
        unit: 'reqps',
        description:
          "A sold-out sale's refusals given without a reservation call (docs/flash-sale.md, Sold out at line rate). Against the checkout rate: the share of the flood that costs Redis nothing; the refusal lane's share of them skipped the HTTP framework too.",
        queries: [
          q(`sum by (code) (rate(flash_sale_local_answers_total[${RATE}]))`, '{{code}}'),
          q(
            `sum(rate(flash_sale_refusal_lane_answers_total[${RATE}]))`,
            'of them before fastify (refusal lane)',
          ),
          q(`sum(rate(flash_sale_checkout_requests_total[${RATE}]))`, 'all checkouts'),
        ],
      },
      {
        title: 'Checkouts per Redis script call',
        unit: 'short',
        description:
          'Mean batch size: reserve.lua per sale per event-loop turn, refuse.lua for keyed sold-out answers; the worker per SQL transaction.',
        queries: [
          q(
            `sum by (kind) (rate(flash_sale_reserve_batch_size_sum[${RATE}])) / sum by (kind) (rate(flash_sale_reserve_batch_size_count[${RATE}]))`,
            '{{kind}}',
          ),
          q(
            `sum(rate(flash_sale_sql_batch_size_sum[${RATE}])) / sum(rate(flash_sale_sql_batch_size_count[${RATE}]))`,
            'SQL (worker)',
          ),
        ],
      },
      {
        title: 'Sale epochs, notifications and resyncs',
        unit: 'short',
        description:
          'The epoch grows with every reset, restock or returned unit. A resync is an epoch change an instance found by its per-second check, not by a notification: a lost one (alert FlashSaleSaleNotificationsLost).',
        queries: [
          q('max by (product_id) (flash_sale_sale_epoch)', 'epoch {{product_id}}'),
          q(`sum by (kind) (rate(flash_sale_sale_notifications_total[${RATE}]))`, 'notified {{kind}}/s'),
          q(`sum by (product_id) (rate(flash_sale_sale_resyncs_total[${RATE}]))`, 'resync {{product_id}}/s'),
        ],
      },
    ],
  },
  {
    title: 'Orders',
    panels: [
      {
        title: 'Stream lag and pending',
        unit: 'short',
        queries: [
          q('max by (product_id) (flash_sale_stream_lag)', 'lag {{product_id}}'),
          q('max by (product_id) (flash_sale_stream_pending)', 'pending {{product_id}}'),
        ],
      },
      {
        title: 'Orders persisted, failed, dead-lettered',
        unit: 'ops',
        queries: [
          q(`sum(rate(flash_sale_orders_persisted_total[${RATE}]))`, 'persisted'),
          q(`sum by (reason) (rate(flash_sale_orders_failed_total[${RATE}]))`, 'failed {{reason}}'),
          q(`sum(rate(flash_sale_dead_letters_total[${RATE}]))`, 'dead letters'),
          q(`sum(rate(flash_sale_wallet_charges_total[${RATE}]))`, 'wallet charges'),
        ],
      },
      {
        title: "Where the worker's batches spend their time",
        unit: 's',
        description:
          "Seconds per second the worker spends in each phase of its batches: read (XREADGROUP), confirm (the replica round that shows a batch durable), sql (the batch's transaction), returns (units given back), settle (XACK and statuses). A busy worker's phases add up to about 1; a confirm share that grows is a replica falling behind, an sql share that grows is the database.",
        queries: [
          q(
            `sum by (phase) (rate(flash_sale_worker_batch_seconds_sum{phase!="sink"}[${RATE}]))`,
            '{{phase}}',
          ),
        ],
      },
      {
        title: 'Redis vs SQL drift',
        unit: 'short',
        queries: [q('max by (product_id) (flash_sale_reconcile_drift)', 'product {{product_id}}')],
      },
    ],
  },
  {
    title: 'Redis',
    panels: [
      {
        title: 'Cluster state',
        unit: 'short',
        kind: 'stat',
        description: '1 = ok on every node; 0 = some node reports cluster_state:fail.',
        queries: [q('min(redis_cluster_state{job="redis-cluster"})', 'cluster_state')],
      },
      {
        title: 'Cluster slots',
        unit: 'short',
        queries: [
          q('min(redis_cluster_slots_ok{job="redis-cluster"})', 'ok (min over nodes)'),
          q('max(redis_cluster_slots_fail{job="redis-cluster"})', 'fail'),
          q('max(redis_cluster_slots_pfail{job="redis-cluster"})', 'pfail'),
        ],
      },
      {
        title: 'Memory used / maxmemory',
        unit: 'percentunit',
        queries: [q('redis_memory_used_bytes / (redis_memory_max_bytes > 0)', '{{job}} {{instance}}')],
      },
      {
        title: 'Evicted keys',
        unit: 'ops',
        queries: [
          q(`sum by (job, instance) (rate(redis_evicted_keys_total[${RATE}]))`, '{{job}} {{instance}}'),
        ],
      },
      {
        title: 'Commands and clients',
        unit: 'short',
        queries: [
          q(`sum by (job) (rate(redis_commands_processed_total[${RATE}]))`, 'commands/s {{job}}'),
          q('sum by (job) (redis_connected_clients)', 'clients {{job}}'),
        ],
      },
      {
        title: 'Nodes up',
        unit: 'short',
        queries: [q('sum by (job) (redis_up)', '{{job}}')],
      },
    ],
  },
  {
    title: 'Processes',
    panels: [
      {
        title: 'Event loop lag p99',
        unit: 's',
        queries: [q('max by (job, instance) (nodejs_eventloop_lag_p99_seconds)', '{{job}} {{instance}}')],
      },
      {
        title: 'Resident memory',
        unit: 'bytes',
        queries: [q('sum by (job, instance) (process_resident_memory_bytes)', '{{job}} {{instance}}')],
      },
    ],
  },
])

export const DASHBOARD_UID = 'kunci-flash-sale'

export function buildDashboard(): Dashboard {
  const dashboard = new DashboardBuilder('kunci · flash sale')
    .uid(DASHBOARD_UID)
    .tags(['kunci', 'flash-sale', 'redis'])
    .refresh('30s')
    .time({ from: 'now-1h', to: 'now' })
    .timezone('browser')
    .withVariable(new DatasourceVariableBuilder('datasource').label('Data source').type('prometheus'))
  for (const row of DASHBOARD_ROWS) {
    dashboard.withRow(new RowBuilder(row.title))
    for (const p of row.panels) dashboard.withPanel(panel(p))
  }
  return dashboard.build()
}

function panel(p: PanelSpec): cog.Builder<Panel> {
  const builder =
    p.kind === 'stat'
      ? new StatBuilder()
      : new TimeseriesBuilder().legend(
          new VizLegendOptionsBuilder()
            .showLegend(true)
            .displayMode(LegendDisplayMode.Table)
            .placement(LegendPlacement.Bottom)
            .calcs(['lastNotNull', 'max']),
        )
  builder
    .title(p.title)
    .unit(p.unit)
    .datasource(DS)
    .height(8)
    .span(p.kind === 'stat' ? 6 : 12)
  if (p.description) builder.description(p.description)
  p.queries.forEach((query, i) => {
    builder.withTarget(
      new DataqueryBuilder()
        .expr(query.expr)
        .legendFormat(query.legend)
        .refId(String.fromCharCode(65 + i))
        .datasource(DS),
    )
  })
  return builder
}

export function dashboardExpressions(): string[] {
  return DASHBOARD_ROWS.flatMap((r) => r.panels.flatMap((p) => p.queries.map((x) => x.expr)))
}

/** JSON as Biome formats it (short arrays of scalars on one line), so `biome ci` accepts the file. */
export function renderDashboard(): string {
  const scalar = String.raw`(?:"[^"\n]*"|-?\d[\d.eE+-]*|true|false|null)`
  const array = new RegExp(String.raw`\[\n\s+(${scalar}(?:,\n\s+${scalar})*)\n\s*\]`, 'g')
  const text = JSON.stringify(buildDashboard(), null, 2).replace(
    array,
    (_, items: string) => `[${items.split(/,\n\s+/).join(', ')}]`,
  )
  return `${text}\n`
}
