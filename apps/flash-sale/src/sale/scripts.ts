import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import type { ChainableCommander } from 'ioredis'
import type { RedisClient } from '../redis/connect.js'
import { isNoScript } from '../redis/redis-errors.js'

/** A Lua script of this service, read once; run by SHA with a fall-back to its source. */
export class SaleScript {
  readonly source: string
  readonly sha: string
  constructor(
    readonly name: string,
    readonly keyCount: number,
  ) {
    this.source = readFileSync(new URL(`./scripts/${name}.lua`, import.meta.url), 'utf8')
    this.sha = createHash('sha1').update(this.source).digest('hex')
  }

  async run(
    client: RedisClient,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<unknown> {
    try {
      return await client.evalsha(this.sha, this.keyCount, ...keys, ...args)
    } catch (err) {
      if (!isNoScript(err)) throw err
      return await client.eval(this.source, this.keyCount, ...keys, ...args)
    }
  }

  /** Queues the script on a pipeline; the caller retries with `useSource` on NOSCRIPT. */
  queue(
    pipeline: ChainableCommander,
    keys: readonly string[],
    args: readonly (string | number)[],
    useSource = false,
  ): ChainableCommander {
    return useSource
      ? pipeline.eval(this.source, this.keyCount, ...keys, ...args)
      : pipeline.evalsha(this.sha, this.keyCount, ...keys, ...args)
  }
}

export const SCRIPTS = {
  reserve: new SaleScript('reserve', 6),
  preload: new SaleScript('preload', 6),
  settle: new SaleScript('settle', 2),
  deadLetter: new SaleScript('dead-letter', 3),
  setStatus: new SaleScript('set-status', 1),
}
