/** A CLI command: `<program> <name> [flags]`; run() resolves with the exit code. */
export interface Command {
  readonly name: string
  readonly summary: string
  run(argv: string[]): Promise<number>
}

function usage(program: string, commands: readonly Command[]): string {
  const width = Math.max(...commands.map((c) => c.name.length))
  return [
    `usage: ${program} <command> [flags]   (${program} <command> --help for its flags)`,
    '',
    ...commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
  ].join('\n')
}

/**
 * Runs the command `argv[0]` names with the rest of `argv`, and resolves with the exit code: 0 for
 * help, 2 for an unknown command (with the usage), 1 for a command that threw (with its stack).
 * The one dispatcher of both CLIs (`flash-sale` and the lab's `flash-sale-lab`).
 */
export async function dispatch(
  program: string,
  commands: readonly Command[],
  argv: string[],
): Promise<number> {
  const [name, ...rest] = argv
  const command = commands.find((c) => c.name === name)
  if (!command) {
    const help = !name || name === '--help' || name === 'help'
    console.error(
      help ? usage(program, commands) : `unknown command "${name}"\n\n${usage(program, commands)}`,
    )
    return name && !help ? 2 : 0
  }
  try {
    return await command.run(rest)
  } catch (err) {
    console.error(`${program} ${command.name}: ${(err as Error)?.stack ?? err}`)
    return 1
  }
}
