import { LabError } from '../errors.js'

/** Every failure of the demo's options or run carries a stable `code`. */
export type DemoErrorCode = 'E_DEMO_INVALID_OPTION' | 'E_DEMO_SQL_UNAVAILABLE'

export abstract class DemoError extends LabError<DemoErrorCode> {}

/** A demo option is missing, malformed or out of range; `option` names it as the CLI spells it. */
export class DemoOptionError extends DemoError {
  readonly code = 'E_DEMO_INVALID_OPTION'
  constructor(
    readonly option: string,
    message: string,
  ) {
    super(`${option}: ${message}`)
  }
}

/** `--sql postgres` was asked for but the local PostgreSQL does not answer. */
export class DemoSqlUnavailableError extends DemoError {
  readonly code = 'E_DEMO_SQL_UNAVAILABLE'
  constructor(
    readonly url: string,
    options?: ErrorOptions,
  ) {
    super(
      `PostgreSQL at ${url} does not answer; start it, pass --database-url, or use --sql embedded`,
      options,
    )
  }
}
