import { readFileSync } from 'node:fs'
import { ERROR_CODES, WARNING_CODES } from 'kunci'
import { describe, expect, it } from 'vitest'

// docs/errors.md has a section per code, and lists no code the library does not have.
describe('docs/errors.md', () => {
  const doc = readFileSync(new URL('../../../../docs/errors.md', import.meta.url), 'utf8')
  const documented = [...doc.matchAll(/^## (E_[A-Z0-9_]+)\s*$/gm)].map((m) => m[1])

  it.each(ERROR_CODES.map((c) => [c]))('documents %s', (code) => {
    expect(documented).toContain(code)
  })

  it('documents no code that does not exist', () => {
    expect(documented.filter((c) => !ERROR_CODES.includes(c as never))).toEqual([])
  })

  it('has no duplicate sections', () => {
    expect(new Set(documented).size).toBe(documented.length)
  })
})

// Warning codes have a `### KUNCI_W_…` section each, under '# Warning codes'.
describe('docs/errors.md warning codes', () => {
  const doc = readFileSync(new URL('../../../../docs/errors.md', import.meta.url), 'utf8')
  const documented = [...doc.matchAll(/^### (KUNCI_W_[A-Z0-9_]+)\s*$/gm)].map((m) => m[1])

  it.each(WARNING_CODES.map((c) => [c]))('documents %s', (code) => {
    expect(documented).toContain(code)
  })

  it('documents no warning code that does not exist, and none twice', () => {
    expect(documented.filter((c) => !WARNING_CODES.includes(c as never))).toEqual([])
    expect(new Set(documented).size).toBe(documented.length)
  })
})
