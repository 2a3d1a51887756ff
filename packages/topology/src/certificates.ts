import { execFile } from 'node:child_process'
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { NodeStartError } from './errors.js'

const run = promisify(execFile)

/**
 * The certificates of one TLS topology, generated into its directory (and removed with it): a
 * throw-away CA, a server certificate every node presents (also as a client, to each other on the
 * cluster bus and for replication), and a client certificate for clients when `authClients` asks
 * for one. The PEM texts are loaded once, ready for node:tls / ioredis `tls: { ca, cert, key }`.
 */
export interface TopologyTls {
  readonly caFile: string
  /** The CA's key: signs a certificate per node address with `distinctHosts` (nodeCertificate). */
  readonly caKeyFile: string
  readonly certFile: string
  readonly keyFile: string
  readonly clientCertFile: string
  readonly clientKeyFile: string
  /** PEM of caFile. */
  readonly ca: string
  /** PEM of clientCertFile / clientKeyFile. */
  readonly clientCert: string
  readonly clientKey: string
}

/** 30 days: long enough for a demo left running, short enough that a leaked CA expires. */
const DAYS = '30'
// P-256 keys: generated in milliseconds, where RSA 2048 takes a noticeable part of a test's start.
const KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']

async function openssl(args: string[]): Promise<void> {
  try {
    await run('openssl', args)
  } catch (err) {
    const detail = (err as { stderr?: string }).stderr?.trim() || (err as Error).message
    throw new NodeStartError('tls', 0, `openssl ${args[0]} failed (is openssl on PATH?): ${detail}`, {
      cause: err,
    })
  }
}

interface Ca {
  caFile: string
  caKeyFile: string
}

async function signedBy(
  ca: Ca,
  dir: string,
  request: { name: string; subject: string; extensions: string[] },
): Promise<void> {
  const { name, subject, extensions } = request
  const ext = join(dir, `${name}.ext`)
  writeFileSync(ext, `${extensions.join('\n')}\n`)
  await openssl([
    'req',
    '-new',
    ...KEY,
    '-keyout',
    join(dir, `${name}.key`),
    '-out',
    join(dir, `${name}.csr`),
    '-subj',
    subject,
  ])
  await openssl([
    'x509',
    '-req',
    '-in',
    join(dir, `${name}.csr`),
    '-CA',
    ca.caFile,
    '-CAkey',
    ca.caKeyFile,
    '-set_serial',
    String(Date.now()),
    '-days',
    DAYS,
    '-extfile',
    ext,
    '-out',
    join(dir, `${name}.crt`),
  ])
  chmodSync(join(dir, `${name}.key`), 0o600)
}

function serverExtensions(subjectAltName: string): string[] {
  return [
    'basicConstraints=CA:FALSE',
    'keyUsage=critical,digitalSignature,keyEncipherment',
    // clientAuth too: a node presents this certificate when it connects to another node.
    'extendedKeyUsage=serverAuth,clientAuth',
    `subjectAltName=${subjectAltName}`,
  ]
}

/**
 * A server certificate for one node address (`distinctHosts`), signed by the topology's CA into
 * `dir`, made once per address and reused across restarts.
 */
export async function nodeCertificate(
  tls: TopologyTls,
  dir: string,
  ip: string,
): Promise<{ certFile: string; keyFile: string }> {
  const name = `server-${ip}`
  const files = { certFile: join(dir, `${name}.crt`), keyFile: join(dir, `${name}.key`) }
  if (existsSync(files.certFile) && existsSync(files.keyFile)) return files
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  await signedBy(tls, dir, {
    name,
    subject: `/CN=${ip}`,
    // localhost as well, so a client that names the server `localhost` (SNI) still accepts it.
    extensions: serverExtensions(`IP:${ip},DNS:localhost`),
  })
  return files
}

/**
 * Generates the CA, server and client certificates into `dir` (created if missing). Exported so
 * that a caller can give several topologies one CA (`tls: { certificates }`); the caller then
 * removes `dir`.
 */
export async function generateCertificates(dir: string): Promise<TopologyTls> {
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  await openssl([
    'req',
    '-x509',
    ...KEY,
    '-keyout',
    join(dir, 'ca.key'),
    '-out',
    join(dir, 'ca.crt'),
    '-days',
    DAYS,
    '-subj',
    '/CN=kunci-topology local CA',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ])
  chmodSync(join(dir, 'ca.key'), 0o600)
  const ca = { caFile: join(dir, 'ca.crt'), caKeyFile: join(dir, 'ca.key') }
  // Nodes are reached as 127.0.0.1 (what CLUSTER SLOTS announces) or localhost.
  await signedBy(ca, dir, {
    name: 'server',
    subject: '/CN=localhost',
    extensions: serverExtensions('IP:127.0.0.1,DNS:localhost'),
  })
  await signedBy(ca, dir, {
    name: 'client',
    subject: '/CN=kunci-client',
    extensions: [
      'basicConstraints=CA:FALSE',
      'keyUsage=critical,digitalSignature,keyEncipherment',
      'extendedKeyUsage=clientAuth',
    ],
  })
  const tls = {
    ...ca,
    certFile: join(dir, 'server.crt'),
    keyFile: join(dir, 'server.key'),
    clientCertFile: join(dir, 'client.crt'),
    clientKeyFile: join(dir, 'client.key'),
  }
  return {
    ...tls,
    ca: readFileSync(tls.caFile, 'utf8'),
    clientCert: readFileSync(tls.clientCertFile, 'utf8'),
    clientKey: readFileSync(tls.clientKeyFile, 'utf8'),
  }
}

/**
 * redis-server arguments for TLS, besides the ports (ManagedNode sets `port 0` and `tls-port`, as
 * the port may change before the first start).
 */
export function tlsServerArgs(tls: TopologyTls, authClients: boolean, cluster: boolean): string[] {
  const args = [
    '--tls-cert-file',
    tls.certFile,
    '--tls-key-file',
    tls.keyFile,
    '--tls-ca-cert-file',
    tls.caFile,
    '--tls-auth-clients',
    authClients ? 'yes' : 'no',
    '--tls-replication',
    'yes',
  ]
  if (cluster) args.push('--tls-cluster', 'yes')
  return args
}
