import { parseArgs } from 'node:util'
import { ConfigError, loadConfig, type ServiceConfig } from '../config.js'

/** Flags shared by serve/worker/migrate/reconcile; each overrides its environment variable. */
export const CONFIG_FLAGS = {
  strategy: { type: 'string', env: 'STRATEGY' },
  durability: { type: 'string', env: 'DURABILITY' },
  port: { type: 'string', env: 'PORT' },
  host: { type: 'string', env: 'HOST' },
  'worker-port': { type: 'string', env: 'WORKER_PORT' },
  'database-url': { type: 'string', env: 'DATABASE_URL' },
  'queue-url': { type: 'string', env: 'QUEUE_URL' },
} as const

export interface ParsedConfigArgs {
  config: ServiceConfig
  values: Record<string, string | boolean | undefined>
}

/** Parses the flags, then the configuration; prints every problem and returns undefined if any. */
export function configFromArgs(
  command: string,
  argv: string[],
  extra: Record<string, { type: 'string' | 'boolean' }> = {},
  env: Record<string, string | undefined> = process.env,
): ParsedConfigArgs | undefined {
  let values: Record<string, string | boolean | undefined>
  try {
    const options = Object.fromEntries(
      [...Object.entries(CONFIG_FLAGS), ...Object.entries(extra)].map(([k, v]) => [k, { type: v.type }]),
    ) as Record<string, { type: 'string' | 'boolean' }>
    values = parseArgs({ args: argv, options, allowPositionals: false, strict: true }).values
  } catch (err) {
    console.error(`flash-sale ${command}: ${(err as Error).message}`)
    return undefined
  }
  const overrides: Record<string, string> = {}
  for (const [flag, spec] of Object.entries(CONFIG_FLAGS)) {
    const v = values[flag]
    if (typeof v === 'string') overrides[spec.env] = v
  }
  try {
    return { config: loadConfig(env, overrides), values }
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    console.error(`flash-sale ${command}: ${err.message}`)
    return undefined
  }
}
