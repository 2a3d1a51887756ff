/** A CLI command: `flash-sale-lab <name> [flags]`; run() resolves with the exit code. */
export interface Command {
  readonly name: string
  readonly summary: string
  run(argv: string[]): Promise<number>
}
