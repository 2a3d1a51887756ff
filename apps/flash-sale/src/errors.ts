/**
 * The one error base of the service: every error it raises itself has a stable `code` and its
 * class name as `name`, so logs and callers tell them apart without reading messages. The HTTP
 * answers (`ApiError`, routes/api-error.ts) are errors of this kind too; their code is the one the
 * JSON body carries.
 */
export abstract class ServiceError extends Error {
  abstract readonly code: string
  constructor(message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = new.target.name
  }
}
