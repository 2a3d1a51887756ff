/**
 * redis/cluster-alone.ts: the verdict each node's CLUSTER NODES gives about one master. The lines
 * are the shapes Redis 7.0 prints (ids shortened); the live Cluster is in partition tests.
 */
import { describe, expect, it } from 'vitest'
import { parseClusterNodes, seesAlone } from '../../src/redis/cluster-alone.js'

const line = (id: string, port: number, flags: string, master: string, slots = '') =>
  `${id} 127.1.0.${port % 256}:${port}@${port + 10000} ${flags} ${master} 0 1700000000000 1 connected ${slots}`.trim()

const M = 'a'.repeat(40)
const R = 'b'.repeat(40)
const O = 'c'.repeat(40)

describe('parseClusterNodes', () => {
  it('reads ids, announced addresses, flags, masters and slot ranges', () => {
    const view = parseClusterNodes(
      [line(M, 7001, 'myself,master', '-', '0-5460 6000 [5461->-' + O + ']'), line(R, 7002, 'slave', M)].join(
        '\n',
      ),
    )
    expect(view).toHaveLength(2)
    expect(view[0]).toMatchObject({ id: M, address: '127.1.0.89:7001', masterId: '-' })
    expect([...view[0]!.flags]).toEqual(['myself', 'master'])
    expect(view[0]!.slots).toEqual([
      [0, 5460],
      [6000, 6000],
    ])
    expect(view[1]).toMatchObject({ id: R, masterId: M, slots: [] })
  })
})

describe('seesAlone', () => {
  const others = line(O, 7003, 'master', '-', '5461-16383')
  it('a master whose only replica is failed (agreed by the majority) is alone', () => {
    const view = parseClusterNodes(
      [line(M, 7001, 'master', '-', '0-5460'), line(R, 7002, 'slave,fail', M), others].join('\n'),
    )
    expect(seesAlone(view, M, 42)).toBe(true)
  })
  it('a replica merely suspected (fail?) is not enough: a partition looks like that first', () => {
    const view = parseClusterNodes(
      [line(M, 7001, 'master', '-', '0-5460'), line(R, 7002, 'slave,fail?', M), others].join('\n'),
    )
    expect(seesAlone(view, M, 42)).toBe(false)
  })
  it('a healthy replica means not alone, whatever WAIT said', () => {
    const view = parseClusterNodes(
      [line(M, 7001, 'master', '-', '0-5460'), line(R, 7002, 'slave', M), others].join('\n'),
    )
    expect(seesAlone(view, M, 42)).toBe(false)
  })
  it('a master the asked node suspects or has failed is not alone in its view', () => {
    for (const flags of ['master,fail?', 'master,fail']) {
      const view = parseClusterNodes([line(M, 7001, flags, '-', '0-5460'), others].join('\n'))
      expect(seesAlone(view, M, 42)).toBe(false)
    }
  })
  it('a master that no longer serves the slot (failed over) is not alone for it', () => {
    const view = parseClusterNodes(
      [line(M, 7001, 'master', '-'), line(R, 7002, 'master', '-', '0-5460'), others].join('\n'),
    )
    expect(seesAlone(view, M, 42)).toBe(false)
    // The promoted replica, whose old master is failed and has no replica of its own: alone.
    const promoted = parseClusterNodes(
      [line(M, 7001, 'master,fail', '-'), line(R, 7002, 'master', '-', '0-5460'), others].join('\n'),
    )
    expect(seesAlone(promoted, R, 42)).toBe(true)
  })
  it('a master without any replica is alone; an unknown id is not', () => {
    const view = parseClusterNodes([line(M, 7001, 'master', '-', '0-5460'), others].join('\n'))
    expect(seesAlone(view, M, 42)).toBe(true)
    expect(seesAlone(view, R, 42)).toBe(false)
  })
})
