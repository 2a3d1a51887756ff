import { connect, type Socket } from 'node:net'
import { connect as connectTls } from 'node:tls'
import { ClusterCommandError, TopologyTimeoutError } from './errors.js'

// A tiny one-shot RESP2 client for management commands (PING, CLUSTER ..., MIGRATE). The
// topology package talks to nodes that may be down, paused or still loading, and it must not
// pull a client library (with reconnect and offline-queue behaviour) into that.

export interface NodeAddress {
  host: string
  port: number
  /** With a password: `AUTH username password` (an ACL user) instead of `AUTH password`. */
  username?: string | undefined
  password?: string | undefined
  /** Speak TLS, trusting `ca`; `clientCert`/`clientKey` are presented when given. */
  tls?: { ca: string; clientCert?: string; clientKey?: string } | undefined
}

function open(node: NodeAddress): { socket: Socket; ready: 'connect' | 'secureConnect' } {
  if (!node.tls) return { socket: connect({ host: node.host, port: node.port }), ready: 'connect' }
  const socket = connectTls({
    host: node.host,
    port: node.port,
    ca: node.tls.ca,
    cert: node.tls.clientCert,
    key: node.tls.clientKey,
  })
  return { socket, ready: 'secureConnect' }
}

/** A `-ERR ...` reply: kept as a value so a caller can tell it apart from a transport failure. */
export class RespErrorReply {
  constructor(readonly message: string) {}
}

export type RespValue = string | number | null | RespErrorReply | RespValue[]

type Parsed = { value: RespValue; next: number } | undefined

function parse(buf: Buffer, at: number): Parsed {
  const eol = buf.indexOf('\r\n', at)
  if (eol < 0) return undefined
  const type = String.fromCharCode(buf[at]!)
  const line = buf.toString('utf8', at + 1, eol)
  const after = eol + 2
  switch (type) {
    case '+':
      return { value: line, next: after }
    case '-':
      return { value: new RespErrorReply(line), next: after }
    case ':':
      return { value: Number(line), next: after }
    case '$': {
      const len = Number(line)
      if (len < 0) return { value: null, next: after }
      if (buf.length < after + len + 2) return undefined
      return { value: buf.toString('utf8', after, after + len), next: after + len + 2 }
    }
    case '*': {
      const count = Number(line)
      if (count < 0) return { value: null, next: after }
      const items: RespValue[] = []
      let next = after
      for (let i = 0; i < count; i++) {
        const item = parse(buf, next)
        if (!item) return undefined
        items.push(item.value)
        next = item.next
      }
      return { value: items, next }
    }
    default:
      throw new Error(`unexpected RESP type byte ${JSON.stringify(type)}`)
  }
}

function encode(args: readonly (string | number)[]): string {
  let out = `*${args.length}\r\n`
  for (const arg of args) {
    const s = String(arg)
    out += `$${Buffer.byteLength(s)}\r\n${s}\r\n`
  }
  return out
}

/**
 * Sends the commands on one fresh connection (TLS when asked; after AUTH when the node has a password) and
 * returns one reply per command. Error replies come back as RespErrorReply values; a refused,
 * reset or silent connection rejects.
 */
export function sendCommands(
  node: NodeAddress,
  commands: readonly (readonly (string | number)[])[],
  timeoutMs = 5_000,
): Promise<RespValue[]> {
  const auth = node.username === undefined ? ['AUTH', node.password] : ['AUTH', node.username, node.password]
  const all = node.password ? [auth as string[], ...commands] : commands
  return new Promise((resolve, reject) => {
    const { socket, ready } = open(node)
    let buf = Buffer.alloc(0)
    let offset = 0
    const replies: RespValue[] = []
    const timer = setTimeout(() => {
      socket.destroy()
      reject(new TopologyTimeoutError(`reply from ${node.host}:${node.port}`, timeoutMs))
    }, timeoutMs)
    const fail = (err: Error) => {
      clearTimeout(timer)
      socket.destroy()
      reject(err)
    }
    socket.on('error', fail)
    socket.on('close', () => fail(new Error(`connection to ${node.host}:${node.port} closed`)))
    socket.on(ready, () => socket.write(all.map(encode).join('')))
    socket.on('data', (chunk) => {
      buf = offset > 0 ? Buffer.concat([buf.subarray(offset), chunk]) : Buffer.concat([buf, chunk])
      offset = 0
      for (let item = parse(buf, offset); item; item = parse(buf, offset)) {
        replies.push(item.value)
        offset = item.next
      }
      if (replies.length < all.length) return
      clearTimeout(timer)
      socket.removeAllListeners('close')
      socket.destroy()
      resolve(node.password ? replies.slice(1) : replies)
    })
  })
}

/** One command; an error reply throws ClusterCommandError. */
export async function sendCommand(
  node: NodeAddress,
  args: readonly (string | number)[],
  timeoutMs?: number,
): Promise<RespValue> {
  const [reply] = await sendCommands(node, [args], timeoutMs)
  if (reply instanceof RespErrorReply)
    throw new ClusterCommandError(node.port, String(args[0]), reply.message)
  return reply ?? null
}

/** True when the node answers PONG (not LOADING, not refused) within timeoutMs. */
export async function ping(node: NodeAddress, timeoutMs = 1_000): Promise<boolean> {
  try {
    const [reply] = await sendCommands(node, [['PING']], timeoutMs)
    return reply === 'PONG'
  } catch {
    return false
  }
}
