import type { IContainer } from 'kubernetes-models/v1/Container'
import type { IEnvVar } from 'kubernetes-models/v1/EnvVar'
import type { IVolume } from 'kubernetes-models/v1/Volume'
import type { IVolumeMount } from 'kubernetes-models/v1/VolumeMount'
import { type DeployConfig, REDIS_PORT } from './config.js'

/**
 * TLS between clients and Redis (prod): where the cert-manager Secrets are mounted and what the
 * Redis pods, probes, exporters, the bootstrap Job and the service do with them. Every helper
 * returns nothing (an empty list, no flags) when `cfg.tls` is off, so dev stays plain TCP.
 *
 * A cert-manager Secret holds `tls.crt`, `tls.key` and `ca.crt` (the issuing CA). Redis pods
 * mount their whole Secret; clients mount only `ca.crt`, so no private key reaches them.
 */

/** Where a Redis pod's own certificate, key and CA are mounted. */
export const TLS_DIR = '/etc/redis-tls'
/** Where clients (exporter sidecars, the service, the worker, the bootstrap Job) find the CA. */
export const CA_DIR = '/etc/redis-ca'
export const CA_FILE = `${CA_DIR}/ca.crt`

/** The Secret cert-manager writes for the Certificate of one Redis StatefulSet. */
export function tlsSecretName(statefulSet: string): string {
  return `${statefulSet}-tls`
}

/**
 * redis.conf lines of a TLS-only node: the plain port is closed (`port 0`) and TLS takes its
 * number, so Services and NetworkPolicies keep 6379. The cluster bus (port + 10000 = 16379,
 * derived from tls-port when tls-cluster is on) and replication speak TLS too. Clients present
 * no certificate: the ACL password authenticates them, TLS encrypts it and proves the server.
 * Nodes do present theirs to each other (the bus always asks for one): the Certificate
 * allows `client auth` for that.
 */
export function tlsRedisConf(cfg: DeployConfig, cluster: boolean): string[] {
  if (!cfg.tls) return [`port ${REDIS_PORT}`]
  return [
    'port 0',
    `tls-port ${REDIS_PORT}`,
    `tls-cert-file ${TLS_DIR}/tls.crt`,
    `tls-key-file ${TLS_DIR}/tls.key`,
    `tls-ca-cert-file ${TLS_DIR}/ca.crt`,
    'tls-auth-clients no',
    // Lock nodes never replicate; the line keeps a hand-made REPLICAOF from going out in clear.
    'tls-replication yes',
    ...(cluster ? ['tls-cluster yes'] : []),
  ]
}

/** redis-cli flags for a TLS node (`caFile`: the CA to verify it against). */
export function tlsCliFlags(cfg: DeployConfig, caFile: string): string {
  return cfg.tls ? `--tls --cacert ${caFile} ` : ''
}

/** The Redis container's own certificate (the pod volume `tls`, see `tlsVolumes`). */
export function redisTlsMounts(cfg: DeployConfig): IVolumeMount[] {
  return cfg.tls ? [{ name: 'tls', mountPath: TLS_DIR, readOnly: true }] : []
}

/** The CA only, for a client container (the pod volume `tls-ca`). */
export function caMounts(cfg: DeployConfig): IVolumeMount[] {
  return cfg.tls ? [{ name: 'tls-ca', mountPath: CA_DIR, readOnly: true }] : []
}

/**
 * Pod volumes: `tls` (the whole Secret, for redis-server; only with `withKey`) and `tls-ca` (its
 * `ca.crt` alone). Every Certificate is signed by the same CA issuer, so any one Secret's
 * `ca.crt` verifies all Redis pods.
 */
export function tlsVolumes(cfg: DeployConfig, secretName: string, withKey: boolean): IVolume[] {
  if (!cfg.tls) return []
  const ca: IVolume = {
    name: 'tls-ca',
    secret: { secretName, items: [{ key: 'ca.crt', path: 'ca.crt' }], defaultMode: 0o444 },
  }
  // 0440 + the pod's fsGroup: redis-server (uid 999) reads the key, nobody else does.
  return withKey ? [{ name: 'tls', secret: { secretName, defaultMode: 0o440 } }, ca] : [ca]
}

/** What the service and worker need to speak TLS to every Redis (apps/flash-sale/src/config.ts). */
export function clientTlsEnv(cfg: DeployConfig): IEnvVar[] {
  if (!cfg.tls) return []
  return [
    { name: 'REDIS_TLS', value: 'true' },
    { name: 'REDIS_TLS_CA_FILE', value: CA_FILE },
  ]
}

/** redis_exporter: rediss:// and the CA (its env names for --redis.addr and --tls-ca-cert-file). */
export function exporterTlsEnv(cfg: DeployConfig): NonNullable<IContainer['env']> {
  const scheme = cfg.tls ? 'rediss' : 'redis'
  return [
    { name: 'REDIS_ADDR', value: `${scheme}://127.0.0.1:${REDIS_PORT}` },
    ...(cfg.tls ? [{ name: 'REDIS_EXPORTER_TLS_CA_CERT_FILE', value: CA_FILE }] : []),
  ]
}
