/**
 * Writes everything generated under deploy/: the Kubernetes YAML of each environment, the
 * Prometheus rules and scrape config, and the Grafana dashboard. A test renders the same in
 * memory and fails when the committed files differ, so run this after every change in deploy/src.
 *
 *   npm run deploy:render [-- --image kunci/flash-sale:0.2.0]   (the image goes into both envs)
 */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { renderAll } from './render-all.js'

const DEPLOY_DIR = fileURLToPath(new URL('..', import.meta.url))

const { values } = parseArgs({ options: { image: { type: 'string' } } })
const files = renderAll(values.image === undefined ? {} : { image: values.image })
for (const env of ['k8s/dev', 'k8s/prod']) {
  // Remove files of objects that no longer exist.
  const dir = join(DEPLOY_DIR, env)
  mkdirSync(dir, { recursive: true })
  for (const f of readdirSync(dir)) if (!files.has(`${env}/${f}`)) rmSync(join(dir, f))
}
for (const [path, text] of files) {
  mkdirSync(dirname(join(DEPLOY_DIR, path)), { recursive: true })
  writeFileSync(join(DEPLOY_DIR, path), text)
}
console.log(`wrote ${files.size} files under ${DEPLOY_DIR}`)
