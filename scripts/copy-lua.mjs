// Copies every *.lua file (and *.sql migrations) from a source tree to the same place in the
// build tree: tsc only emits .js, and these are loaded beside their module at run time.
import { cpSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'

const COPIED = ['.lua', '.sql']
const [from, to] = process.argv.slice(2)
if (!from || !to) throw new Error('usage: copy-lua.mjs <srcDir> <outDir>')
function walk(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) walk(path)
    else if (COPIED.some((ext) => name.endsWith(ext))) cpSync(path, join(to, path.slice(from.length)))
  }
}
walk(from)
