// The group commit in front of reserve.lua and refuse.lua (issue 24): one call per key per turn,
// and while a key's call is out, what arrives waits for it and goes in the next call — unless the
// call is out longer than the hold, when the next one goes beside it.
import { describe, expect, it } from 'vitest'
import { type Pending, TurnBatcher } from '../../src/sale/turn-batcher.js'

/** A batcher whose flushes are recorded and answered by the test, each when it says. */
function recording(holdWhileInFlightMs?: number) {
  // `at`: when the batcher made the call (the test's own clock could start late after a stall).
  const calls: { key: string; inputs: number[]; at: number; release: () => void; done: () => void }[] = []
  const batcher = new TurnBatcher<number, string>(
    (key, batch: Pending<number, string>[], release) =>
      new Promise<void>((resolve) => {
        calls.push({
          key,
          inputs: batch.map((p) => p.input),
          at: performance.now(),
          release,
          done: () => {
            for (const p of batch) p.resolve(`${key}:${p.input}`)
            resolve()
          },
        })
      }),
    { holdWhileInFlightMs },
  )
  return { batcher, calls }
}

const turn = () => new Promise((r) => setImmediate(r))
async function until(what: string, ok: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 1))
  }
}

describe('TurnBatcher', () => {
  it('one call per key for what arrives in one turn; each caller gets its own answer', async () => {
    const { batcher, calls } = recording()
    const answers = [batcher.add('a', 1), batcher.add('b', 2), batcher.add('a', 3)]
    await until('two calls', () => calls.length === 2)
    expect(calls.map((c) => [c.key, c.inputs])).toEqual([
      ['a', [1, 3]],
      ['b', [2]],
    ])
    for (const c of calls) c.done()
    expect(await Promise.all(answers)).toEqual(['a:1', 'b:2', 'a:3'])
  })

  it("while a key's call is out, what arrives in later turns goes together once it is answered", async () => {
    const { batcher, calls } = recording(60_000)
    const first = batcher.add('a', 1)
    await until('the first call', () => calls.length === 1)
    const later: Promise<string>[] = []
    for (let i = 2; i <= 6; i++) {
      later.push(batcher.add('a', i))
      await turn()
    }
    // Another key is not held by a's call.
    const other = batcher.add('b', 9)
    await until("b's call", () => calls.length === 2)
    expect(calls[1]!.inputs).toEqual([9])
    await turn()
    expect(calls).toHaveLength(2)
    calls[0]!.done()
    expect(await first).toBe('a:1')
    await until('the held call', () => calls.length === 3)
    expect(calls[2]!.inputs).toEqual([2, 3, 4, 5, 6])
    calls[2]!.done()
    calls[1]!.done()
    expect(await Promise.all([...later, other])).toEqual(['a:2', 'a:3', 'a:4', 'a:5', 'a:6', 'b:9'])
  })

  it('release() lets the next call go before the first one settles (its confirmation round)', async () => {
    const { batcher, calls } = recording(60_000)
    void batcher.add('a', 1)
    await until('the first call', () => calls.length === 1)
    void batcher.add('a', 2)
    await turn()
    expect(calls).toHaveLength(1)
    calls[0]!.release()
    await until('the next call', () => calls.length === 2)
    expect(calls[1]!.inputs).toEqual([2])
  })

  it('a call out longer than the hold holds nothing back: the next goes beside it', async () => {
    const { batcher, calls } = recording(30)
    void batcher.add('a', 1)
    await until('the first call', () => calls.length === 1)
    const second = batcher.add('a', 2)
    await until('the second call, the first still out', () => calls.length === 2)
    // Sent when the hold ran out, not before. Timed between the batcher's own two calls: the
    // hold counts from the first call, and a test clock started after it (once this loop saw
    // the call) could start late on a loaded machine. 25: the loop's cached clock can lag.
    expect(calls[1]!.at - calls[0]!.at).toBeGreaterThanOrEqual(25)
    expect(calls[1]!.inputs).toEqual([2])
    // After the hold, a call arriving while the stuck one is still out is not held behind it.
    calls[1]!.done()
    expect(await second).toBe('a:2')
    const third = batcher.add('a', 3)
    await until('the third call', () => calls.length === 3)
    calls[2]!.done()
    expect(await third).toBe('a:3')
    // The old call answering late sends nothing and changes nothing.
    calls[0]!.done()
    await turn()
    expect(calls).toHaveLength(3)
  })

  it('hold 0: one call per turn, whatever is out', async () => {
    const { batcher, calls } = recording(0)
    void batcher.add('a', 1)
    await until('the first call', () => calls.length === 1)
    void batcher.add('a', 2)
    await until('the second call', () => calls.length === 2)
    expect(calls.map((c) => c.inputs)).toEqual([[1], [2]])
  })

  it('a flush that throws or rejects rejects its callers; the next batch still goes', async () => {
    let n = 0
    const batcher = new TurnBatcher<number, number>(
      (_key, batch) => {
        n++
        if (n === 1) throw new Error('thrown')
        if (n === 2) return Promise.reject(new Error('rejected'))
        for (const p of batch) p.resolve(p.input * 10)
        return Promise.resolve()
      },
      { holdWhileInFlightMs: 60_000 },
    )
    await expect(batcher.add('a', 1)).rejects.toThrow('thrown')
    await expect(batcher.add('a', 2)).rejects.toThrow('rejected')
    expect(await batcher.add('a', 3)).toBe(30)
  })

  it('refuses a hold that is not a number ≥ 0', () => {
    expect(() => new TurnBatcher(async () => {}, { holdWhileInFlightMs: -1 })).toThrow(RangeError)
    expect(() => new TurnBatcher(async () => {}, { holdWhileInFlightMs: Number.NaN })).toThrow(RangeError)
  })
})
