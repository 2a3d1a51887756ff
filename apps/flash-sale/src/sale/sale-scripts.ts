import { readFileSync } from 'node:fs'
import { Script } from 'kunci'

/** The sale's scripts (sale/scripts/*.lua), run through kunci's Script (EVALSHA, EVAL on NOSCRIPT). */
const lua = (path: string) => readFileSync(new URL(`./scripts/${path}.lua`, import.meta.url), 'utf8')

export const saleScript = (name: string): Script => new Script(lua(name), { name })

/** A script that reads buyer records gets their one reader (scripts/lib/buyer-record.lua) in front. */
export const readingBuyers = (name: string): Script =>
  new Script(`${lua('lib/buyer-record')}\n${lua(name)}`, { name })
