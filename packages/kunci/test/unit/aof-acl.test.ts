import { readdirSync, readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { replaysAofWithAclCheck, SCRIPT_WRITES } from '../../src/lock/aof-acl.js'

const scriptsDir = new URL('../../src/lock/scripts/', import.meta.url)

/** Commands that never reach the AOF: reads, and PUBLISH (replicated, never written to the AOF). */
const NOT_IN_AOF = new Set(['EXISTS', 'GET', 'HGET', 'PTTL', 'PUBLISH'])

describe('the AOF replay check (aof-acl.ts)', () => {
  it('asks about every command the lock scripts write, and only those', () => {
    const called = new Set<string>()
    for (const file of readdirSync(scriptsDir).filter((f) => f.endsWith('.lua'))) {
      const src = readFileSync(new URL(file, scriptsDir), 'utf8')
      for (const m of src.matchAll(/redis\.p?call\(\s*['"]([A-Za-z]+)['"]/g)) called.add(m[1]!.toUpperCase())
    }
    // A command a script starts to call must be classified: a write goes into SCRIPT_WRITES.
    const writes = [...called].filter((c) => !NOT_IN_AOF.has(c)).sort()
    expect(SCRIPT_WRITES.map(([command]) => command).sort()).toEqual(writes)
  })

  it('treats every server with ACLs (6.0 and later) as one that checks the default user at the replay', () => {
    const info = (v: string) => new Map([['redis_version', v]])
    expect(replaysAofWithAclCheck(info('7.0.15'))).toBe(true)
    expect(replaysAofWithAclCheck(info('6.2.14'))).toBe(true)
    expect(replaysAofWithAclCheck(info('8.2.1'))).toBe(true)
    expect(replaysAofWithAclCheck(info('5.0.14'))).toBe(false)
    expect(replaysAofWithAclCheck(new Map())).toBe(false)
  })
})
