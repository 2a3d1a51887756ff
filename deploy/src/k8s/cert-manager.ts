import type { DeployConfig } from './config.js'
import { CLUSTER_NAME } from './redis-cluster.js'
import { tlsSecretName } from './redis-tls.js'
import { REDLOCK_NAME } from './redlock.js'

/**
 * cert-manager objects (`cert-manager.io/v1`) for the Redis certificates of prod. kubernetes-models
 * has no cert-manager types, so these are small typed builders whose `validate()` checks what the
 * cert-manager CRD requires of the fields used here; `validateManifests` calls it like the
 * Kubernetes models' own. They go into certificates.yaml (see docs/operations.md#decisions).
 *
 * The chain: a self-signed Issuer signs one CA Certificate (`redis-ca`); a CA Issuer built on
 * that Secret signs one Certificate per Redis StatefulSet. Bring your own CA by creating the
 * `redis-ca` Secret yourself (tls.crt + tls.key) and dropping the two bootstrap objects.
 */

export const CERT_MANAGER_API = 'cert-manager.io/v1'
export const SELF_SIGNED_ISSUER = 'redis-selfsigned'
export const CA_ISSUER = 'redis-ca'
export const CA_SECRET = 'redis-ca'

const USAGES = [
  'signing',
  'digital signature',
  'content commitment',
  'key encipherment',
  'key agreement',
  'data encipherment',
  'cert sign',
  'crl sign',
  'encipher only',
  'decipher only',
  'any',
  'server auth',
  'client auth',
  'code signing',
  'email protection',
  's/mime',
  'ipsec end system',
  'ipsec tunnel',
  'ipsec user',
  'timestamping',
  'ocsp signing',
  'microsoft sgc',
  'netscape sgc',
] as const
export type KeyUsage = (typeof USAGES)[number]

interface Metadata {
  name: string
  namespace: string
  labels?: Record<string, string>
}

export interface IssuerSpec {
  selfSigned?: Record<string, never>
  ca?: { secretName: string }
}

export interface CertificateSpec {
  secretName: string
  issuerRef: { name: string; kind: 'Issuer' | 'ClusterIssuer'; group: 'cert-manager.io' }
  commonName?: string
  isCA?: boolean
  dnsNames?: string[]
  ipAddresses?: string[]
  /** Go durations, e.g. '2160h'. */
  duration?: string
  renewBefore?: string
  privateKey?: {
    algorithm: 'RSA' | 'ECDSA' | 'Ed25519'
    size?: number
    rotationPolicy?: 'Never' | 'Always'
  }
  usages?: KeyUsage[]
}

/** Thrown by validate(): a field the cert-manager CRD would reject. */
export class CertManagerSchemaError extends Error {
  readonly code = 'E_CERT_MANAGER_SCHEMA'
  constructor(
    readonly object: string,
    readonly field: string,
    problem: string,
  ) {
    super(`${object}: ${field} ${problem}`)
    this.name = new.target.name
  }
}

// RFC 1123 subdomain (object names), and a DNS name that may start with one `*.` label.
const SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/
const DNS_NAME = /^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/
const IPV4 = /^(25[0-5]|2[0-4]\d|1?\d?\d)(\.(25[0-5]|2[0-4]\d|1?\d?\d)){3}$/
const GO_DURATION = /^(\d+(\.\d+)?(h|m|s|ms|us|µs|ns))+$/

abstract class CertManagerObject<K extends string, S> {
  readonly apiVersion = CERT_MANAGER_API
  abstract readonly kind: K
  constructor(
    readonly metadata: Metadata,
    readonly spec: S,
  ) {}

  protected fail(field: string, problem: string): never {
    throw new CertManagerSchemaError(`${this.kind} ${String(this.metadata?.name)}`, field, problem)
  }

  protected checkMetadata(): void {
    const m = this.metadata as Partial<Metadata> | undefined
    if (typeof m?.name !== 'string' || !SUBDOMAIN.test(m.name) || m.name.length > 253) {
      this.fail('metadata.name', 'must be an RFC 1123 subdomain')
    }
    if (typeof m.namespace !== 'string' || !SUBDOMAIN.test(m.namespace)) {
      this.fail('metadata.namespace', 'is required (Issuers are namespaced)')
    }
    if (typeof this.spec !== 'object' || this.spec === null) this.fail('spec', 'is required')
  }

  abstract validate(): void

  toJSON(): { apiVersion: string; kind: K; metadata: Metadata; spec: S } {
    return { apiVersion: this.apiVersion, kind: this.kind, metadata: this.metadata, spec: this.spec }
  }
}

export class Issuer extends CertManagerObject<'Issuer', IssuerSpec> {
  readonly kind = 'Issuer' as const

  validate(): void {
    this.checkMetadata()
    const kinds = Object.keys(this.spec).filter((k) =>
      ['acme', 'ca', 'vault', 'selfSigned', 'venafi'].includes(k),
    )
    if (kinds.length !== 1) this.fail('spec', `must set exactly one issuer type, got ${kinds.length}`)
    if (this.spec.ca !== undefined && typeof this.spec.ca.secretName !== 'string') {
      this.fail('spec.ca.secretName', 'is required')
    }
  }
}

export class Certificate extends CertManagerObject<'Certificate', CertificateSpec> {
  readonly kind = 'Certificate' as const

  validate(): void {
    this.checkMetadata()
    const s = this.spec
    if (typeof s.secretName !== 'string' || !SUBDOMAIN.test(s.secretName)) {
      this.fail('spec.secretName', 'is required (an RFC 1123 subdomain)')
    }
    if (typeof s.issuerRef?.name !== 'string' || s.issuerRef.name === '') {
      this.fail('spec.issuerRef.name', 'is required')
    }
    if (s.issuerRef.kind !== 'Issuer' && s.issuerRef.kind !== 'ClusterIssuer') {
      this.fail('spec.issuerRef.kind', 'must be Issuer or ClusterIssuer')
    }
    if (!s.commonName && !s.dnsNames?.length && !s.ipAddresses?.length) {
      this.fail('spec', 'needs at least one of commonName, dnsNames, ipAddresses')
    }
    // commonName is one X.509 RDN: at most 64 characters.
    if (s.commonName !== undefined && (s.commonName === '' || s.commonName.length > 64)) {
      this.fail('spec.commonName', 'must be 1-64 characters')
    }
    for (const d of s.dnsNames ?? []) if (!DNS_NAME.test(d)) this.fail('spec.dnsNames', `has ${d}`)
    for (const ip of s.ipAddresses ?? []) if (!IPV4.test(ip)) this.fail('spec.ipAddresses', `has ${ip}`)
    for (const f of ['duration', 'renewBefore'] as const) {
      if (s[f] !== undefined && !GO_DURATION.test(s[f])) this.fail(`spec.${f}`, 'must be a Go duration')
    }
    for (const u of s.usages ?? []) if (!USAGES.includes(u)) this.fail('spec.usages', `has ${u}`)
    const k = s.privateKey
    if (k && !['RSA', 'ECDSA', 'Ed25519'].includes(k.algorithm))
      this.fail('spec.privateKey.algorithm', k.algorithm)
    if (k?.algorithm === 'ECDSA' && k.size !== undefined && ![256, 384, 521].includes(k.size)) {
      this.fail('spec.privateKey.size', 'must be 256, 384 or 521 for ECDSA')
    }
  }
}

/** The names clients use for the pods of a headless Service, plus what the pod itself uses. */
export function headlessDnsNames(cfg: DeployConfig, service: string): string[] {
  const svc = `${service}.${cfg.namespace}.svc`
  return [`*.${svc}.cluster.local`, `${svc}.cluster.local`, `*.${svc}`, svc, 'localhost']
}

/**
 * The issuers and certificates. The leaf certificates serve clients (`server auth`) and are also
 * what a node presents to another on the cluster bus and for replication (`client auth`).
 * 127.0.0.1 is in them for the probes and the exporter sidecar, which connect over loopback
 * (redis_exporter, in Go, checks the name; redis-cli and redis-server check only the chain).
 */
export function certificateObjects(cfg: DeployConfig): (Issuer | Certificate)[] {
  const labels = { 'app.kubernetes.io/part-of': 'kunci' }
  const meta = (name: string): Metadata => ({ name, namespace: cfg.namespace, labels })
  const issuerRef = (name: string) => ({ name, kind: 'Issuer' as const, group: 'cert-manager.io' as const })
  const leaf = (service: string) =>
    new Certificate(meta(tlsSecretName(service)), {
      secretName: tlsSecretName(service),
      issuerRef: issuerRef(CA_ISSUER),
      commonName: `${service}.${cfg.namespace}.svc`,
      dnsNames: headlessDnsNames(cfg, service),
      ipAddresses: ['127.0.0.1'],
      // 90 days, renewed 30 days before: see docs/operations.md on reloading Redis after renewal.
      duration: '2160h',
      renewBefore: '720h',
      privateKey: { algorithm: 'ECDSA', size: 256, rotationPolicy: 'Always' },
      usages: ['digital signature', 'key encipherment', 'server auth', 'client auth'],
    })
  return [
    new Issuer(meta(SELF_SIGNED_ISSUER), { selfSigned: {} }),
    new Certificate(meta(CA_SECRET), {
      secretName: CA_SECRET,
      issuerRef: issuerRef(SELF_SIGNED_ISSUER),
      isCA: true,
      commonName: `kunci redis CA (${cfg.namespace})`,
      // 10 years: replacing the CA means restarting every Redis pod and client (see the docs).
      duration: '87600h',
      privateKey: { algorithm: 'ECDSA', size: 256 },
      usages: ['cert sign', 'crl sign', 'digital signature'],
    }),
    new Issuer(meta(CA_ISSUER), { ca: { secretName: CA_SECRET } }),
    leaf(REDLOCK_NAME),
    leaf(CLUSTER_NAME),
  ]
}
