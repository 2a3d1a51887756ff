#!/usr/bin/env node
// Makes sure the optional Debian tools that some tests and `flash-sale-lab up --observe` use are on
// this machine: promtool/prometheus (package prometheus), redis_exporter (package
// prometheus-redis-exporter), chromium (package chromium, for the report's browser check),
// iptables (package iptables, for real network partitions: @kunci/topology startNetworkFaults), spin
// (package spin: the lock protocol's model, packages/kunci/model/) and gcc (package gcc: spin's
// verifiers, and topology's steppable wall clock for redis-server, packages/topology/native/) and
// wrk (package wrk: the checkout bench's C load generator, bench/checkout/wrk.ts), podman and runc
// (the service's image, deploy/image/).
// Installs the missing ones with apt-get when we are root on a Debian-like system; otherwise
// prints the exact command and exits 1.
//
//   node scripts/ensure-tools.mjs                 all of them but wrk (the benchmarks name it)
//   node scripts/ensure-tools.mjs promtool        only what is named
import { spawnSync } from 'node:child_process'
import { aptInstall } from './apt-install.mjs'

const TOOLS = {
  promtool: { bin: 'promtool', pkg: 'prometheus' },
  prometheus: { bin: 'prometheus', pkg: 'prometheus' },
  redis_exporter: { bin: 'prometheus-redis-exporter', pkg: 'prometheus-redis-exporter' },
  chromium: { bin: 'chromium', pkg: 'chromium' },
  iptables: { bin: 'iptables', pkg: 'iptables' },
  spin: { bin: 'spin', pkg: 'spin' },
  gcc: { bin: 'gcc', pkg: 'gcc' },
  // The service's image (deploy/image/, built and run by deploy/test/integration/image.test.ts):
  // podman, and runc as its runtime (crun, podman's default, fails on some kernels' cgroups).
  podman: { bin: 'podman', pkg: 'podman' },
  runc: { bin: 'runc', pkg: 'runc' },
  // Only when named: no test needs it, so `npm test` must not ask for it.
  wrk: { bin: 'wrk', pkg: 'wrk', onlyWhenNamed: true },
}

const has = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' }).status === 0
const wanted =
  process.argv.length > 2
    ? process.argv.slice(2)
    : Object.keys(TOOLS).filter((name) => !TOOLS[name].onlyWhenNamed)
for (const name of wanted) {
  if (!TOOLS[name]) {
    console.error(`[kunci] unknown tool ${name}; known: ${Object.keys(TOOLS).join(', ')}`)
    process.exit(2)
  }
}
const missing = wanted.filter((name) => !has(TOOLS[name].bin))
const pkgs = [...new Set(missing.map((name) => TOOLS[name].pkg))]
if (pkgs.length > 0) {
  aptInstall(pkgs)
  const still = wanted.filter((name) => !has(TOOLS[name].bin))
  if (still.length > 0) {
    const need = [...new Set(still.map((name) => TOOLS[name].pkg))].join(' ')
    console.error(
      `[kunci] missing: ${still.join(', ')}.\n` +
        `  Debian/Ubuntu: sudo apt-get update && sudo apt-get install -y ${need}\n` +
        'Then run the command again.',
    )
    process.exit(1)
  }
}
// podman's settings for hosts like ours (runc, no default ulimits): written when missing.
if (wanted.includes('podman')) {
  const { containerTool } = await import('../deploy/image/container-tool.mjs')
  containerTool()
}
if (!process.env.KUNCI_QUIET) console.error(`[kunci] tools present: ${wanted.join(', ')}`)
