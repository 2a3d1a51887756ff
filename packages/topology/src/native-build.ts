/**
 * topology's C helpers (native/*.c) are built once per machine into the temp dir with gcc, named
 * by a hash of their source so that an edited file is rebuilt and parallel processes share one
 * build. scripts/ensure-tools.mjs installs gcc.
 */
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, readFileSync, renameSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const built = new Map<string, string>()

/**
 * Path of `native/<name>.c` built as a shared library (`.so`, for LD_PRELOAD) or an executable.
 * Throws what `unavailable` makes when gcc is missing or fails.
 */
export function buildNative(
  name: string,
  kind: 'shared' | 'executable',
  unavailable: (message: string, options: ErrorOptions) => Error,
): string {
  const known = built.get(name)
  if (known) return known
  const source = readFileSync(new URL(`../native/${name}.c`, import.meta.url), 'utf8')
  const hash = createHash('sha256').update(source).digest('hex').slice(0, 12)
  const output = join(tmpdir(), `kunci-topology-${name}-${hash}${kind === 'shared' ? '.so' : ''}`)
  if (!existsSync(output)) {
    // Built beside its final name and renamed, so parallel test files never load half a file.
    const partial = `${output}.${process.pid}.tmp`
    const flags = kind === 'shared' ? ['-shared', '-fPIC'] : []
    try {
      execFileSync('gcc', ['-O2', ...flags, '-o', partial, '-x', 'c', '-'], {
        input: source,
        stdio: ['pipe', 'ignore', 'pipe'],
      })
    } catch (err) {
      throw unavailable(`cannot build ${name} with gcc (run \`node scripts/ensure-tools.mjs gcc\`)`, {
        cause: err,
      })
    }
    renameSync(partial, output)
  }
  built.set(name, output)
  return output
}
