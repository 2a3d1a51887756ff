import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { Readable } from 'node:stream'
import { Ajv } from 'ajv'
import type { FastifyServerOptions, preParsingHookHandler } from 'fastify'
import type { ServiceMetrics } from '../metrics/service-metrics.js'
import type { CheckoutStrategy } from '../strategies/strategy.js'
import { HTTP_STATUS, refusalBody } from './api-error.js'
import { CHECKOUT } from './schemas.js'

/** The body the lane read and could not answer, for fastify's parser (RefusalLane.replay). */
const READ_BODY = Symbol('kunci.refusalLane.body')
type LaneRequest = IncomingMessage & { [READ_BODY]?: Buffer }

const CHECKOUT_URL = '/v1/checkout'
const JSON_TYPE = 'application/json; charset=utf-8'

export interface RefusalLaneOptions {
  strategy: CheckoutStrategy
  metrics: Pick<ServiceMetrics, 'checkouts' | 'checkoutDuration' | 'refusalLane'>
  /** The checkout route's body limit: a longer body is the route's to refuse (413). */
  bodyLimit: number
}

/** The body as a stream that gives it in one chunk, then ends (cheaper than Readable.from). */
function replayed(body: Buffer): Readable {
  return new Readable({
    read() {
      this.push(body)
      this.push(null)
    },
  })
}

/**
 * The sold-out flood's answers, given before fastify's routing (issue 24). A sold-out sale's
 * refusal from memory is the same few bytes for every caller, yet through the fastify route it
 * cost ~82 µs of CPU per request against ~48 µs for a bare fastify endpoint answering a constant:
 * routing, schema validation, the reply's hooks and serialization, and the route's async path,
 * spread too thin for any one of them to be the gap. The lane is the node:http request handler
 * fastify is given (its `serverFactory`); for each request it decides:
 *
 * - Not POST /v1/checkout, or nothing answerable from memory for its key (or without one) right
 *   now (the strategy's `answering(key)`): fastify's handler, untouched; the body is not read.
 * - A checkout whose headers the route would accept as they are (Content-Type application/json,
 *   a Content-Length within the body limit, a valid Idempotency-Key or none), without a key or
 *   with one whose refusal this instance saw recorded: the lane reads the body, and answers only
 *   if the body is one the route's own schema (CHECKOUT, compiled here with fastify's Ajv
 *   settings) accepts and the strategy knows the refusal without any I/O
 *   (`answerFromMemory`: a sold-out sale's keyless checkout, or a repeat of a key whose refusal
 *   this instance saw recorded). The answer is the route's, byte for byte: status, headers, body.
 * - Anything else (a key not seen yet, a selling sale, a body the route would refuse): the body
 *   the lane read is handed to fastify's parser whole (`replay`, the route's preParsing hook),
 *   and the route answers as if the lane were not there.
 *
 * Counted as the route counts (flash_sale_checkout_requests_total, the duration histogram, the
 * local answers), and in flash_sale_refusal_lane_answers_total. Not shed by the route's load
 * shedding (event-loop delay, in-flight limit): a refusal from memory costs no more than the 503
 * that would replace it, and holds nothing.
 */
export class RefusalLane {
  readonly #strategy: CheckoutStrategy
  readonly #metrics: RefusalLaneOptions['metrics']
  readonly #bodyLimit: number
  readonly #validBody: (body: unknown) => boolean
  readonly #validKey: (key: string) => boolean

  constructor(options: RefusalLaneOptions) {
    if (options.strategy.answerFromMemory === undefined)
      throw new TypeError(
        `the ${options.strategy.name} strategy gives no answers from memory: no refusal lane`,
      )
    this.#strategy = options.strategy
    this.#metrics = options.metrics
    this.#bodyLimit = options.bodyLimit
    // fastify's defaults (@fastify/ajv-compiler) with the app's customOptions (app.ts: no coercion).
    const ajv = new Ajv({
      coerceTypes: false,
      useDefaults: true,
      removeAdditional: true,
      allErrors: false,
      // The ids are `integer | string` (schemas.ts), as fastify's compiler accepts them.
      allowUnionTypes: true,
    })
    this.#validBody = ajv.compile(CHECKOUT.schema.body)
    this.#validKey = ajv.compile(CHECKOUT.schema.headers.properties['idempotency-key'])
  }

  /**
   * fastify's `serverFactory`: node:http's server with fastify's own settings (as fastify sets
   * them on the server it creates), the lane in front of fastify's handler.
   */
  readonly serverFactory = (
    handler: (req: IncomingMessage, res: ServerResponse) => void,
    opts: FastifyServerOptions,
  ): Server => {
    const server = createServer((req, res) => {
      if (!this.#take(req, res, handler)) handler(req, res)
    })
    if (opts.keepAliveTimeout !== undefined) server.keepAliveTimeout = opts.keepAliveTimeout
    if (opts.requestTimeout !== undefined) server.requestTimeout = opts.requestTimeout
    server.setTimeout(opts.connectionTimeout ?? 0)
    if (opts.maxRequestsPerSocket) server.maxRequestsPerSocket = opts.maxRequestsPerSocket
    return server
  }

  /** The checkout route's preParsing hook: a body the lane read goes to fastify's parser as sent. */
  static readonly replay: preParsingHookHandler = (request, _reply, payload, done) => {
    const read = (request.raw as LaneRequest)[READ_BODY]
    done(null, read === undefined ? payload : replayed(read))
  }

  /** True if the lane took the request (it answers, or hands it over once its body is read). */
  #take(req: LaneRequest, res: ServerResponse, handler: (req: IncomingMessage, res: ServerResponse) => void) {
    if (req.url !== CHECKOUT_URL || req.method !== 'POST') return false
    const h = req.headers
    const key = h['idempotency-key']
    // (node:http joins a repeated custom header into one string: an array is not expected.)
    if (typeof key === 'object') return false
    // A key this instance has not seen recorded (a first click) goes to the route unread: it must
    // be recorded before it is answered.
    if (this.#strategy.answering?.(key) !== true) return false
    const type = h['content-type']
    if (type !== 'application/json' && type?.toLowerCase() !== JSON_TYPE) return false
    const length = Number(h['content-length'])
    if (!(length > 0 && length <= this.#bodyLimit) || h['transfer-encoding'] !== undefined) return false
    if (key !== undefined && !this.#validKey(key)) return false

    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    // An aborted request: its socket is gone, there is no one to answer.
    req.on('error', () => {})
    req.on('end', () => {
      const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
      // (node:http ends a body at its Content-Length: no length check is left to do.)
      if (!this.#answer(res, body, key)) {
        req[READ_BODY] = body
        handler(req, res)
      }
    })
    return true
  }

  #answer(res: ServerResponse, body: Buffer, key: string | undefined): boolean {
    const started = performance.now()
    const text = body.toString('utf8')
    // fastify's parser refuses prototype keys (secure-json-parse): the route answers those.
    if (text.includes('__proto__') || text.includes('constructor')) return false
    let parsed: { product_id: number | string; user_id: number | string }
    try {
      parsed = JSON.parse(text)
    } catch {
      return false
    }
    if (!this.#validBody(parsed)) return false
    const productId = String(parsed.product_id)
    const refusal = this.#strategy.answerFromMemory!({
      productId,
      userId: String(parsed.user_id),
      idempotencyKey: key,
    })
    if (refusal === undefined) return false
    const status = HTTP_STATUS[refusal.code]
    const payload = JSON.stringify(refusalBody(refusal))
    const seconds = (performance.now() - started) / 1_000
    const headers: Record<string, string | number> = {}
    if (refusal.retryAfterS !== undefined) headers['retry-after'] = String(refusal.retryAfterS)
    headers['server-timing'] = `app;dur=${(seconds * 1_000).toFixed(1)}`
    headers['content-type'] = JSON_TYPE
    headers['content-length'] = Buffer.byteLength(payload)
    res.writeHead(status, headers)
    res.end(payload)
    const strategy = this.#strategy.name
    this.#metrics.checkouts.inc({ strategy, outcome: refusal.code.toLowerCase(), status: String(status) })
    this.#metrics.checkoutDuration.observe({ strategy }, seconds)
    this.#metrics.refusalLane.inc()
    return true
  }
}
