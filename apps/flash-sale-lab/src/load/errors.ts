import { LabError } from '../errors.js'

/** Every failure of the load generator's options or run carries a stable `code`. */
export type LoadErrorCode = 'E_LOAD_INVALID_OPTION' | 'E_LOAD_TARGET_UNREACHABLE'

export abstract class LoadError extends LabError<LoadErrorCode> {}

/** A load option is missing, malformed or out of range; `option` names it as the CLI spells it. */
export class LoadOptionError extends LoadError {
  readonly code = 'E_LOAD_INVALID_OPTION'
  constructor(
    readonly option: string,
    message: string,
  ) {
    super(`${option}: ${message}`)
  }
}

/** Every request of the run failed below HTTP (refused, reset, timed out): nothing was measured. */
export class TargetUnreachableError extends LoadError {
  readonly code = 'E_LOAD_TARGET_UNREACHABLE'
  constructor(
    readonly url: string,
    readonly errors: Readonly<Record<string, number>>,
  ) {
    super(`no request to ${url} got an HTTP answer (${JSON.stringify(errors)}); is the service up?`)
  }
}
