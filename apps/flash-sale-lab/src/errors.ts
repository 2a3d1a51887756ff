/**
 * The base of every error the lab throws on purpose (its options, the load generator, the demo,
 * the local observability): a stable `code`, the class's own name, the cause kept.
 */
export abstract class LabError<Code extends string = string> extends Error {
  abstract readonly code: Code
  constructor(message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = new.target.name
  }
}
