import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify'
import { isSqlOutage } from '../db/database.js'
import { ApiError, type ApiErrorCode, HTTP_STATUS, unavailable } from '../domain/errors.js'
import { isRedisOutage } from '../redis/redis-errors.js'

export function sendError(reply: FastifyReply, err: ApiError): FastifyReply {
  if (err.retryAfterS !== undefined) reply.header('Retry-After', String(err.retryAfterS))
  return reply.code(err.status).send({ error: { code: err.code, message: err.message, ...err.details } })
}

/** Fastify's own errors for what a client sent → our codes; anything else is ours (500). */
function fromFastify(err: FastifyError): ApiError | undefined {
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
    const v = err.validation[0]
    const field = v?.instancePath
      ? v.instancePath.slice(1).replaceAll('/', '.')
      : ((v?.params as { missingProperty?: string })?.missingProperty ?? 'body')
    return new ApiError('INVALID_REQUEST', `${field}: ${v?.message ?? 'invalid'}`, {
      field,
      rule: v?.message,
    })
  }
  if (err instanceof SyntaxError || (err.statusCode === 400 && /JSON/i.test(err.message))) {
    return new ApiError('INVALID_REQUEST', 'body: not valid JSON', { field: 'body', rule: 'valid JSON' })
  }
  if (isRedisOutage(err)) return unavailable('Redis is unreachable or failing over', 1, err)
  if (isSqlOutage(err)) return unavailable('the database is unreachable', 2, err)
  if (err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) {
    const code = (Object.keys(HTTP_STATUS) as ApiErrorCode[]).find((c) => HTTP_STATUS[c] === err.statusCode)
    return new ApiError(code ?? 'INVALID_REQUEST', err.message)
  }
  return undefined
}

/** One place maps errors to statuses and bodies: `{ error: { code, message, …details } }`. */
export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, request, reply) => {
    const api = err instanceof ApiError ? err : fromFastify(err)
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
