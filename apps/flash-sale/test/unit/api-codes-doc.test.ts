import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { HTTP_STATUS } from '../../src/routes/api-error.js'

// docs/flash-sale.md lists every code the service answers with its status (the table "Every code
// the service answers"), and no code the service does not have: a new code cannot ship undocumented.
describe('docs/flash-sale.md, the table of every code', () => {
  const doc = readFileSync(new URL('../../../../docs/flash-sale.md', import.meta.url), 'utf8')
  const start = doc.indexOf('Every code the service answers')
  const table = doc.slice(start, doc.indexOf('\n\n', doc.indexOf('| code | status |', start)))
  const rows = table
    .split('\n')
    .filter((l) => /^\| `/.test(l))
    .map((l) => {
      const [codes, status] = l.split('|').slice(1, 3)
      return { codes: [...codes!.matchAll(/`([A-Z_]+)`/g)].map((m) => m[1]!), status: Number(status) }
    })

  it('has every HTTP_STATUS code with its status', () => {
    expect(start).toBeGreaterThan(0)
    const documented = new Map(rows.flatMap((r) => r.codes.map((c) => [c, r.status] as const)))
    for (const [code, status] of Object.entries(HTTP_STATUS)) expect(documented.get(code), code).toBe(status)
  })

  it('lists no code the service does not have', () => {
    for (const r of rows) for (const c of r.codes) expect(Object.keys(HTTP_STATUS), c).toContain(c)
  })
})
