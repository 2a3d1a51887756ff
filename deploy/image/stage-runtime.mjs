// Runs in the image's build stage (deploy/image/Containerfile), with Node.js only: no shell. Lays
// out under <out>:
//   rootfs/  the runtime stage's root filesystem (node-root.mjs): this stage's node binary and the
//            C libraries it links, passwd and group for uid 1000, /tmp as a mount point
//   app/     the service as it runs: the manifests of the root and of the two workspaces it is made
//            of (kunci, the service), the lockfile, and the compiled `dist` of both (with the .lua
//            and .sql files scripts/copy-lua.mjs put beside their modules). The production node_modules is
//            installed into it afterwards (npm install --omit=dev, the lockfile's versions).
import { cpSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { nodeRoot } from './node-root.mjs'

const out = process.argv[2]
if (!out) throw new Error('usage: stage-runtime.mjs <outDir>')
const rootfs = join(out, 'rootfs')
const app = join(out, 'app')
const { loader } = nodeRoot(rootfs, process.execPath)

const src = process.cwd()
const SERVED = ['packages/kunci', 'apps/flash-sale']
// Manifests with only what runs: the two workspaces the service is made of, without their
// devDependencies (the lab and the topology kit, and through them PGlite, node-redis, undici…).
// `npm install --omit=dev` then keeps the lockfile's versions of what is left and drops the rest:
// `npm ci` cannot, since it installs every workspace of the lockfile.
const manifest = (path, patch) => {
  const {
    devDependencies: _dev,
    scripts: _scripts,
    ...kept
  } = JSON.parse(readFileSync(join(src, path), 'utf8'))
  mkdirSync(dirname(join(app, path)), { recursive: true })
  writeFileSync(join(app, path), `${JSON.stringify({ ...kept, ...patch }, null, 2)}\n`)
}
manifest('package.json', { workspaces: SERVED })
for (const ws of SERVED) manifest(join(ws, 'package.json'), {})
cpSync(join(src, 'package-lock.json'), join(app, 'package-lock.json'))
for (const ws of SERVED) {
  const dist = join(src, ws, 'dist')
  if (!existsSync(dist)) throw new Error(`${dist} missing: build first`)
  cpSync(dist, join(app, ws, 'dist'), {
    recursive: true,
    // Declarations and maps are for the library's users and editors, not for the service.
    filter: (p) => statSync(p).isDirectory() || !/\.(d\.ts|map|tsbuildinfo)$/.test(p),
  })
}
console.log(`[stage-runtime] ${rootfs} (node ${process.version}, loader ${loader}), ${app}`)
