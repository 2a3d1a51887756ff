import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { Readable } from 'node:stream'
import { Ajv } from 'ajv'
import type { FastifyServerOptions, preParsingHookHandler } from 'fastify'
import type { Refusal } from '../domain/refusals.js'
import type { ServiceMetrics } from '../metrics/service-metrics.js'
import type { CheckoutRequest, CheckoutStrategy } from '../strategies/strategy.js'
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
  /**
   * Keyed refusals being recorded by the lane at once (MAX_INFLIGHT): beyond, a first use of a
   * key goes to the route, whose load shedding applies. @defaultValue 1024
   */
  maxRecording?: number
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
 * - A checkout with a key this instance has not seen, while a sale is sold out in memory: the lane
 *   reads and checks the body the same way and has the strategy record the refusal under the key
 *   before answering it (`recordRefusal`: refuse.lua, batched per sale like the route's), then
 *   answers it, byte for byte the route's, including the 503 the route gives when Redis does not
 *   answer in time. What is not such a refusal (a key whose earlier answer was a reservation, a
 *   stale snapshot) goes to the route, whose own call replays what was recorded. At most
 *   `maxRecording` at once: beyond, the route and its load shedding take them.
 * - Anything else (a selling sale, a body the route would refuse): the body the lane read is
 *   handed to fastify's parser whole (`replay`, the route's preParsing hook), and the route
 *   answers as if the lane were not there.
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
  readonly #maxRecording: number
  #recording = 0

  constructor(options: RefusalLaneOptions) {
    if (options.strategy.answerFromMemory === undefined)
      throw new TypeError(
        `the ${options.strategy.name} strategy gives no answers from memory: no refusal lane`,
      )
    this.#strategy = options.strategy
    this.#metrics = options.metrics
    this.#bodyLimit = options.bodyLimit
    this.#maxRecording = options.maxRecording ?? 1_024
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
    // A key this instance has not seen recorded (a first click) is recorded before it is answered,
    // while some sale is sold out in memory; otherwise the checkout goes to the route unread.
    // (answering(undefined): a keyless checkout could be answered, i.e. some sale is sold out.)
    const fromMemory = this.#strategy.answering?.(key) === true
    const record =
      !fromMemory &&
      key !== undefined &&
      this.#recording < this.#maxRecording &&
      this.#strategy.recordRefusal !== undefined &&
      this.#strategy.answering?.(undefined) === true
    if (!fromMemory && !record) return false
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
      const toRoute = () => {
        req[READ_BODY] = body
        handler(req, res)
      }
      // (node:http ends a body at its Content-Length: no length check is left to do.)
      const started = performance.now()
      const request = this.#parse(body, key)
      if (request === undefined) return toRoute()
      // From memory if it can be (a key answered meanwhile by another request with it, too).
      const known = this.#strategy.answerFromMemory!(request)
      if (known !== undefined) return this.#send(res, known, started)
      if (!record) return toRoute()
      this.#recording++
      this.#strategy.recordRefusal!(request)
        .then(
          (refusal) => (refusal === undefined ? toRoute() : this.#send(res, refusal, started)),
          // A bug's error: the route answers, and its error handler logs it.
          () => toRoute(),
        )
        .finally(() => {
          this.#recording--
        })
    })
    return true
  }

  /** The checkout the body asks for, if the route's parser and schema would accept it as sent. */
  #parse(body: Buffer, key: string | undefined): CheckoutRequest | undefined {
    const text = body.toString('utf8')
    // fastify's parser refuses prototype keys (secure-json-parse): the route answers those.
    if (text.includes('__proto__') || text.includes('constructor')) return undefined
    let parsed: { product_id: number | string; user_id: number | string }
    try {
      parsed = JSON.parse(text)
    } catch {
      return undefined
    }
    if (!this.#validBody(parsed)) return undefined
    return { productId: String(parsed.product_id), userId: String(parsed.user_id), idempotencyKey: key }
  }

  /** The route's answer to a refusal, byte for byte: status, headers, body; counted as it counts. */
  #send(res: ServerResponse, refusal: Refusal, started: number): void {
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
  }
}
