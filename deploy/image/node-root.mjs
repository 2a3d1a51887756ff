// The smallest root filesystem Node.js runs in: the node binary, the C libraries it links, a
// passwd and group naming uid and gid 1000 `kunci`, and /tmp. Shared by the runtime stage of the
// image (stage-runtime.mjs, inside the build stage) and the local build base (local-base.mjs, on
// the host). No shell, no ldd: the libraries are found by name in Debian's glibc folders.
import { chmodSync, copyFileSync, existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'

// What `ldd node` lists for the official linux binaries of Node.js 22 to 26 (libatomic: some
// releases only), and the dynamic loader.
const LIBS = ['libc.so.6', 'libm.so.6', 'libdl.so.2', 'libpthread.so.0', 'libstdc++.so.6', 'libgcc_s.so.1']
const OPTIONAL_LIBS = ['libatomic.so.1']
const LIB_DIRS = [
  '/lib/x86_64-linux-gnu',
  '/usr/lib/x86_64-linux-gnu',
  '/lib/aarch64-linux-gnu',
  '/usr/lib/aarch64-linux-gnu',
]
const LOADERS = ['/lib64/ld-linux-x86-64.so.2', '/lib/ld-linux-aarch64.so.1']

/** Copies `from` to `to` under `rootfs`, following symbolic links (the file itself, not the link). */
export function place(rootfs, from, to = from) {
  const target = join(rootfs, to)
  mkdirSync(dirname(target), { recursive: true })
  copyFileSync(from, target)
  chmodSync(target, statSync(from).mode & 0o755)
}

/** Lays out Node.js's root under `rootfs`, with `nodeBinary` as /usr/local/bin/node. */
export function nodeRoot(rootfs, nodeBinary) {
  place(rootfs, nodeBinary, '/usr/local/bin/node')
  for (const lib of [...LIBS, ...OPTIONAL_LIBS]) {
    const dir = LIB_DIRS.find((d) => existsSync(join(d, lib)))
    if (dir !== undefined) place(rootfs, join(dir, lib))
    else if (!OPTIONAL_LIBS.includes(lib)) throw new Error(`${lib} not found in ${LIB_DIRS.join(', ')}`)
  }
  const loader = LOADERS.find((l) => existsSync(l))
  if (loader === undefined) throw new Error(`no dynamic loader among ${LOADERS.join(', ')}`)
  place(rootfs, loader)
  mkdirSync(join(rootfs, 'etc'), { recursive: true })
  writeFileSync(
    join(rootfs, 'etc/passwd'),
    'root:x:0:0:root:/root:/sbin/nologin\nkunci:x:1000:1000:kunci:/app:/sbin/nologin\n',
  )
  writeFileSync(join(rootfs, 'etc/group'), 'root:x:0:\nkunci:x:1000:\n')
  // Name lookups read it; the container runtime mounts the real resolv.conf and hosts.
  writeFileSync(join(rootfs, 'etc/nsswitch.conf'), 'hosts: files dns\n')
  mkdirSync(join(rootfs, 'tmp'), { recursive: true })
  chmodSync(join(rootfs, 'tmp'), 0o1777)
  return { loader }
}
