// `npm run image`: builds the service's image (deploy/image/Containerfile) with podman or docker.
//
//   npm run image                          localhost/kunci/flash-sale:<version>, offline
//   npm run image -- --tag <name>          another name, e.g. your registry's
//   npm run image -- --build-image <ref>   the build stage on another Node.js image (the
//                                          Containerfile's default is the official node image)
//
// Without --build-image the build stage runs on the local base (local-base.mjs): these machines
// reach no image registry, and the local base needs only npm's registry. The runtime stage is
// FROM scratch either way. The host's CA bundle ($NODE_EXTRA_CA_CERTS, else Debian's) goes in as
// the `ca` build secret, for an egress proxy that re-signs TLS. Prints the image's name, size and
// id on stdout as JSON (deploy/test/image.test.ts reads it).
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { containerTool } from './container-tool.mjs'
import { localBase } from './local-base.mjs'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const VERSION = JSON.parse(
  readFileSync(new URL('../../apps/flash-sale/package.json', import.meta.url), 'utf8'),
).version
/** The name `npm run image` gives the image, and the manifests' default (deploy/src/k8s/config.ts). */
export const IMAGE = `localhost/kunci/flash-sale:${VERSION}`

export function buildImage({ tag = IMAGE, buildImage } = {}) {
  const tool = containerTool()
  const base = buildImage ?? localBase(tool)
  const ca = [process.env.NODE_EXTRA_CA_CERTS, '/etc/ssl/certs/ca-certificates.crt'].find(
    (f) => f && existsSync(f),
  )
  const started = Date.now()
  execFileSync(
    tool,
    [
      'build',
      '-f',
      'deploy/image/Containerfile',
      '--build-arg',
      `BUILD_IMAGE=${base}`,
      ...(ca ? ['--secret', `id=ca,src=${ca}`] : []),
      '-t',
      tag,
      '.',
    ],
    { cwd: ROOT, stdio: ['ignore', process.stderr, 'inherit'] },
  )
  const [inspected] = JSON.parse(execFileSync(tool, ['image', 'inspect', tag], { encoding: 'utf8' }))
  return {
    image: tag,
    id: String(inspected.Id),
    sizeBytes: Number(inspected.Size),
    buildSeconds: Math.round((Date.now() - started) / 1000),
    buildImage: base,
    tool,
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { tag: { type: 'string' }, 'build-image': { type: 'string' } } })
  const built = buildImage({ tag: values.tag, buildImage: values['build-image'] })
  console.error(
    `[kunci] built ${built.image}: ${(built.sizeBytes / 1e6).toFixed(0)} MB in ${built.buildSeconds} s`,
  )
  console.log(JSON.stringify(built))
}
