// Which container tool builds and runs the image: $CONTAINER_TOOL if set, else podman, else
// docker (a client that reaches an engine). When neither works and we are root on Debian, podman,
// buildah and runc are installed with apt-get (as scripts/ensure-tools.mjs does for the other
// tools); otherwise the exact command is printed and the process exits 1. Never a skip.
//
// Podman here needs two settings, written to /etc/containers/containers.conf when that file does
// not exist (and printed when it exists without them):
//   runtime = "runc"        crun, podman's default, fails on this kernel's cgroups
//   default_ulimits = []    podman's default nofile limit is refused by setrlimit in this sandbox
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { aptInstall } from '../../scripts/apt-install.mjs'

const CONF = '/etc/containers/containers.conf'
const CONF_TEXT = `# Written by kunci's deploy/image/container-tool.mjs (see docs/operations.md, "The image").
[containers]
default_ulimits = []

[engine]
runtime = "runc"
`
const PACKAGES = ['podman', 'buildah', 'runc']

const works = (bin, args) => spawnSync(bin, args, { stdio: 'ignore' }).status === 0
const isRoot = () => typeof process.getuid === 'function' && process.getuid() === 0

function ensurePodmanConf() {
  if (!existsSync(CONF)) {
    if (!isRoot()) return
    mkdirSync('/etc/containers', { recursive: true })
    writeFileSync(CONF, CONF_TEXT)
    console.error(`[kunci] wrote ${CONF} (runtime runc, no default ulimits)`)
    return
  }
  const text = readFileSync(CONF, 'utf8')
  if (!/default_ulimits\s*=\s*\[\s*\]/.test(text) || !/runtime\s*=\s*"runc"/.test(text))
    console.error(
      `[kunci] ${CONF} exists without default_ulimits = [] or runtime = "runc"; if containers fail to start here, add:\n${CONF_TEXT}`,
    )
}

/** The tool's name ('podman' or 'docker'), ready to build and run containers. */
export function containerTool() {
  const wanted = process.env.CONTAINER_TOOL
  if (wanted) {
    if (!works(wanted, ['info']))
      throw new Error(`CONTAINER_TOOL=${wanted} does not answer \`${wanted} info\``)
    if (wanted === 'podman') ensurePodmanConf()
    return wanted
  }
  if (works('podman', ['--version'])) {
    ensurePodmanConf()
    return 'podman'
  }
  if (works('docker', ['info'])) return 'docker'
  if (aptInstall(PACKAGES)) {
    ensurePodmanConf()
    if (works('podman', ['--version'])) return 'podman'
  }
  console.error(
    '[kunci] no container tool: neither podman nor a docker engine answers.\n' +
      `  Debian/Ubuntu: sudo apt-get update && sudo apt-get install -y ${PACKAGES.join(' ')}\n` +
      `  then, for podman as root on a host like ours, ${CONF}:\n${CONF_TEXT}` +
      'Then run the command again.',
  )
  process.exit(1)
}

/** Whether `tool` has `image` locally (no pull). */
export function imageExists(tool, image) {
  return spawnSync(tool, ['image', 'inspect', image], { stdio: 'ignore' }).status === 0
}
