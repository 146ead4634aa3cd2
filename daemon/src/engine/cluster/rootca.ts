/**
 * The swarm's root CA and its rotation, as swarmkit does it. The cluster object holds the root (`RootCA`: its
 * certificate, its key sealed under the data key, and `Chain`, the cross-signed certificates that lead from it
 * back to the swarm's earlier roots). `swarm ca --rotate` (a new CAConfig.ForceRotate) makes a new root and
 * has the current one sign it (`RootRotation`): from then on node certificates are signed by the new root and
 * carry the chain, so that every node, whichever root it trusts yet, checks them. Once every node that is not
 * down holds one, the new root becomes the swarm's root (its TLS information and join tokens with it), and
 * each node trusts it from then on. Certificates keep the chain to the earlier roots: an etcd member reads its
 * trusted root at start only, and goes on checking its peers through the chain.
 */
import { randomBytes, X509Certificate } from 'node:crypto';
import type { ClusterHost } from '../../host/cluster.js';
import type { Sealer } from './crypt.js';
import type { ClusterStore } from './store.js';
import { caDigest, newJoinToken } from './tokens.js';
import { now, type Obj } from './types.js';

export interface SigningRoot {
  Cert: string;
  /** Sealed under the data key. */
  Key: string;
  /** Cross-signed certificates from this root back to the first one (PEM, possibly empty). */
  Chain: string;
}

/** The root that signs node certificates now: a rotation's new root while one runs, the swarm's root otherwise. */
export function signingRoot(cluster: Obj): SigningRoot {
  const r = cluster.RootRotation ?? cluster.RootCA;
  return { Cert: r.Cert, Key: r.Key, Chain: r.Chain ?? '' };
}

/** A rotation's new root, signed by the swarm's current root (its key opened with `seal`). */
export async function newRootRotation(host: ClusterHost, seal: Sealer, cluster: Obj): Promise<SigningRoot> {
  const current = { cert: cluster.RootCA.Cert as string, key: seal.open(cluster.RootCA.Key).toString() };
  const root = await host.createRootCA(randomBytes(6).toString('hex'));
  const cross = await host.crossSignRootCA(current, root.cert);
  return { Cert: root.cert, Key: seal.seal(Buffer.from(root.key)), Chain: cross + (cluster.RootCA.Chain ?? '') };
}

/** Nodes that are not down and whose last certificate is not from the rotation's root. */
function pendingNodes(store: ClusterStore, rotation: Obj): string[] {
  const digest = caDigest(rotation.Cert);
  return store
    .list('nodes')
    .filter((n) => n.obj.Status?.State !== 'down' && store.get('certs', n.obj.ID)?.obj.Root !== digest)
    .map((n) => n.obj.ID as string);
}

/** Ends the rotation when no node waits for its certificate from the new root any more. */
export async function completeRotation(store: ClusterStore): Promise<void> {
  const rotation = store.get('cluster', 'default')?.obj.RootRotation;
  if (!rotation || pendingNodes(store, rotation).length > 0) return;
  await store.mutate('cluster', 'default', (c) => {
    const r = c.RootRotation;
    if (!r || r.Cert !== rotation.Cert) return undefined;
    const next: Obj = {
      ...c,
      RootCA: { Cert: r.Cert, Key: r.Key, Chain: r.Chain },
      TLSInfo: tlsInfo(r.Cert),
      JoinTokens: { Worker: newJoinToken(r.Cert), Manager: newJoinToken(r.Cert) },
      UpdatedAt: now(),
    };
    delete next.RootRotation;
    return next;
  });
}

/** The certificates of a PEM bundle, in order. */
export function splitPem(bundle: string): string[] {
  return bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----\n?/g) ?? [];
}

/** Whether a certificate (with the chain after it) leads to the trusted root, each one signed by the next. */
export function chainsTo(bundle: string, rootPem: string): boolean {
  const root = new X509Certificate(rootPem);
  const certs = splitPem(bundle).map((p) => new X509Certificate(p));
  let current = certs.shift();
  while (current) {
    if (current.checkIssued(root) && current.verify(root.publicKey)) return true;
    const next = certs.find((c) => current!.checkIssued(c) && current!.verify(c.publicKey));
    if (!next) return false;
    certs.splice(certs.indexOf(next), 1);
    current = next;
  }
  return false;
}

/**
 * The swarm's TLS information as GET /swarm shows it: the root nodes trust, and the subject and key of the
 * root that signs now (during a rotation, the new one: the CLI counts the nodes whose issuer matches it).
 */
export function clusterTLSInfo(cluster: Obj): Obj {
  const trust = cluster.TLSInfo?.TrustRoot ?? cluster.RootCA?.Cert;
  if (!trust) return cluster.TLSInfo;
  return { ...tlsInfo(trust), ...issuerInfo(cluster.RootCA ? signingRoot(cluster).Cert : trust) };
}

/** A node's TLS information: the swarm's root, and the issuer of the node's last certificate. */
export function nodeTLSInfo(store: ClusterStore, node: Obj): Obj | undefined {
  const cluster = store.get('cluster', 'default')?.obj;
  const trust = cluster?.TLSInfo?.TrustRoot ?? node.Description?.TLSInfo?.TrustRoot;
  if (!trust) return node.Description?.TLSInfo;
  const issuer = store.get('certs', node.ID)?.obj.Issuer;
  return { ...tlsInfo(trust), ...(issuer ?? {}) };
}

/**
 * The root's TLS information as the API shows it: its certificate, and the DER of its subject and public key
 * (base64, as Go's []byte in JSON), which the CLI compares between the swarm and each node.
 */
export function tlsInfo(caPem: string): Obj {
  return { TrustRoot: caPem, ...issuerInfo(caPem) };
}

/** The DER of a root's subject and public key (base64), as the issuer of the certificates it signs. */
export function issuerInfo(caPem: string): { CertIssuerSubject: string; CertIssuerPublicKey: string } {
  const cached = infoCache.get(caPem);
  if (cached) return cached;
  const ca = new X509Certificate(caPem);
  const info = { CertIssuerSubject: derSubject(ca.raw).toString('base64'), CertIssuerPublicKey: ca.publicKey.export({ type: 'spki', format: 'der' }).toString('base64') };
  if (infoCache.size > 16) infoCache.clear();
  infoCache.set(caPem, info);
  return info;
}

/** The roots of the swarm seen lately (one, or two during a rotation). */
const infoCache = new Map<string, { CertIssuerSubject: string; CertIssuerPublicKey: string }>();

/** One DER element's tag, and where its contents start and end. */
function derElement(buf: Buffer, at: number): { tag: number; start: number; end: number } {
  const tag = buf[at]!;
  let len = buf[at + 1]!;
  let start = at + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + buf[start + i]!;
    start += n;
  }
  if (start + len > buf.length) throw new Error('truncated DER');
  return { tag, start, end: start + len };
}

/** The DER of a certificate's subject: the sixth element of its TBSCertificate (fifth without a version). */
function derSubject(cert: Buffer): Buffer {
  const tbs = derElement(cert, derElement(cert, 0).start);
  let at = tbs.start;
  const first = derElement(cert, at);
  if (first.tag === 0xa0) at = first.end;
  // serial, signature algorithm, issuer, validity: then the subject.
  for (let i = 0; i < 4; i++) at = derElement(cert, at).end;
  return cert.subarray(at, derElement(cert, at).end);
}
