import net from 'node:net'

/**
 * The PostgreSQL wire protocol on a raw socket, just enough to write chosen messages in a chosen
 * order: `pg` sends a query's Parse, Bind, Execute and Sync in one write, so through it the order
 * of two connections' messages at the server is luck; here the test decides it.
 */
export interface WireMessage {
  /** The one-letter type ('Z' ReadyForQuery, 'D' DataRow, 'E' ErrorResponse...). */
  type: string
  body: Buffer
}

const cstr = (s: string) => Buffer.from(`${s}\0`)
const int16 = (n: number) => {
  const b = Buffer.alloc(2)
  b.writeInt16BE(n)
  return b
}
const int32 = (n: number) => {
  const b = Buffer.alloc(4)
  b.writeInt32BE(n)
  return b
}
const message = (type: string, body: Buffer) =>
  Buffer.concat([Buffer.from(type), int32(4 + body.length), body])

export const wire = {
  startup: () => {
    const body = Buffer.concat([
      int32(196_608),
      cstr('user'),
      cstr('postgres'),
      cstr('database'),
      cstr('postgres'),
      Buffer.from([0]),
    ])
    return Buffer.concat([int32(4 + body.length), body])
  },
  /** Into the unnamed statement, the one a later Bind with no name uses. */
  parse: (sql: string) => message('P', Buffer.concat([cstr(''), cstr(sql), int16(0)])),
  /** The unnamed statement into the unnamed portal, no parameters, text results. */
  bind: () => message('B', Buffer.concat([cstr(''), cstr(''), int16(0), int16(0), int16(0)])),
  execute: () => message('E', Buffer.concat([cstr(''), int32(0)])),
  /** Asks the server to send what it has so far, without ending the unit of work as Sync does. */
  flush: () => message('H', Buffer.alloc(0)),
  sync: () => message('S', Buffer.alloc(0)),
}

export interface WireConnection {
  /** Writes the messages in one write and resolves once the socket has handed them to the kernel. */
  send(...messages: Buffer[]): Promise<void>
  /** The messages received up to and including the next of `type`, waiting for it up to `deadlineMs`. */
  until(type: string, deadlineMs?: number): Promise<WireMessage[]>
  close(): void
}

export async function wireConnect(port: number): Promise<WireConnection> {
  const socket = net.connect(port, '127.0.0.1')
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve)
    socket.once('error', reject)
  })
  let pending = Buffer.alloc(0)
  const received: WireMessage[] = []
  const listeners = new Set<() => void>()
  socket.on('data', (data: Buffer) => {
    pending = Buffer.concat([pending, data])
    while (pending.length >= 5 && pending.length >= 1 + pending.readInt32BE(1)) {
      const end = 1 + pending.readInt32BE(1)
      received.push({ type: String.fromCharCode(pending[0]!), body: pending.subarray(5, end) })
      pending = pending.subarray(end)
    }
    for (const l of listeners) l()
  })
  return {
    send: (...messages) =>
      new Promise((resolve, reject) =>
        socket.write(Buffer.concat(messages), (err) => (err ? reject(err) : resolve())),
      ),
    until: (type, deadlineMs = 20_000) =>
      new Promise((resolve, reject) => {
        const check = () => {
          const i = received.findIndex((m) => m.type === type)
          if (i === -1) return
          finish()
          resolve(received.splice(0, i + 1))
        }
        const timer = setTimeout(() => {
          finish()
          reject(
            new Error(
              `no '${type}' within ${deadlineMs} ms; received ${received.map((m) => m.type).join('')}`,
            ),
          )
        }, deadlineMs)
        const finish = () => {
          clearTimeout(timer)
          listeners.delete(check)
        }
        listeners.add(check)
        check()
      }),
    close: () => socket.destroy(),
  }
}

/** The text of each DataRow's first column (text format), and each ErrorResponse's message. */
export function answers(messages: WireMessage[]): { rows: string[]; errors: string[] } {
  const rows: string[] = []
  const errors: string[] = []
  for (const m of messages) {
    if (m.type === 'D' && m.body.readInt16BE(0) > 0) {
      const len = m.body.readInt32BE(2)
      rows.push(m.body.subarray(6, 6 + len).toString('utf8'))
    }
    if (m.type === 'E') {
      // Fields are a code byte then a C string; 'M' is the message.
      for (const field of m.body.toString('utf8').split('\0'))
        if (field.startsWith('M')) errors.push(field.slice(1))
    }
  }
  return { rows, errors }
}
