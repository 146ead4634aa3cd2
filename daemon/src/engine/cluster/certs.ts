/**
 * Node certificates on the managers' side: the swarm's CAConfig (NodeCertExpiry, at least an hour as in
 * swarmkit; ForceRotate, a counter whose every change rotates the root CA, see rootca.ts), issuing a
 * certificate for a node's request with the signing root and the swarm's expiry, and the record of each issue
 * in the store (`certs/<node id>`: serial, validity, role, the ForceRotate it answers and the root that signed
 * it), which tells a node that must renew and whether a rotation is still in progress.
 */
import { X509Certificate } from 'node:crypto';
import { Conflict, InvalidParameter, NotImplemented } from '../../errors.js';
import type { ClusterHost } from '../../host/cluster.js';
import type { Sealer } from './crypt.js';
import { completeRotation, issuerInfo, signingRoot } from './rootca.js';
import { key, type ClusterStore } from './store.js';
import { caDigest } from './tokens.js';
import { now, type Obj } from './types.js';

export { clusterTLSInfo, nodeTLSInfo, tlsInfo } from './rootca.js';

/** swarmkit's shortest NodeCertExpiry (1 hour) and its default (90 days), in nanoseconds as the API has them. */
export const MIN_NODE_CERT_EXPIRY_NS = 3600 * 1e9;
export const DEFAULT_NODE_CERT_EXPIRY_NS = 90 * 24 * 3600 * 1e9;

/** Checks a swarm spec's CAConfig (after an update merged it); a 400 naming the problem. */
export function checkCAConfig(ca: Obj | undefined): void {
  if (!ca) return;
  const expiry = ca.NodeCertExpiry;
  if (expiry !== undefined && expiry !== null && expiry !== 0) {
    if (typeof expiry !== 'number' || !Number.isFinite(expiry)) throw new InvalidParameter('CAConfig.NodeCertExpiry must be a duration in nanoseconds');
    if (expiry < MIN_NODE_CERT_EXPIRY_NS) throw new InvalidParameter('rpc error: code = InvalidArgument desc = minimum certificate expiry time is: 1h0m0s');
  }
  if (ca.ForceRotate !== undefined && ca.ForceRotate !== null && (!Number.isInteger(ca.ForceRotate) || ca.ForceRotate < 0)) {
    throw new InvalidParameter('CAConfig.ForceRotate must be a whole number of at least 0');
  }
  const external = Array.isArray(ca.ExternalCAs) && ca.ExternalCAs.length > 0;
  if (ca.SigningCACert || ca.SigningCAKey || external) {
    throw new NotImplemented('a root CA of your own (SigningCACert, SigningCAKey) or an external CA is not supported: `swarm ca --rotate` makes the new root itself');
  }
}

/** The validity of the certificates issued from now on, in whole seconds. */
export function certExpirySeconds(cluster: Obj): number {
  const ns = Number(cluster.Spec?.CAConfig?.NodeCertExpiry) || DEFAULT_NODE_CERT_EXPIRY_NS;
  return Math.max(1, Math.floor(ns / 1e9));
}

/** The swarm's rotation counter. */
export function forceRotate(cluster: Obj | undefined): number {
  return Number(cluster?.Spec?.CAConfig?.ForceRotate) || 0;
}

/**
 * Whether the node's last certificate was issued before the swarm's last forced rotation, or by another root
 * than the one a rotation in progress signs with.
 */
export function needsRenewal(store: ClusterStore, nodeId: string): boolean {
  const cluster = store.get('cluster', 'default')?.obj;
  const record = store.get('certs', nodeId)?.obj;
  if (forceRotate(cluster) > (Number(record?.Rotation) || 0)) return true;
  return !!cluster?.RootRotation && record?.Root !== caDigest(cluster.RootRotation.Cert);
}

/** Whether a root rotation runs, or a node that is not down still holds a certificate from before the last one. */
export function rotationInProgress(store: ClusterStore): boolean {
  if (store.get('cluster', 'default')?.obj.RootRotation) return true;
  return store.list('nodes').some((n) => n.obj.Status?.State !== 'down' && needsRenewal(store, n.obj.ID));
}

export interface Issuer {
  store: ClusterStore;
  host: ClusterHost;
  /** Opens the root CA's key, sealed in the store. */
  seal: Sealer;
}

/**
 * A certificate for a node's request, signed by the signing root with the swarm's current expiry and followed
 * by the root's chain to the earlier roots; its issue recorded in the store (and a rotation ended with it when
 * it was the last one the rotation waited for).
 */
export async function issueNodeCertificate(issuer: Issuer, csr: string, node: { nodeId: string; role: 'manager' | 'worker'; ips: string[] }): Promise<string> {
  const cluster = issuer.store.get('cluster', 'default')?.obj;
  if (!cluster) throw new Error('the swarm has no cluster object');
  const root = signingRoot(cluster);
  const cert = await issuer.host.signNodeCertificate({ cert: root.Cert, key: issuer.seal.open(root.Key).toString() }, csr, {
    ...node,
    clusterId: cluster.ID,
    expirySeconds: certExpirySeconds(cluster),
  });
  await recordCertificate(issuer.store, node.nodeId, cert, node.role, forceRotate(cluster), root.Cert);
  await completeRotation(issuer.store);
  return cert + root.Chain;
}

/** Writes a node's certificate record (the node object itself is the API's and stays as it is). */
export async function recordCertificate(store: ClusterStore, nodeId: string, certPem: string, role: string, rotation: number, root: string): Promise<void> {
  const x = new X509Certificate(certPem);
  const record = {
    NodeID: nodeId, Role: role, Serial: x.serialNumber, NotBefore: new Date(x.validFrom).toISOString(), NotAfter: new Date(x.validTo).toISOString(),
    Rotation: rotation, Root: caDigest(root), Issuer: issuerInfo(root), IssuedAt: now(),
  };
  const res = await store.client.put(key('certs', nodeId)).value(JSON.stringify(record));
  await store.waitFor(Number(res.header.revision));
}

/**
 * A renewal a node asks for over its mutual-TLS session (`peer` is its current certificate's node id and role):
 * a certificate for the same role. A node whose role changed in its spec gets its new one through the
 * promotion or demotion path instead (a manager's certificate comes with an etcd member).
 */
export async function renewFor(issuer: Issuer, peer: { nodeId: string; role: string }, body: Obj): Promise<Obj> {
  const node = issuer.store.get('nodes', peer.nodeId)?.obj;
  if (!node) throw new Conflict('this node is not part of the swarm');
  if (node.Spec?.Role !== peer.role) throw new Conflict(`this node's role changed to ${node.Spec?.Role}: its certificate comes with the role change`);
  if (typeof body.csr !== 'string' || !body.csr.includes('CERTIFICATE REQUEST')) throw new InvalidParameter('a certificate request is required');
  const cert = await issueNodeCertificate(issuer, body.csr, { nodeId: peer.nodeId, role: peer.role as 'manager' | 'worker', ips: [String(node.Status?.Addr ?? '')].filter(Boolean) });
  return { cert };
}
