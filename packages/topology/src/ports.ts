import { createServer } from 'node:net'
import { PortUnavailableError } from './errors.js'

// redis-server ports are picked at random below the kernel's ephemeral range (32768+ on
// Linux), so the port of a stopped node is not taken by some outgoing connection before the
// node restarts on it. A cluster node also needs port + 10000 for its bus, which stays < 42768.
const MIN_PORT = 20_000
const MAX_PORT = 32_000
const MAX_ATTEMPTS = 200

// Ports handed out by this process: two nodes starting at once must not get the same one
// (the port is checked free, then released, then bound by redis-server a moment later).
const handedOut = new Set<number>()

function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer()
    server.unref()
    server.once('error', () => resolve(false))
    server.listen({ port, host: '127.0.0.1', exclusive: true }, () => server.close(() => resolve(true)))
  })
}

export interface FindPortOptions {
  /** Also require port + 10000 (the default Redis Cluster bus port) to be free. */
  withBusPort?: boolean
}

/** A port on 127.0.0.1 that is free right now and was not handed out before by this process. */
export async function findFreePort(opts: FindPortOptions = {}): Promise<number> {
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const port = MIN_PORT + Math.floor(Math.random() * (MAX_PORT - MIN_PORT))
    if (handedOut.has(port)) continue
    if (!(await canBind(port))) continue
    if (opts.withBusPort && !(await canBind(port + 10_000))) continue
    handedOut.add(port)
    return port
  }
  throw new PortUnavailableError(MAX_ATTEMPTS)
}
