// Installs Debian packages with apt-get when this process is root on a system that has it (our CI
// machines, a fresh Debian VM). Returns false without trying otherwise: the caller then prints the
// exact command for the user to run.
import { execFileSync, spawnSync } from 'node:child_process'

export function aptInstall(pkgs) {
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0
  if (!isRoot || spawnSync('apt-get', ['--version'], { stdio: 'ignore' }).status !== 0) return false
  console.error(`[kunci] installing ${pkgs.join(', ')} with apt-get…`)
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
  execFileSync('apt-get', ['update', '-q'], { stdio: 'inherit', env })
  execFileSync('apt-get', ['install', '-y', '-q', '--no-install-recommends', ...pkgs], {
    stdio: 'inherit',
    env,
  })
  return true
}
