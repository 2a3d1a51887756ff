import type { PGlite } from '@electric-sql/pglite'

/** Protocol message types that end a unit of work for the client (Sync, simple Query, Terminate). */
const SYNC = 0x53
const QUERY = 0x51
const TERMINATE = 0x58

interface Item {
  handlerId: number
  message: Uint8Array
  onData: (data: Uint8Array) => void
  resolve: (bytes: number) => void
  reject: (err: unknown) => void
}

/**
 * Replaces pglite-socket's query queue, which interleaves the protocol messages of different
 * connections one message at a time outside transactions. With the extended protocol a query is
 * Parse, Bind, Describe, Execute, Sync: interleaved, one connection's Bind meets another's unnamed
 * statement ("unnamed prepared statement does not exist") or runs it. This queue gives PGlite to
 * one connection from its first message until a Sync or a simple Query completes outside a
 * transaction (and for the whole of a transaction), the way a real server keeps sessions apart.
 */
export class SessionQueue {
  readonly #db: PGlite
  #queue: Item[] = []
  #owner: number | null = null
  #processing = false

  constructor(db: PGlite) {
    this.#db = db
  }

  getQueueLength(): number {
    return this.#queue.length
  }

  enqueue(handlerId: number, message: Uint8Array, onData: (data: Uint8Array) => void): Promise<number> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ handlerId, message, onData, resolve, reject })
      void this.#process()
    })
  }

  async #process(): Promise<void> {
    if (this.#processing) return
    this.#processing = true
    try {
      while (this.#queue.length > 0) {
        const i = this.#owner === null ? 0 : this.#queue.findIndex((q) => q.handlerId === this.#owner)
        if (i === -1) return // the owner's next message has not arrived yet; enqueue() resumes us
        const item = this.#queue.splice(i, 1)[0]!
        this.#owner = item.handlerId
        let bytes = 0
        try {
          await this.#db.runExclusive(() =>
            this.#db.execProtocolRawStream(item.message, {
              onRawData: (data: Uint8Array) => {
                bytes += data.length
                item.onData(data)
              },
            }),
          )
        } catch (err) {
          this.#owner = null
          item.reject(err)
          continue
        }
        const type = item.message[0]
        // A startup packet starts with its length (type byte 0): it is a unit on its own.
        const endsUnit = type === SYNC || type === QUERY || type === TERMINATE || type === 0
        if (endsUnit && !this.#db.isInTransaction()) this.#owner = null
        item.resolve(bytes)
      }
    } finally {
      this.#processing = false
    }
  }

  clearQueueForHandler(handlerId: number): void {
    this.#queue = this.#queue.filter((q) => {
      if (q.handlerId !== handlerId) return true
      q.reject(new Error('connection closed'))
      return false
    })
  }

  /** A connection went away: roll back what it left open and let the others go on. */
  async clearTransactionIfNeeded(handlerId: number): Promise<void> {
    if (this.#owner !== handlerId) return
    if (this.#db.isInTransaction()) await this.#db.exec('ROLLBACK')
    this.#owner = null
    await this.#process()
  }
}
