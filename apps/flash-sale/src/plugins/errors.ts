import type { FastifyError, FastifyInstance, FastifyRequest } from 'fastify'
import { isSqlOutage } from '../db/database.js'
import { DomainRefusalError } from '../domain/refusals.js'
import { isRedisOutage } from '../redis/redis-errors.js'
import {
  ApiError,
  type ApiErrorCode,
  fromRefusal,
  HTTP_STATUS,
  sendError,
  unavailableError,
} from '../routes/api-error.js'
import { HEADER_FIELDS, type SchemaRules } from '../routes/schemas.js'
import { SaleNotDurableError } from '../sale/sale-stock.js'

/** Fastify's own errors for what a client sent → our codes; anything else is ours (500). */
function fromFastify(err: FastifyError, request: FastifyRequest): ApiError | undefined {
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError('PAYLOAD_TOO_LARGE', 'the body is too large (checkout bodies are a few bytes)')
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError('UNSUPPORTED_MEDIA_TYPE', 'send the body as Content-Type: application/json')
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ApiError('INVALID_REQUEST', 'body: expected a JSON object, got an empty body', {
        field: 'body',
      })
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new ApiError('INVALID_REQUEST', 'Content-Length does not match the body', {
        field: 'Content-Length',
      })
  }
  if (err.validation) {
    // The route's schema said no: name the field as the client wrote it, with the route's rule.
    const v = err.validation[0]
    const path = v?.instancePath ? v.instancePath.slice(1).replaceAll('/', '.') : undefined
    const missing = (v?.params as { missingProperty?: string } | undefined)?.missingProperty
    const raw = path ?? missing ?? (err.validationContext === 'headers' ? 'headers' : 'body')
    const field = err.validationContext === 'headers' ? (HEADER_FIELDS[raw] ?? raw) : raw
    const rules = (request.routeOptions.config as Partial<SchemaRules>).rules ?? {}
    const rule = rules[field] ?? v?.message ?? 'invalid'
    return new ApiError('INVALID_REQUEST', `${field}: ${missing ? `required: ${rule}` : rule}`, {
      field,
      rule,
    })
  }
  if (err instanceof SyntaxError || (err.statusCode === 400 && /JSON/i.test(err.message))) {
    return new ApiError('INVALID_REQUEST', 'body: not valid JSON', { field: 'body', rule: 'valid JSON' })
  }
  if (isRedisOutage(err)) return unavailableError('Redis is unreachable or failing over', 1, err)
  if (err instanceof SaleNotDurableError) return unavailableError(err.message, 1, err)
  if (isSqlOutage(err)) return unavailableError('the database is unreachable', 2, err)
  if (err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) {
    const code = (Object.keys(HTTP_STATUS) as ApiErrorCode[]).find((c) => HTTP_STATUS[c] === err.statusCode)
    return new ApiError(code ?? 'INVALID_REQUEST', err.message)
  }
  return undefined
}

/** One place maps errors to statuses and bodies: `{ error: { code, message, …details } }`. */
export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, request, reply) => {
    // The waiting room says no in the domain's terms (DomainRefusalError); here it becomes HTTP.
    const api =
      err instanceof ApiError
        ? err
        : err instanceof DomainRefusalError
          ? fromRefusal(err.refusal)
          : fromFastify(err, request)
    if (api && api.status < 500) return sendError(reply, api)
    if (api && api.code !== 'INTERNAL') {
      request.log.warn({ err: api.cause ?? api }, api.message)
      return sendError(reply, api)
    }
    request.log.error({ err }, 'unhandled error')
    return sendError(reply, new ApiError('INTERNAL', 'internal error; it has been logged'))
  })
  app.setNotFoundHandler((request, reply) =>
    sendError(reply, new ApiError('NOT_FOUND', `no route ${request.method} ${request.url.split('?')[0]}`)),
  )
}
