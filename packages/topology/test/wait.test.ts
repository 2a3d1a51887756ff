import { describe, expect, it } from 'vitest'
import { eventually, readDefined, readUntil, until } from '../src/wait.js'

describe('waiting on a condition', () => {
  it('readUntil returns the first accepted value, retrying reads that throw', async () => {
    let n = 0
    const v = await readUntil(
      () => {
        n++
        if (n === 2) throw new Error('not yet')
        return n
      },
      (x) => x >= 4,
      'n to reach 4',
      { timeoutMs: 5_000, intervalMs: 1 },
    )
    expect(v).toBe(4)
  })

  it('readUntil names what it waited for and the last value seen when time runs out', async () => {
    await expect(
      readUntil(
        () => ({ left: 3 }),
        (x) => x.left === 0,
        'the backlog',
        30,
      ),
    ).rejects.toThrow(/timed out after 30 ms waiting for the backlog; last seen: \{"left":3\}/)
    await expect(
      readUntil(
        () => {
          throw new Error('connection refused')
        },
        () => true,
        'the server',
        30,
      ),
    ).rejects.toThrow(/waiting for the server; last seen: Error: connection refused/)
  })

  it('readDefined returns the first value that is not undefined', async () => {
    const values = [undefined, undefined, 'ready']
    expect(await readDefined(() => values.shift(), 'ready', { intervalMs: 1 })).toBe('ready')
  })

  it('until and eventually give up with their reason', async () => {
    await expect(until(() => false, 'never', 20)).rejects.toThrow(/waiting for never/)
    await expect(eventually(() => expect(1).toBe(2), 20)).rejects.toThrow()
    let calls = 0
    await until(() => ++calls === 3, 'three calls', { intervalMs: 1 })
    expect(calls).toBe(3)
  })
})
