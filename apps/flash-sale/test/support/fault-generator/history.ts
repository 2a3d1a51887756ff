import { setTimeout as sleep } from 'node:timers/promises'
import type { Pool } from 'undici'
import type { FaultKind } from './generator.js'

// What the generator's clients did and were told, as the checker reads it: every HTTP attempt with
// its answer, grouped in "calls" (one click of a buyer, retried with the same key as a client
// does), the sales it opened and the faults it ran, with their times (Date.now()).

/** One HTTP attempt. status 0: no answer (a timeout, a reset by an instance that died). */
export interface Attempt {
  sentAt: number
  ms: number
  status: number
  code: string | undefined
  /** order_id of a 200/202, of an ALREADY_PURCHASED, or of the body of an order action. */
  orderId: string | undefined
  /** The body's status (order actions: paid, cancelled, refunded; restocks: applied, pending). */
  bodyStatus: string | undefined
  /** Without an answer: why. */
  message?: string
}

export interface CheckoutCall {
  kind: 'checkout'
  productId: string
  userId: number
  /** Idempotency-Key; undefined for a keyless click. */
  key: string | undefined
  /** A repeat of an earlier click's key: a fast double click, or a reload seconds later. */
  repeat: boolean
  attempts: Attempt[]
}

export interface ActionCall {
  kind: 'pay' | 'cancel' | 'refund'
  productId: string
  orderId: string
  userId: number
  attempts: Attempt[]
}

export interface RestockCall {
  kind: 'restock'
  productId: string
  units: number
  attempts: Attempt[]
}

/** PUT /admin/sales/:id: a new sale or a reset (a new round of it). */
export interface PutSaleCall {
  kind: 'put-sale'
  productId: string
  attempts: Attempt[]
}

export type Call = CheckoutCall | ActionCall | RestockCall | PutSaleCall

/** A PUT /admin/sales/:id that answered 200: one round of a product. */
export interface SaleRound {
  productId: string
  round: number
  stock: number
  perUserLimit: number
  payment: 'instant' | 'hold'
  /** When the PUT was sent, and when it answered (a reset ends the rounds before it between the two). */
  startedAt: number
  endedAt: number
}

/** One fault as it ran. */
export interface FaultRecord {
  kind: FaultKind
  /** The sale whose master (or replica) it hit. */
  productId: string
  node: string | undefined
  startedAt: number
  /** Undone (the worker or instance back, the replica resumed, the old master rejoined). */
  endedAt: number
  /** A failover took place: acknowledged-but-unconfirmed writes (202s) may be gone. */
  failover: boolean
  detail: string
}

export interface History {
  seed: number
  calls: Call[]
  rounds: SaleRound[]
  faults: FaultRecord[]
}

/** The final attempt of a call: the last one, when it is an answer a client stops at. */
export function finalOf(call: Call): Attempt | undefined {
  const last = call.attempts.at(-1)
  return last && !retried(call.kind, last) ? last : undefined
}

/** Answers a client repeats (with the same key, for a checkout) after 100–300 ms. */
export function retried(kind: Call['kind'], a: Attempt): boolean {
  if (a.status === 0 || a.status === 429 || a.status === 503) return true
  // An order action before the worker recorded the order: "retry in a moment".
  return kind !== 'checkout' && a.status === 409 && a.code === 'ORDER_PENDING'
}

/** One request, its answer parsed; never throws. */
export async function send(
  pool: Pool,
  r: { method: 'GET' | 'POST' | 'PUT'; path: string; body?: unknown; headers?: Record<string, string> },
  timeoutMs = 10_000,
): Promise<Attempt & { json: Record<string, unknown> }> {
  const sentAt = Date.now()
  const started = performance.now()
  try {
    const res = await pool.request({
      method: r.method,
      path: r.path,
      headers: { ...(r.body !== undefined && { 'content-type': 'application/json' }), ...r.headers },
      ...(r.body !== undefined && { body: JSON.stringify(r.body) }),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    })
    const text = await res.body.text()
    let json: Record<string, unknown> = {}
    try {
      json = JSON.parse(text)
    } catch {}
    const error = json.error as { code?: string; order_id?: string; message?: string } | undefined
    return {
      sentAt,
      ms: performance.now() - started,
      status: res.statusCode,
      code: error?.code,
      orderId: (json.order_id as string | undefined) ?? error?.order_id,
      bodyStatus: typeof json.status === 'string' ? json.status : (json.restock as string | undefined),
      ...(error?.message && res.statusCode >= 500 ? { message: error.message } : {}),
      json,
    }
  } catch (err) {
    const e = err as Error & { code?: string }
    return {
      sentAt,
      ms: performance.now() - started,
      status: 0,
      code: undefined,
      orderId: undefined,
      bodyStatus: undefined,
      message: `${e.code ?? e.name}: ${e.message}`,
      json: {},
    }
  }
}

/**
 * Sends a call's request until an answer a client stops at, retrying after 100–300 ms (`delay`,
 * from the client's seeded stream) for at most `deadlineMs`: the crowd of STYLE.md §11.
 */
export async function untilAnswered(
  call: Call,
  once: () => Promise<Attempt>,
  delay: () => number,
  deadlineMs = 20_000,
): Promise<Attempt> {
  const deadline = Date.now() + deadlineMs
  for (;;) {
    const { json: _json, ...a } = (await once()) as Attempt & { json?: unknown }
    call.attempts.push(a)
    if (!retried(call.kind, a) || Date.now() > deadline) return a
    await sleep(delay())
  }
}
