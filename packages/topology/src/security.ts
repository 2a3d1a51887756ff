// Who may talk to a topology's nodes, resolved once for startNodes and startCluster.
//
// Two ways to require a login:
// - `password` (the original one): requirepass for the `default` user (and masterauth in a
//   cluster). Every existing caller uses it; unchanged.
// - `adminUser`: the `default` user is switched off (`user default off resetpass ~* &* +@all`: a
//   connection without credentials gets NOAUTH, `AUTH default …` gets WRONGPASS; the permissions
//   are for the AOF's replay, see DEFAULT_USER_LINE) and a named admin user with every
//   permission is created; topology logs in as it for its own management connections. Replicas
//   log in as a replication user that may run only PSYNC, REPLCONF and PING (`masteruser` +
//   `masterauth`), so the password a replica holds opens nothing else.
// The lines that carry passwords go into a redis.conf written with mode 0600 in the node's data
// dir instead of the command line, which every local user can read in `ps`.
import { randomBytes } from 'node:crypto'
import type { TopologyTls } from './certificates.js'
import { InvalidOptionError } from './errors.js'

export interface AdminUserOptions {
  /** @defaultValue 'kunci-admin' */
  username?: string
  /** @defaultValue 24 random bytes, base64url */
  password?: string
  /**
   * The rules of the `user default …` line. They must keep the user off and without a password
   * (`off`; no `on`, `nopass`, `>…`, `#…`); e.g. `'off'` alone reproduces the AOF bug of
   * DEFAULT_USER_LINE's comment, or a test runs a manifest's own line.
   * @defaultValue 'off resetpass ~* &* +@all' (DEFAULT_USER_LINE)
   */
  defaultUserRules?: string
}

export interface TlsOptions {
  /**
   * `tls-auth-clients yes`: clients must also present a certificate signed by the topology's CA
   * (`tls.clientCert`/`clientKey`). Off by default: clients authenticate with ACL passwords and
   * TLS gives them encryption and the server's identity; mutual TLS is a second factor a user can
   * turn on. @defaultValue false
   */
  authClients?: boolean
  /**
   * Certificates made by generateCertificates(), e.g. to give a cluster and a node set one CA.
   * @defaultValue generated into the topology's directory
   */
  certificates?: TopologyTls
}

export const DEFAULT_ADMIN_USERNAME = 'kunci-admin'
/**
 * The `default` user of an `adminUser` topology: off (no login, no password) but with every
 * permission, which the AOF's MULTI … EXEC blocks need when they are replayed at start-up.
 */
export const DEFAULT_USER_LINE = 'user default off resetpass ~* &* +@all'
/** The user replicas log in as (masteruser). */
export const REPLICATION_USERNAME = 'kunci-replication'

export interface ResolvedSecurity {
  /** How topology (and a test's own admin client) logs in. */
  username: string | undefined
  password: string | undefined
  /** redis.conf lines holding secrets (requirepass, user …, masterauth). */
  confLines: string[]
  /** undefined: plain TCP. */
  tls: { authClients: boolean; certificates: TopologyTls | undefined } | undefined
}

const USERNAME = /^[A-Za-z0-9_.:-]{1,64}$/

/** A redis.conf argument in double quotes (sdssplitargs rules: \\ and \" escaped). */
function quote(value: string): string {
  return `"${value.replace(/[\\"]/g, (c) => `\\${c}`)}"`
}

function checkSecret(option: string, value: string): void {
  if (value === '') throw new InvalidOptionError(option, 'must not be empty')
  // A line break would end the redis.conf line and let the rest be read as a directive.
  if (/[\r\n\0]/.test(value)) throw new InvalidOptionError(option, 'must not contain line breaks or NUL')
}

/** adminUser.defaultUserRules: the default user stays off, with no way to log in as it. */
function checkDefaultRules(rules: string): string {
  const tokens = rules.trim().split(/\s+/)
  const opens = tokens.find((t) => t === 'on' || t === 'nopass' || t.startsWith('>') || t.startsWith('#'))
  if (!tokens.includes('off') || opens !== undefined || /[\r\n\0]/.test(rules)) {
    throw new InvalidOptionError(
      'adminUser.defaultUserRules',
      `must keep the default user off and without a password (include 'off'; no 'on', 'nopass', '>…', '#…'), got '${rules}'`,
    )
  }
  return tokens.join(' ')
}

const generated = () => randomBytes(24).toString('base64url')

export function resolveSecurity(input: {
  password?: string | undefined
  adminUser?: AdminUserOptions | boolean | undefined
  tls?: TlsOptions | boolean | undefined
  /** Add masterauth for the `password` mode (cluster replicas); admin mode always configures replication. */
  replication: boolean
}): ResolvedSecurity {
  const tlsInput = input.tls === true ? {} : input.tls || undefined
  const tls = tlsInput && {
    authClients: tlsInput.authClients ?? false,
    certificates: tlsInput.certificates,
  }
  if (input.adminUser === undefined || input.adminUser === false) {
    if (input.password === undefined) return { username: undefined, password: undefined, confLines: [], tls }
    checkSecret('password', input.password)
    const confLines = [`requirepass ${quote(input.password)}`]
    if (input.replication) confLines.push(`masterauth ${quote(input.password)}`)
    return { username: undefined, password: input.password, confLines, tls }
  }
  if (input.password !== undefined) {
    throw new InvalidOptionError(
      'password',
      'is the default user’s password; with adminUser the default user is off: set adminUser.password instead',
    )
  }
  const admin = input.adminUser === true ? {} : input.adminUser
  const username = admin.username ?? DEFAULT_ADMIN_USERNAME
  if (!USERNAME.test(username) || username === 'default' || username === REPLICATION_USERNAME) {
    throw new InvalidOptionError(
      'adminUser.username',
      `expected 1-64 of A-Z a-z 0-9 _ . : - other than 'default' and '${REPLICATION_USERNAME}', got '${username}'`,
    )
  }
  const password = admin.password ?? generated()
  checkSecret('adminUser.password', password)
  const defaultLine =
    admin.defaultUserRules === undefined
      ? DEFAULT_USER_LINE
      : `user default ${checkDefaultRules(admin.defaultUserRules)}`
  const replicationPassword = generated()
  return {
    username,
    password,
    confLines: [
      // `user default …` resets the default user first (no password). It stays off, so no client
      // can log in as it, but keeps every permission: Redis (7.0.15 here) replays a script's
      // effects from the AOF as MULTI … EXEC run as the default user and re-checks its ACL at
      // EXEC, so a default user without permissions silently drops everything scripts wrote
      // when a node restarts from its AOF (redis/redis#14541, fixed by #14545; valkey#3983).
      // See docs/cluster.md#the-default-user-and-the-aof.
      defaultLine,
      `user ${username} on ${quote(`>${password}`)} ~* &* +@all`,
      `user ${REPLICATION_USERNAME} on ${quote(`>${replicationPassword}`)} -@all +psync +replconf +ping`,
      `masteruser ${REPLICATION_USERNAME}`,
      `masterauth ${quote(replicationPassword)}`,
    ],
    tls,
  }
}
