// bench/RESULTS.md's generated tables are what bench/results/*.json say, and a ratio is never
// printed on the other side of its requirement.
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import {
  cacheTargets,
  formatRatio,
  parseRequired,
  RESULTS_MD,
  readResults,
  renderSections,
  replaceSections,
  sectionOf,
} from '../report/render-results.js'

describe('bench/RESULTS.md', () => {
  const results = readResults()
  const markdown = readFileSync(RESULTS_MD, 'utf8')

  it('each generated section is exactly what the JSON gives (npm run bench:render rewrites them)', () => {
    const sections = renderSections(results)
    expect(Object.keys(sections).length).toBeGreaterThan(0)
    for (const [name, body] of Object.entries(sections)) expect(sectionOf(markdown, name), name).toBe(body)
    expect(replaceSections(markdown, sections)).toBe(markdown)
  })

  it('names every run by its date and commit, and its verdict is the harness’s', () => {
    const locks = sectionOf(markdown, 'locks-targets')!
    for (const run of results.locks) {
      expect(locks).toContain(
        `| ${run.environment.date.slice(0, 10)} ${run.environment.date.slice(11, 16)} UTC | \`${run.environment.commit.slice(0, 7)}\``,
      )
      for (const t of run.targets.filter((x) => x.verdict !== 'n/a')) {
        const { factor, better } = parseRequired(t.required)
        expect(locks).toContain(`${formatRatio(t.ratio!, factor, better)} ${t.verdict}`)
      }
      // A --c1-interleaved run says its ratio in its row.
      const i = run.c1Interleaved?.kunciOverBest
      if (i) expect(locks).toContain(`C=1 interleaved: kunci ${i.ratio.toFixed(3)}× ${i.best}`)
    }
    expect(results.locks.some((r) => r.c1Interleaved?.kunciOverBest !== undefined)).toBe(true)
    const cache = sectionOf(markdown, 'cache-targets')!
    for (const run of results.cache) {
      expect(cache).toContain(`\`${run.env.commit.slice(0, 7)}\``)
      for (const t of cacheTargets(run))
        expect(cache).toContain(`${formatRatio(t.ratio, t.factor, 'higher')} ${t.met ? 'met' : 'MISSED'}`)
    }
  })
})

describe('formatRatio', () => {
  it('never rounds a miss into a pass, nor a pass into a miss', () => {
    expect(formatRatio(0.2512, 0.25, 'lower')).toBe('0.251×')
    expect(formatRatio(0.2499, 0.25, 'lower')).toBe('0.25×')
    expect(formatRatio(1.0996, 1.1, 'higher')).toBe('1.0996×')
    expect(formatRatio(1.1, 1.1, 'higher')).toBe('1.10×')
    expect(formatRatio(0.5664, 1.1, 'higher')).toBe('0.57×')
    expect(formatRatio(Number.NaN, 1, 'higher')).toBe('–')
  })

  it('reads the harness’s requirements', () => {
    expect(parseRequired('≥ 1.1×')).toEqual({ factor: 1.1, better: 'higher' })
    expect(parseRequired('≤ 0.25× (1/4)')).toEqual({ factor: 0.25, better: 'lower' })
  })
})
