#!/usr/bin/env node
// Makes sure redis-server and redis-cli are on this machine before the demo, tests or
// benchmarks start their own nodes. Installs them with apt-get when we are root on a
// Debian-like system; otherwise stops with the exact command to run.
import { execFileSync, spawnSync } from 'node:child_process'

// SET ... GET (used by the lock scripts) needs Redis 6.2.
const MIN = [6, 2]

function version() {
  const r = spawnSync('redis-server', ['--version'], { encoding: 'utf8' })
  if (r.status !== 0) return null
  const m = /v=(\d+)\.(\d+)\.(\d+)/.exec(r.stdout)
  return m ? { major: Number(m[1]), minor: Number(m[2]), text: m[0].slice(2) } : null
}
function has(cmd) {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' }).status === 0
}

let v = version()
if (!v || !has('redis-cli')) {
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0
  if (isRoot && has('apt-get')) {
    console.error('[kunci] redis-server not found: installing it with apt-get (Debian package redis-server)…')
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
    execFileSync('apt-get', ['update', '-q'], { stdio: 'inherit', env })
    execFileSync(
      'apt-get',
      ['install', '-y', '-q', '--no-install-recommends', 'redis-server', 'redis-tools'],
      {
        stdio: 'inherit',
        env,
      },
    )
    // The Debian package starts a service on 6379; ours start their own nodes on free ports,
    // so leave that service alone rather than stopping something the machine may rely on.
    v = version()
  }
  if (!v || !has('redis-cli')) {
    console.error(
      '[kunci] redis-server and redis-cli are required (Redis >= 6.2, 7.x recommended).\n' +
        '  Debian/Ubuntu: sudo apt-get update && sudo apt-get install -y redis-server redis-tools\n' +
        '  macOS:         brew install redis\n' +
        'Then run the command again.',
    )
    process.exit(1)
  }
}
if (v.major < MIN[0] || (v.major === MIN[0] && v.minor < MIN[1])) {
  console.error(`[kunci] redis-server ${v.text} is too old: Redis >= 6.2 is required (7.x recommended).`)
  process.exit(1)
}
if (!process.env.KUNCI_QUIET) console.error(`[kunci] using redis-server ${v.text}`)
