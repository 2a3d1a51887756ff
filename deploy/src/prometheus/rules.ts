import { stringify } from 'yaml'

/**
 * Alert rules. Job names are those of the ServiceMonitors / scrape config: flash-sale,
 * flash-sale-worker, redis-redlock, redis-cluster. What each alert means and what to do is in
 * docs/operations.md#alerts (the runbook_url of each rule points there).
 */
export interface AlertRule {
  alert: string
  expr: string
  for?: string
  labels: { severity: 'critical' | 'warning' }
  annotations: { summary: string; description: string; runbook_url: string }
}

const runbook = (anchor: string) => `https://github.com/kunci/kunci/blob/main/docs/operations.md#${anchor}`

function rule(
  alert: string,
  expr: string,
  forDuration: string | undefined,
  severity: 'critical' | 'warning',
  summary: string,
  description: string,
): AlertRule {
  return {
    alert,
    expr,
    ...(forDuration ? { for: forDuration } : {}),
    labels: { severity },
    annotations: { summary, description, runbook_url: runbook(alert.toLowerCase()) },
  }
}

export const LOCK_RULES: readonly AlertRule[] = Object.freeze([
  rule(
    'KunciLockQuorumFailures',
    'sum by (job, lock) (rate(kunci_lock_failed_total{code="E_LOCK_UNAVAILABLE"}[5m])) > 0',
    '1m',
    'critical',
    'Lock acquisitions fail for lack of a quorum of lock nodes',
    '{{ $labels.job }} cannot reach a majority of the Redlock nodes: {{ $value | humanize }} failures/s.',
  ),
  rule(
    'KunciLockLost',
    'sum by (job, lock) (increase(kunci_lock_lost_total[5m])) > 0',
    undefined,
    'warning',
    'A lock expired or was taken over while held',
    '{{ $labels.job }} lost {{ $value | humanize }} lock(s) in 5 min: work ran longer than the TTL, or the holder stalled.',
  ),
  rule(
    'KunciLockNodeQuarantined',
    'max by (job, lock) (kunci_lock_nodes_quarantined) > 0',
    '5m',
    'warning',
    'A lock node stays in restart quarantine',
    '{{ $labels.job }} has kept {{ $value }} lock node(s) out of the quorum for 5 min: a node is restarting repeatedly.',
  ),
  rule(
    'KunciLockNodeErrors',
    'sum by (job, node) (rate(kunci_lock_node_errors_total[5m])) > 0.5',
    '5m',
    'warning',
    'One lock node keeps failing votes',
    'Lock node {{ $labels.node }} answers with errors or timeouts ({{ $value | humanize }}/s) as seen from {{ $labels.job }}.',
  ),
])

export const REDIS_RULES: readonly AlertRule[] = Object.freeze([
  rule(
    'RedisDown',
    'redis_up == 0',
    '1m',
    'critical',
    'A Redis node does not answer its exporter',
    '{{ $labels.job }} {{ $labels.instance }} is down.',
  ),
  rule(
    'RedlockTwoNodesDown',
    'count by (job) (redis_up{job="redis-redlock"} == 0) >= 2',
    '1m',
    'critical',
    'Two of the five lock nodes are down',
    'One more failure and no lock can be taken. {{ $value }} lock nodes are down.',
  ),
  rule(
    'RedisClusterStateNotOk',
    'redis_cluster_state{job="redis-cluster"} == 0',
    '1m',
    'critical',
    'Redis Cluster reports cluster_state:fail',
    '{{ $labels.instance }} sees the cluster as failed: some slots are not served.',
  ),
  rule(
    'RedisClusterSlotsFailing',
    '(redis_cluster_slots_fail{job="redis-cluster"} + redis_cluster_slots_pfail{job="redis-cluster"}) > 0 or redis_cluster_slots_assigned{job="redis-cluster"} < 16384',
    '2m',
    'critical',
    'Redis Cluster slots are failing or unassigned',
    '{{ $labels.instance }}: {{ $value }} slots failing, suspected failing, or fewer than 16384 assigned.',
  ),
  rule(
    'RedisMemoryNearMax',
    'redis_memory_used_bytes / (redis_memory_max_bytes > 0) > 0.9',
    '5m',
    'warning',
    'Redis memory above 90% of maxmemory',
    '{{ $labels.job }} {{ $labels.instance }} uses {{ $value | humanizePercentage }} of maxmemory.',
  ),
  rule(
    'RedlockNodeEvictions',
    'increase(redis_evicted_keys_total{job="redis-redlock"}[5m]) > 0',
    undefined,
    'critical',
    'A lock node evicted keys',
    '{{ $labels.instance }} evicted {{ $value }} keys: a held lock may be gone. Check maxmemory-policy (must be noeviction).',
  ),
  rule(
    'RedlockNodeEvictionPolicy',
    'redis_instance_info{job="redis-redlock", maxmemory_policy!="noeviction"}',
    '1m',
    'critical',
    'A lock node can evict lock keys',
    '{{ $labels.instance }} runs with maxmemory-policy {{ $labels.maxmemory_policy }}; lock nodes need noeviction.',
  ),
])

export const SERVICE_RULES: readonly AlertRule[] = Object.freeze([
  rule(
    'FlashSaleStreamPendingHigh',
    'max by (product_id) (flash_sale_stream_pending) > 1000',
    '5m',
    'warning',
    'Order events delivered but not acknowledged',
    '{{ $value }} order events of product {{ $labels.product_id }} are pending: workers are stuck or crashing.',
  ),
  rule(
    'FlashSaleStreamLagHigh',
    'max by (product_id) (flash_sale_stream_lag) > 5000',
    '10m',
    'warning',
    'Order events are waiting for a worker',
    '{{ $value }} order events of product {{ $labels.product_id }} are not yet delivered: the workers do not keep up.',
  ),
  rule(
    'FlashSaleDeadLetters',
    'sum by (product_id) (increase(flash_sale_dead_letters_total[10m])) > 0',
    undefined,
    'warning',
    'Order events were dead-lettered',
    '{{ $value }} order events of product {{ $labels.product_id }} failed repeatedly and moved to the dead-letter stream.',
  ),
  rule(
    'FlashSaleReconcileDrift',
    'max by (product_id) (abs(flash_sale_reconcile_drift)) > 0',
    '10m',
    'critical',
    'Redis reservations and SQL orders disagree',
    'Product {{ $labels.product_id }}: {{ $value }} units that neither SQL nor Redis accounts for (order events on their way counted).',
  ),
  rule(
    'FlashSaleOrdersNotKept',
    'max by (product_id) (flash_sale_orders_not_kept) > 0',
    undefined,
    'critical',
    'Reservations ended without a live order, not by the buyer',
    'Product {{ $labels.product_id }}: {{ $value }} orders answered 200/202 were dead-lettered or failed duplicate_unit / sold_out_in_sql. Run reconcile: it names them (docs/operations.md).',
  ),
  rule(
    'FlashSaleWorkerHeldBack',
    'sum by (product_id) (increase(flash_sale_worker_unconfirmed_reads_total[2m])) > 0',
    '2m',
    'warning',
    'Order events wait because their master cannot show they are safe',
    "Product {{ $labels.product_id }}: the worker keeps holding back order events: the sale's master gets no replica acknowledgement and the Cluster does not show it alone (a partition between master and replica?).",
  ),
  rule(
    'FlashSaleCheckout5xx',
    'sum by (strategy) (rate(flash_sale_checkout_requests_total{status=~"5.."}[5m])) / sum by (strategy) (rate(flash_sale_checkout_requests_total[5m])) > 0.01',
    '5m',
    'critical',
    'More than 1% of checkouts answer 5xx',
    '{{ $value | humanizePercentage }} of checkouts ({{ $labels.strategy }}) fail with a server error.',
  ),
  rule(
    'FlashSaleSaleStoreUnreachable',
    'max by (product_id) (flash_sale_sale_store_unreachable_seconds) > 10',
    '15s',
    'critical',
    "A sale's Redis slot does not answer the checkout",
    "Product {{ $labels.product_id }}: an instance has not reached the sale's Redis slot for {{ $value | humanizeDuration }}, so its checkouts answer 503. A Cluster failover takes about cluster-node-timeout + 1 s.",
  ),
  rule(
    'FlashSaleCheckoutUnavailable',
    'sum by (strategy) (rate(flash_sale_checkout_requests_total{status="503"}[1m])) / sum by (strategy) (rate(flash_sale_checkout_requests_total[1m])) > 0.5',
    '1m',
    'critical',
    'Most checkouts answer 503',
    '{{ $value | humanizePercentage }} of checkouts ({{ $labels.strategy }}) answered 503 for a minute: the service is not serving the sale.',
  ),
  rule(
    'FlashSaleSaleNotificationsLost',
    'sum by (product_id) (increase(flash_sale_sale_resyncs_total[10m])) > 2',
    undefined,
    'warning',
    "Instances miss their sale's notifications",
    "Product {{ $labels.product_id }}: {{ $value | humanize }} epoch changes in 10 min reached an instance only through its per-second check: after each restock or returned unit it keeps refusing for up to a second. The sale's sharded subscription is failing (SSUBSCRIBE refused by the ACL, or the subscriber cannot reach the slot's master).",
  ),
  rule(
    'FlashSaleCheckoutP99High',
    'histogram_quantile(0.99, sum by (le, strategy) (rate(flash_sale_checkout_duration_seconds_bucket[5m]))) > 0.25',
    '10m',
    'warning',
    'Checkout p99 above 250 ms',
    'p99 checkout latency ({{ $labels.strategy }}) is {{ $value | humanizeDuration }}.',
  ),
  rule(
    'FlashSaleTargetDown',
    'up{job=~"flash-sale|flash-sale-worker|redis-redlock|redis-cluster"} == 0',
    '2m',
    'warning',
    'Prometheus cannot scrape a target',
    '{{ $labels.job }} {{ $labels.instance }} is not scraped: its metrics and the alerts above are blind.',
  ),
])

/**
 * The waiting room (apps/flash-sale/src/waiting-room/). Its gauges are the room's state in Redis as
 * the last join or poll saw it, so they are only as fresh as the pages' polls: a line whose pages
 * all closed keeps its last `waiting`. Hence the stall needs polls still arriving (any room: the
 * requests counter has no product label), the worker's periodic stock (the service's own gauge is
 * the last reservation each instance made, stale once it stops selling), and an admission counter
 * that exists for the product (a room admits its first user within a second of its opening, so
 * before the opening there is no series and no alert, except for a product whose earlier room
 * this process already counted).
 */
export const WAITING_ROOM_RULES: readonly AlertRule[] = Object.freeze([
  rule(
    'FlashSaleWaitingRoomStalled',
    [
      '(max by (product_id) (flash_sale_waiting_room_waiting) > 0)',
      'and on (product_id) (sum by (product_id) (rate(flash_sale_waiting_room_admitted_total[2m])) == 0)',
      'and on (product_id) (max by (product_id) (flash_sale_stock_remaining{job="flash-sale-worker"}) > 0)',
      'and on () (sum(rate(flash_sale_waiting_room_requests_total{op="poll"}[2m])) > 0)',
    ].join(' '),
    '1m',
    'warning',
    'A waiting room lets nobody in while people wait and units remain',
    'Product {{ $labels.product_id }}: {{ $value }} users wait, their pages keep polling, units remain, and nobody has been admitted for 3 minutes: a bound (k × stock, max_admitted) is full of admitted users who do not buy, or the rate is wrong.',
  ),
])

export const RULE_GROUPS = Object.freeze([
  { name: 'kunci-locks', rules: LOCK_RULES },
  { name: 'redis', rules: REDIS_RULES },
  { name: 'flash-sale', rules: SERVICE_RULES },
  { name: 'flash-sale-waiting-room', rules: WAITING_ROOM_RULES },
])

export function allRules(): AlertRule[] {
  return RULE_GROUPS.flatMap((g) => [...g.rules])
}

export function renderRules(): string {
  return stringify({ groups: RULE_GROUPS.map((g) => ({ name: g.name, rules: g.rules })) }, { lineWidth: 0 })
}

/**
 * A plain Prometheus scrape config for clusters without prometheus-operator (Kubernetes service
 * discovery, the same job names as the ServiceMonitors), or for anything else by static targets.
 */
export function renderScrapeConfig(namespace: string): string {
  const job = (name: string, port: string) => ({
    job_name: name,
    kubernetes_sd_configs: [{ role: 'endpoints', namespaces: { names: [namespace] } }],
    relabel_configs: [
      { source_labels: ['__meta_kubernetes_service_name'], regex: name, action: 'keep' },
      { source_labels: ['__meta_kubernetes_endpoint_port_name'], regex: port, action: 'keep' },
      { source_labels: ['__meta_kubernetes_pod_name'], target_label: 'pod' },
      { source_labels: ['__meta_kubernetes_namespace'], target_label: 'namespace' },
    ],
  })
  return stringify(
    {
      global: { scrape_interval: '15s', evaluation_interval: '15s' },
      rule_files: ['alerts.yml'],
      scrape_configs: [
        job('flash-sale', 'http'),
        job('flash-sale-worker', 'metrics'),
        job('redis-redlock', 'metrics'),
        job('redis-cluster', 'metrics'),
      ],
    },
    { lineWidth: 0 },
  )
}
