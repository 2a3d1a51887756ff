import { InvalidOptionError } from '../errors.js'

/** A parameterised statement, in the `{ text, values }` shape `pg` and most SQL clients accept. */
export interface SqlStatement {
  readonly text: string
  readonly values: readonly unknown[]
}

export interface FencedUpdateOptions {
  /** Table name; may be schema-qualified (`billing.accounts`). */
  table: string
  /** Column → new value. */
  set: Readonly<Record<string, unknown>>
  /** Column → value identifying the row(s), compared with `=`. */
  where: Readonly<Record<string, unknown>>
  /** The lock's fencing token. */
  fence: number
  /** Column holding the last fencing token that wrote the row. @defaultValue 'fence' */
  fenceColumn?: string
}

/**
 * Builds the SQL side of fencing (PostgreSQL placeholders):
 *
 *   UPDATE accounts SET balance = $1, fence = $2 WHERE id = $3 AND fence < $2
 *
 * The row changes only if this holder's token is newer than the last writer's. A result with
 * zero affected rows means a later holder has written (or the row does not exist): the caller
 * lost its lock and must not report success. Identifiers are quoted; values are parameters.
 *
 * The fence orders writers, not reads: when `set` is computed from a value read earlier (a
 * balance, a counter), also name that value in `where`, so that a write computed from a read
 * another holder has since overtaken matches no row (docs/locks.md, "A value computed from a read").
 */
export function fencedUpdate(options: FencedUpdateOptions): SqlStatement {
  const { table, set, where, fence, fenceColumn = 'fence' } = options
  if (!Number.isSafeInteger(fence) || fence < 1)
    throw new InvalidOptionError('fence', 'expected a lock fencing token')
  const setCols = Object.keys(set)
  const whereCols = Object.keys(where)
  if (setCols.length === 0) throw new InvalidOptionError('set', 'expected at least one column to update')
  if (whereCols.length === 0)
    throw new InvalidOptionError('where', 'expected at least one column to identify the row')
  if (setCols.includes(fenceColumn))
    throw new InvalidOptionError('set', `"${fenceColumn}" is set from the fence`)
  const values: unknown[] = []
  const param = (v: unknown) => `$${values.push(v)}`
  const assignments = setCols.map((c) => `${ident(c)} = ${param(set[c])}`)
  const fenceParam = param(fence)
  assignments.push(`${ident(fenceColumn)} = ${fenceParam}`)
  const conditions = whereCols.map((c) => `${ident(c)} = ${param(where[c])}`)
  conditions.push(`${ident(fenceColumn)} < ${fenceParam}`)
  const text = `UPDATE ${table.split('.').map(ident).join('.')} SET ${assignments.join(', ')} WHERE ${conditions.join(' AND ')}`
  return { text, values }
}

function ident(name: string): string {
  if (typeof name !== 'string' || name.length === 0)
    throw new InvalidOptionError('table', 'identifiers must be non-empty strings')
  return `"${name.replaceAll('"', '""')}"`
}
