/**
 * The image's build files agree with each other and with the manifests (issue 38): the Node.js
 * release of the Containerfile's default build image is the local base's, and the image the
 * manifests name is the one `npm run image` builds. The image itself is built and run by
 * integration/image.test.ts.
 */
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { CONFIGS } from '../src/k8s/config.js'

const read = (path: string) => readFileSync(new URL(path, import.meta.url), 'utf8')

describe('the image build files', () => {
  const containerfile = read('../image/Containerfile')
  const localBase = read('../image/local-base.mjs')

  it("the Containerfile's official build image and the local base carry the same Node.js release", () => {
    const official = /^ARG BUILD_IMAGE=docker\.io\/library\/node:(\d+\.\d+\.\d+)-/m.exec(containerfile)?.[1]
    const local = /export const NODE_VERSION = '(\d+\.\d+\.\d+)'/.exec(localBase)?.[1]
    expect(official).toBeDefined()
    expect(local).toBe(official)
    // The current LTS line, and the one the service's engines accept.
    expect(Number(official!.split('.')[0])).toBeGreaterThanOrEqual(26)
  })

  it('every RUN is in exec form (the local base has no shell), and the runtime stage is FROM scratch as uid 1000', () => {
    const runs = containerfile.split('\n').filter((l) => /^RUN\b/.test(l))
    expect(runs.length).toBeGreaterThan(0)
    const joined = containerfile.replace(/\\\n\s*/g, ' ')
    for (const line of joined.split('\n').filter((l) => /^RUN\b/.test(l)))
      expect(line).toMatch(/\[\s*"node",/)
    const stages = joined.split('\n').filter((l) => /^FROM\b/.test(l))
    expect(stages.at(-1)).toBe('FROM scratch')
    expect(joined).toMatch(/^USER 1000:1000$/m)
  })

  it('the manifests name the image `npm run image` builds, fully qualified', () => {
    const version = JSON.parse(read('../../apps/flash-sale/package.json')).version as string
    for (const cfg of CONFIGS) expect(cfg.image).toBe(`localhost/kunci/flash-sale:${version}`)
    expect(read('../image/build.mjs')).toMatch(/IMAGE = `localhost\/kunci\/flash-sale:\$\{VERSION\}`/)
  })
})
