/**
 * Guards over the service's layers (STYLE.md §12): every import in apps/flash-sale/src points to
 * the same layer or a lower one, and no files import each other, directly or round a longer
 * loop. The lab (apps/flash-sale-lab/src) is held to the same. Like packages/kunci's
 * seams.test.ts, it reads the sources and takes the specifiers with regexes (`import type` and
 * dynamic imports count too: a type that points up is a layer crossed all the same).
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join, posix } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

/** A layer: a folder (`'domain/'`) or a root file (`'config.ts'`), and why it sits where it does. */
interface Layer {
  path: string
  why: string
}

/** The service's layers, lowest first. A file may import its own layer or any layer before it. */
const SERVICE_LAYERS: readonly Layer[] = [
  { path: 'errors.ts', why: 'the one error base (ServiceError); everything may throw one' },
  { path: 'runtime-timeout.ts', why: 'bounding a promise; knows only the error base' },
  { path: 'config.ts', why: 'reads process.env into typed values; the strategy and Redis names live here' },
  { path: 'domain/', why: 'ids, order states, refusals: words of the sale, no I/O, no HTTP' },
  { path: 'db/', why: 'the SQL pool and migrations; knows no table of the sale' },
  // sql/ holds every statement on the sale's tables (the migrations aside), one module per
  // audience; it sits right above db/ so that sale/, orders/, strategies/ and routes/ all read and
  // write through it, and it imports none of them (it names its own narrow row and event types).
  { path: 'sql/', why: 'the books: every statement on the sale’s tables, one module per audience' },
  { path: 'redis/', why: 'connections, keys and Redis error kinds; reads config' },
  { path: 'metrics/', why: 'the Prometheus families; the order pipeline and the room record into them' },
  { path: 'sale/', why: 'the sale and its stock in Redis and SQL; orders and strategies sell from it' },
  { path: 'orders/', why: 'the order pipeline (store, worker, payments); settles what the sale reserved' },
  { path: 'strategies/', why: 'the checkout strategies; reserve in the sale, record in orders' },
  { path: 'waiting-room/', why: 'the queue in front of a sale; refuses in domain terms, no HTTP' },
  { path: 'app-deps.ts', why: 'the services the routes are given, as types' },
  { path: 'routes/', why: 'HTTP: one plugin per route; maps domain refusals to statuses (api-error.ts)' },
  { path: 'plugins/', why: 'the one error handler, which sends the routes’ ApiError answers' },
  { path: 'app.ts', why: 'buildApp(): registers plugins and routes' },
  { path: 'runtime.ts', why: 'builds the services from config (the AppDeps)' },
  { path: 'server.ts', why: 'listens: the app over the runtime, with health and graceful stop' },
  { path: 'cli/', why: 'the commands (serve, worker, migrate, reconcile) start the layers below' },
  { path: 'index.ts', why: 'the public entry for the lab; re-exports from anywhere below' },
]

/** The lab's layers, lowest first: the tools that drive the service. */
const LAB_LAYERS: readonly Layer[] = [
  { path: 'errors.ts', why: 'the one error base (LabError); every folder may throw one' },
  { path: 'db/', why: 'an embedded SQL server and its session queue' },
  { path: 'observe/', why: 'the local Prometheus/Grafana the stack may start' },
  { path: 'stack/', why: 'a local stack of service processes; uses db/ and observe/' },
  { path: 'load/', why: 'the load generator; knows only the service’s HTTP API' },
  { path: 'report/', why: 'renders a run’s figures (load results) as HTML' },
  { path: 'demo/', why: 'the demo: stacks, load, faults and the report together' },
  { path: 'cli/', why: 'the lab’s commands over all of the above' },
  { path: 'index.ts', why: 'the lab’s public entry' },
]

type Files = ReadonlyMap<string, string>

function sources(root: string, dir = root): Map<string, string> {
  const out = new Map<string, string>()
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name)
    if (e.isDirectory()) for (const [k, v] of sources(root, p)) out.set(k, v)
    else if (e.name.endsWith('.ts'))
      out.set(p.slice(root.length).split('\\').join('/'), readFileSync(p, 'utf8'))
  }
  return out
}

/** Every module specifier a file imports or re-exports (also `import type`, also dynamic). */
function specifiers(text: string): string[] {
  const out: string[] = []
  for (const m of text.matchAll(/^\s*(?:import|export)\b[^'"]*?from\s+'([^']+)'/gms)) out.push(m[1]!)
  for (const m of text.matchAll(/^\s*import\s+'([^']+)'/gm)) out.push(m[1]!)
  for (const m of text.matchAll(/\bimport\(\s*'([^']+)'\s*\)/g)) out.push(m[1]!)
  return out
}

/** The file a relative specifier names ('../sale/sale-store.js' → 'sale/sale-store.ts'), or undefined. */
function resolveImport(from: string, spec: string, files: Files): string | undefined {
  if (!spec.startsWith('.')) return undefined
  const base = posix.normalize(posix.join(posix.dirname(from), spec))
  for (const c of [base.replace(/\.js$/, '.ts'), `${base}.ts`, `${base}/index.ts`]) if (files.has(c)) return c
  return undefined
}

const layerOf = (file: string, layers: readonly Layer[]) =>
  layers.findIndex((l) => (l.path.endsWith('/') ? file.startsWith(l.path) : file === l.path))

/** Each file's imports of other files of the tree; relative imports that name no file are reported. */
function importGraph(files: Files): { edges: Map<string, string[]>; unresolved: string[] } {
  const edges = new Map<string, string[]>()
  const unresolved: string[] = []
  for (const [file, text] of files) {
    const targets: string[] = []
    for (const spec of specifiers(text)) {
      if (!spec.startsWith('.')) continue
      const target = resolveImport(file, spec, files)
      if (target) targets.push(target)
      else unresolved.push(`${file}: ${spec}`)
    }
    edges.set(file, [...new Set(targets)])
  }
  return { edges, unresolved }
}

/** Every loop of imports, one per strongly connected group (Tarjan), as `a -> b -> a`. */
function findCycles(edges: ReadonlyMap<string, readonly string[]>): string[] {
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const groups: string[][] = []
  const visit = (v: string): void => {
    index.set(v, index.size)
    low.set(v, index.get(v)!)
    stack.push(v)
    onStack.add(v)
    for (const w of edges.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!))
    }
    if (low.get(v) !== index.get(v)) return
    const group: string[] = []
    let w: string
    do {
      w = stack.pop()!
      onStack.delete(w)
      group.push(w)
    } while (w !== v)
    if (group.length > 1 || (edges.get(v) ?? []).includes(v)) groups.push(group)
  }
  for (const v of [...edges.keys()].sort()) if (!index.has(v)) visit(v)
  // Name one loop through each group: a shortest path from its first file back to itself.
  const loops = groups.map((group) => {
    const inGroup = new Set(group)
    const start = [...group].sort()[0]!
    const prev = new Map<string, string>()
    const queue = [start]
    let end: string | undefined
    while (queue.length > 0 && end === undefined) {
      const v = queue.shift()!
      for (const w of edges.get(v) ?? []) {
        if (!inGroup.has(w)) continue
        if (w === start) {
          end = v
          break
        }
        if (!prev.has(w)) {
          prev.set(w, v)
          queue.push(w)
        }
      }
    }
    const path = [start]
    for (let v = end; v !== undefined && v !== start; v = prev.get(v)) path.splice(1, 0, v)
    return [...path, start].join(' -> ')
  })
  return loops.sort()
}

/** What breaks the layering: files of no layer, imports that name no file, arrows up, loops. */
function checkLayers(files: Files, layers: readonly Layer[]) {
  const { edges, unresolved } = importGraph(files)
  const unlayered = [...files.keys()].filter((f) => layerOf(f, layers) < 0)
  const upward: string[] = []
  for (const [from, targets] of edges) {
    const own = layerOf(from, layers)
    for (const to of targets) {
      const theirs = layerOf(to, layers)
      if (own >= 0 && theirs > own)
        upward.push(`${from} -> ${to} (${layers[own]!.path} is below ${layers[theirs]!.path})`)
    }
  }
  return { unlayered, unresolved, upward: upward.sort(), cycles: findCycles(edges) }
}

const SERVICE_SRC = fileURLToPath(new URL('../../src/', import.meta.url))
const LAB_SRC = fileURLToPath(new URL('../../../flash-sale-lab/src/', import.meta.url))

describe('the checker', () => {
  it('reads the file list and the specifiers (the guards below see the sources)', () => {
    const files = [...sources(SERVICE_SRC).keys()]
    expect(files).toContain('waiting-room/waiting-room.ts')
    expect(files).toContain('routes/api-error.ts')
    expect(files).toContain('index.ts')
    expect(files.length).toBeGreaterThan(50)
    const { edges } = importGraph(sources(SERVICE_SRC))
    expect(edges.get('routes/checkout.ts')).toContain('routes/api-error.ts')
    expect([...edges.values()].flat().length).toBeGreaterThan(200)
    expect([...sources(LAB_SRC).keys()]).toContain('demo/scenario.ts')
    expect(
      specifiers(
        "import type { A } from './a.js'\nexport { b } from '../b.js'\nimport './c.js'\nconst d = await import('./d.js')",
      ),
    ).toEqual(['./a.js', '../b.js', './c.js', './d.js'])
    expect(resolveImport('sale/x.ts', '../domain/ids.js', new Map([['domain/ids.ts', '']]))).toBe(
      'domain/ids.ts',
    )
    expect(layerOf('sale/sale-store.ts', SERVICE_LAYERS)).toBeLessThan(
      layerOf('routes/admin.ts', SERVICE_LAYERS),
    )
  })

  it('catches a planted upward import and a planted cycle, naming them', () => {
    const layers: Layer[] = [
      { path: 'low/', why: 'test' },
      { path: 'high.ts', why: 'test' },
    ]
    const files = new Map([
      ['low/a.ts', "import type { H } from '../high.js'"],
      ['low/b.ts', "import { c } from './c.js'"],
      ['low/c.ts', "export const c = 1\nconst d = () => import('./d.js')"],
      ['low/d.ts', "export { b } from './b.js'"],
      ['low/e.ts', "import type { F } from './f.js'"],
      ['low/f.ts', "import { e } from './e.js'"],
      ['high.ts', "import { e } from './low/e.js'"],
      ['stray/x.ts', "import { y } from './y.js'"],
    ])
    const found = checkLayers(files, layers)
    expect(found.upward).toEqual(['low/a.ts -> high.ts (low/ is below high.ts)'])
    expect(found.cycles).toEqual([
      'low/b.ts -> low/c.ts -> low/d.ts -> low/b.ts',
      'low/e.ts -> low/f.ts -> low/e.ts',
    ])
    expect(found.unlayered).toEqual(['stray/x.ts'])
    expect(found.unresolved).toEqual(['stray/x.ts: ./y.js'])
  })
})

describe.each([
  { tree: 'apps/flash-sale/src', src: SERVICE_SRC, layers: SERVICE_LAYERS },
  { tree: 'apps/flash-sale-lab/src', src: LAB_SRC, layers: LAB_LAYERS },
])('$tree layers', ({ src, layers }) => {
  const found = checkLayers(sources(src), layers)

  it('every file sits in a declared layer and every relative import names a file', () => {
    expect(found.unlayered).toEqual([])
    expect(found.unresolved).toEqual([])
  })

  it('every import points to the same layer or a lower one', () => {
    expect(found.upward).toEqual([])
  })

  it('no files import each other, directly or round a loop', () => {
    expect(found.cycles).toEqual([])
  })
})

describe('apps/flash-sale/src: the domain and the waiting room', () => {
  it('know nothing of HTTP', () => {
    const http = /^(fastify|@fastify\/.+)$|\/routes\/|\/plugins\//
    const offenders = [...sources(SERVICE_SRC)].flatMap(([path, text]) =>
      path.startsWith('domain/') || path.startsWith('waiting-room/')
        ? specifiers(text)
            .filter((s) => http.test(s))
            .map((s) => `${path}: ${s}`)
        : [],
    )
    expect(offenders).toEqual([])
  })
})
