import { describe, expect, it } from 'vitest'
import { shouldRefreshEarly } from '../../src/cache/stampede.js'

describe('XFetch early refresh', () => {
  const expiresAt = 100_000
  const delta = 100

  it('applies now − δ·β·ln(rand) ≥ expiry exactly', () => {
    // −ln(0.5) ≈ 0.693: with δ = 100, β = 1 the gap is ≈ 69.3 ms.
    expect(shouldRefreshEarly(expiresAt - 70, expiresAt, delta, 1, 0.5)).toBe(false)
    expect(shouldRefreshEarly(expiresAt - 69, expiresAt, delta, 1, 0.5)).toBe(true)
    // β = 2 doubles the horizon.
    expect(shouldRefreshEarly(expiresAt - 138, expiresAt, delta, 2, 0.5)).toBe(true)
    expect(shouldRefreshEarly(expiresAt - 140, expiresAt, delta, 2, 0.5)).toBe(false)
  })

  it('never refreshes early with β = 0 or an unknown recompute time', () => {
    expect(shouldRefreshEarly(expiresAt - 1, expiresAt, delta, 0, 0.0001)).toBe(false)
    expect(shouldRefreshEarly(expiresAt - 1, expiresAt, 0, 1, 0.0001)).toBe(false)
  })

  it('gets more likely as expiry approaches', () => {
    const rate = (now: number) => {
      let n = 0
      for (let i = 1; i <= 10_000; i++) if (shouldRefreshEarly(now, expiresAt, delta, 1, i / 10_001)) n++
      return n / 10_000
    }
    const far = rate(expiresAt - 500)
    const near = rate(expiresAt - 50)
    expect(far).toBeLessThan(0.01)
    expect(near).toBeGreaterThan(0.55)
    expect(rate(expiresAt)).toBe(1)
  })
})
