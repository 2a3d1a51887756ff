/**
 * The lab drives the service as a client of it (STYLE.md §10): it reaches the service, kunci and
 * @kunci/topology only through their package names (@kunci/flash-sale, kunci, @kunci/topology),
 * never through a relative path out of apps/flash-sale-lab or into another package's src/. So does
 * bench/checkout, which runs the lab's stack and load generator.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const LAB = fileURLToPath(new URL('../../', import.meta.url))
const REPO = resolve(LAB, '../..')

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name)
    if (e.isDirectory()) return e.name === 'node_modules' || e.name === 'dist' ? [] : tsFiles(p)
    return e.name.endsWith('.ts') ? [p] : []
  })
}

/** Every module specifier of a file: static imports, re-exports, import() calls. */
function specifiers(path: string): string[] {
  const text = readFileSync(path, 'utf8')
  return [...text.matchAll(/(?:\bfrom\s+|\bimport\s*\(\s*|^\s*import\s+)'([^']+)'/gm)].map((m) => m[1]!)
}

/** Specifiers of the files under `root` that leave `root` by a relative path, or name a package's src/. */
function offenders(root: string, files: string[]): string[] {
  return files.flatMap((path) =>
    specifiers(path)
      .filter((s) => {
        if (s.startsWith('.')) return relative(root, resolve(dirname(path), s)).startsWith('..')
        return /(^|\/)(src|test)\//.test(s) || s.startsWith('/')
      })
      .map((s) => `${relative(REPO, path)}: ${s}`),
  )
}

describe('imports', () => {
  it('the lab reaches other packages only by their names', () => {
    const files = [...tsFiles(join(LAB, 'src')), ...tsFiles(join(LAB, 'test'))]
    expect(files.length).toBeGreaterThan(30)
    expect(offenders(LAB, files)).toEqual([])
  })

  it('bench/checkout reaches the lab, the service and the packages only by their names', () => {
    const root = join(REPO, 'bench')
    const files = tsFiles(join(root, 'checkout'))
    expect(files.length).toBeGreaterThan(5)
    expect(offenders(root, files)).toEqual([])
  })

  it('the lab imports the service through @kunci/flash-sale, which the lab depends on', () => {
    const pkg = JSON.parse(readFileSync(join(LAB, 'package.json'), 'utf8')) as {
      private: boolean
      dependencies: Record<string, string>
    }
    expect(pkg.private).toBe(true)
    const used = new Set(
      tsFiles(join(LAB, 'src'))
        .flatMap(specifiers)
        .filter((s) => !s.startsWith('.') && !s.startsWith('node:'))
        .map((s) => (s.startsWith('@') ? s.split('/').slice(0, 2).join('/') : s.split('/')[0]!)),
    )
    expect(used).toContain('@kunci/flash-sale')
    expect([...used].filter((name) => !(name in pkg.dependencies))).toEqual([])
  })
})
