/**
 * bench/locks and bench/cache are a client of the packages (STYLE.md §10, as bentocache's
 * benchmarks/ imports 'bentocache'): they import kunci and @kunci/topology only through their
 * public package exports, so they measure what users get, never `packages/*\/src` or test code.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const BENCH = fileURLToPath(new URL('../../../../bench/', import.meta.url))

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name)
    if (e.isDirectory()) return files(p)
    return e.name.endsWith('.ts') ? [p] : []
  })
}

describe('bench/locks and bench/cache', () => {
  it('import the packages only by name, never a path into packages/ or a test folder', () => {
    const all = ['locks', 'cache'].flatMap((d) => files(join(BENCH, d)))
    expect(all.length).toBeGreaterThan(5)
    const offenders = all.flatMap((path) =>
      [...readFileSync(path, 'utf8').matchAll(/(?:from\s+|import\()\s*'([^']+)'/g)]
        .map((m) => m[1]!)
        .filter((s) => s.includes('packages/') || /(^|\/)(src|test)\//.test(s) || s.startsWith('../../'))
        .map((s) => `${path.slice(BENCH.length)}: ${s}`),
    )
    expect(offenders).toEqual([])
  })

  it('is a private workspace of the monorepo', () => {
    const pkg = JSON.parse(readFileSync(join(BENCH, 'package.json'), 'utf8')) as {
      name: string
      private: boolean
      dependencies: Record<string, string>
    }
    const root = JSON.parse(readFileSync(join(BENCH, '../package.json'), 'utf8')) as { workspaces: string[] }
    expect(pkg.private).toBe(true)
    expect(pkg.dependencies).toHaveProperty('kunci')
    expect(pkg.dependencies).toHaveProperty('@kunci/topology')
    expect(root.workspaces).toContain('bench')
  })
})
