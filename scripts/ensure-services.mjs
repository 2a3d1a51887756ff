#!/usr/bin/env node
// Makes sure the services the integration tests use are reachable before `npm test` starts:
// PostgreSQL (TEST_PG_URL, else 127.0.0.1:5432, user postgres, trust) and RabbitMQ (TEST_AMQP_URL,
// else amqp://guest:guest@127.0.0.1:5672). The tests require them (none skips); a machine without
// them stops here with the commands that install and start them, instead of 40 failures later.
import { connect } from 'node:net'

const SERVICES = [
  {
    name: 'PostgreSQL',
    url: process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
    port: 5432,
    env: 'TEST_PG_URL',
    install:
      "sudo apt-get install -y postgresql && sudo service postgresql start\n    (user postgres, 'trust' for 127.0.0.1 in pg_hba.conf)",
  },
  {
    name: 'RabbitMQ',
    url: process.env.TEST_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672',
    port: 5672,
    env: 'TEST_AMQP_URL',
    install: 'sudo apt-get install -y rabbitmq-server && sudo service rabbitmq-server start',
  },
]

/** True when a TCP connection to the URL's host and port opens within 3 s. */
function reachable(url, defaultPort) {
  const u = new URL(url)
  return new Promise((resolve) => {
    const socket = connect({ host: u.hostname || '127.0.0.1', port: Number(u.port || defaultPort) })
    const done = (ok) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(3_000, () => done(false))
    socket.once('connect', () => done(true))
    socket.once('error', () => done(false))
  })
}

const missing = []
for (const s of SERVICES) if (!(await reachable(s.url, s.port))) missing.push(s)
if (missing.length > 0) {
  for (const s of missing)
    console.error(
      `[kunci] ${s.name} is not reachable at ${s.url} (set ${s.env} for another server).\n` +
        `  Debian/Ubuntu: ${s.install}`,
    )
  console.error('Then run the command again.')
  process.exit(1)
}
if (!process.env.KUNCI_QUIET)
  console.error(`[kunci] services reachable: ${SERVICES.map((s) => s.name).join(', ')}`)
