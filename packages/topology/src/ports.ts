import { createServer, type Server } from 'node:net'
import { PortUnavailableError } from './errors.js'

// redis-server ports are picked at random below the kernel's ephemeral range (32768+ on
// Linux), so the port of a stopped node is not taken by some outgoing connection before the
// node restarts on it. A cluster node also needs port + 10000 for its bus (30000-40000): no
// server port is ever picked there, so a bus port is not handed to another node while its own
// node is down.
const MIN_PORT = 20_000
const MAX_PORT = 30_000
const MAX_ATTEMPTS = 200

// A port handed out stays reserved for as long as the process that took it lives, across
// processes too: vitest runs test files in several processes, and a node killed by a chaos step
// frees its port for the seconds it is down. Without a shared reservation another process could
// pick that port, start its own redis-server there, and the restarted node would find the port
// taken while its PING was answered by the stranger (CI saw "CLUSTER ... cluster support
// disabled" from exactly that). The reservation is a listening socket on a companion port, so
// the kernel drops it when the process dies, however it dies; no lock file can go stale.
// Companions sit at port + 25000 (45000-55000): above every server and bus port we hand out.
const COMPANION_OFFSET = 25_000

// Ports handed out by this process: two nodes starting at once must not get the same one
// (the port is checked free, then released, then bound by redis-server a moment later).
const handedOut = new Map<number, Server>()

function listen(port: number): Promise<Server | undefined> {
  return new Promise((resolve) => {
    const server = createServer()
    server.unref()
    server.once('error', () => resolve(undefined))
    server.listen({ port, host: '127.0.0.1', exclusive: true }, () => resolve(server))
  })
}

async function canBind(port: number): Promise<boolean> {
  const server = await listen(port)
  if (!server) return false
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return true
}

export interface FindPortOptions {
  /** Also require port + 10000 (the default Redis Cluster bus port) to be free. */
  withBusPort?: boolean
}

/**
 * A port on 127.0.0.1 that is free right now and is not reserved by this or any other process
 * using this function; it stays reserved until this process exits.
 */
export async function findFreePort(opts: FindPortOptions = {}): Promise<number> {
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const port = MIN_PORT + Math.floor(Math.random() * (MAX_PORT - MIN_PORT))
    if (handedOut.has(port)) continue
    // The companion first: once we hold it, no other process will try this port.
    const reservation = await listen(port + COMPANION_OFFSET)
    if (!reservation) continue
    if (!(await canBind(port)) || (opts.withBusPort && !(await canBind(port + 10_000)))) {
      reservation.close()
      continue
    }
    handedOut.set(port, reservation)
    return port
  }
  throw new PortUnavailableError(MAX_ATTEMPTS)
}

/** Ends the reservation of a port from findFreePort, once nothing will bind it again. */
export function releasePort(port: number): void {
  handedOut.get(port)?.close()
  handedOut.delete(port)
}
