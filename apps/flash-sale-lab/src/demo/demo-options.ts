// Options of one demo run, their defaults in one frozen table and the one resolver that checks
// them; the three profiles (how long each phase lasts and when the faults hit) live in scenario.ts.
import { DemoOptionError } from './errors.js'
import { type DemoProfile, phasePlans, selectPhases } from './scenario.js'

export type DemoStrategy = 'naive' | 'redlock' | 'lua'
/**
 * Where the orders go without --database-url: `embedded` = PGlite (each stack its own);
 * `postgres` = a fresh database per strategy on the local PostgreSQL; `auto` = that if it answers,
 * else embedded.
 */
export type DemoSql = 'auto' | 'postgres' | 'embedded'

export const DEMO_STRATEGIES: readonly DemoStrategy[] = Object.freeze(['naive', 'redlock', 'lua'])
export const DEMO_PROFILES: readonly DemoProfile[] = Object.freeze(['quick', 'default', 'full'])

export interface DemoOptions {
  /** Phase lengths and fault times (see scenario.ts). @defaultValue 'default' (about 2 minutes) */
  profile?: DemoProfile
  /** Strategies to run, in order. @defaultValue ['naive', 'redlock', 'lua'] */
  strategies?: DemoStrategy[]
  /** PostgreSQL URL used as is (one database for every strategy; each sale is a new round). */
  databaseUrl?: string
  /** Without databaseUrl: which SQL to use. @defaultValue 'embedded' */
  sql?: DemoSql
  /** PostgreSQL server where `auto`/`postgres` create a fresh database. @defaultValue 'postgres://postgres@127.0.0.1:5432/postgres' */
  postgresAdminUrl?: string
  /** Where index.html (and report.json) are written, relative to the cwd. @defaultValue 'report' */
  reportDir?: string
  /** Service processes per stack. @defaultValue 2 */
  instances?: number
  /** After the load, how long to wait for the worker to settle every order. @defaultValue 90000 */
  drainTimeoutMs?: number
  /** Echo the stack's children on stderr. @defaultValue false */
  echo?: boolean
  /**
   * Only these phases, by id or the start of ids (`money`: money-instant and money-hold).
   * @defaultValue undefined (every phase of the profile)
   */
  phases?: string[]
}

export const DEFAULT_DEMO_OPTIONS = Object.freeze({
  profile: 'default',
  strategies: [...DEMO_STRATEGIES],
  databaseUrl: undefined,
  sql: 'embedded',
  postgresAdminUrl: 'postgres://postgres@127.0.0.1:5432/postgres',
  reportDir: 'report',
  instances: 2,
  drainTimeoutMs: 90_000,
  echo: false,
} satisfies Omit<Required<DemoOptions>, 'databaseUrl' | 'phases'> & { databaseUrl: undefined })

export type ResolvedDemoOptions = Omit<Required<DemoOptions>, 'databaseUrl' | 'phases'> & {
  databaseUrl?: string
  phases?: string[]
}

export function resolveDemoOptions(input: DemoOptions = {}): ResolvedDemoOptions {
  const o = { ...DEFAULT_DEMO_OPTIONS, ...input }
  if (!DEMO_PROFILES.includes(o.profile))
    throw new DemoOptionError('--profile', `expected ${DEMO_PROFILES.join(', ')}, got '${o.profile}'`)
  if (!['auto', 'postgres', 'embedded'].includes(o.sql))
    throw new DemoOptionError('--sql', `expected auto, postgres or embedded, got '${o.sql}'`)
  if (!Array.isArray(o.strategies) || o.strategies.length === 0)
    throw new DemoOptionError('--strategies', 'expected at least one of naive, redlock, lua')
  for (const s of o.strategies) {
    if (!DEMO_STRATEGIES.includes(s))
      throw new DemoOptionError('--strategies', `unknown strategy '${s}'; use naive, redlock, lua`)
  }
  if (!Number.isInteger(o.instances) || o.instances < 1 || o.instances > 16)
    throw new DemoOptionError('--instances', `expected a whole number from 1 to 16, got ${o.instances}`)
  if (!(o.drainTimeoutMs >= 1_000) || !Number.isFinite(o.drainTimeoutMs))
    throw new DemoOptionError('drainTimeoutMs', `expected a number of ms >= 1000, got ${o.drainTimeoutMs}`)
  if (typeof o.reportDir !== 'string' || o.reportDir === '')
    throw new DemoOptionError('--report-dir', 'expected a directory path')
  if (o.phases !== undefined) {
    const plans = phasePlans(o.profile)
    const known = plans.map((p) => p.id).join(', ')
    if (!Array.isArray(o.phases) || o.phases.length === 0)
      throw new DemoOptionError('--phases', `expected at least one of ${known}`)
    for (const w of o.phases) {
      if (selectPhases(plans, [w]).length === 0)
        throw new DemoOptionError('--phases', `no phase '${w}' in profile ${o.profile}; use ${known}`)
    }
  }
  const { databaseUrl, phases, ...rest } = o
  return {
    ...rest,
    ...(databaseUrl === undefined ? {} : { databaseUrl }),
    ...(phases === undefined ? {} : { phases }),
  }
}
