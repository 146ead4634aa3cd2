/**
 * Standalone containers on attachable overlay networks, the managers' side (swarmkit's network attachment
 * tasks): a node asks for an address of the network for one of its containers, and the attachment is kept in
 * the store under `attachments/<id>` until the node releases it. While it lives, the node builds the network
 * (nodeNetworks), the other nodes hold the container's endpoint as a peer, and services' tasks resolve the
 * container by its names.
 *
 * Stored shape (version 1): { ID, NodeID, ContainerID, NetworkID, Names, Addresses: ['a.b.c.d/n'], CreatedAt }.
 */
import { randomBytes } from 'node:crypto';
import { Forbidden, InvalidParameter, NotFound } from '../../../errors.js';
import type { ClusterStore } from '../store.js';
import { lookup } from '../specs.js';
import { newObjectId, now, type Obj } from '../types.js';
import type { NetworkAllocator } from './attachments.js';

/** A node's request for an address (the body of the dispatcher's POST /attach). */
export interface AttachRequest {
  /** The network's id, name or id prefix, as the client named it. */
  Network: string;
  ContainerID: string;
  /** The container's name and aliases on the network (its DNS names for the swarm's tasks). */
  Names: string[];
}

/** The network and the address the container got. */
export interface AttachAnswer {
  ID: string;
  Network: { ID: string; Name: string; Subnet: string; Gateway: string; VNI: number; MTU: number; Internal: boolean };
  /** `a.b.c.d/n`. */
  Address: string;
}

const CONTAINER_ID = /^[0-9a-f]{64}$/;
const NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}$/;

/** Checks a request's shape (400 naming the field). */
export function checkAttachRequest(body: unknown): AttachRequest {
  const b = (body ?? {}) as Obj;
  if (typeof b.Network !== 'string' || b.Network === '') throw new InvalidParameter('Network must name a network');
  if (typeof b.ContainerID !== 'string' || !CONTAINER_ID.test(b.ContainerID)) throw new InvalidParameter('ContainerID must be a full container id');
  const names = b.Names ?? [];
  if (!Array.isArray(names) || names.some((n: unknown) => typeof n !== 'string' || !NAME.test(n))) throw new InvalidParameter('Names must be a list of DNS names');
  return { Network: b.Network, ContainerID: b.ContainerID, Names: [...new Set(names as string[])] };
}

/** The Docker error for a network that is not attachable (swarmkit's PermissionDenied, as dockerd wraps it). */
export function notAttachable(ref: string): Forbidden {
  return new Forbidden(`Could not attach to network ${ref}: rpc error: code = PermissionDenied desc = network ${ref} not manually attachable`);
}

/** The attachments of the store, those of one node when `nodeId` is given. */
export function attachmentsOf(store: ClusterStore, nodeId?: string): Obj[] {
  return store.list('attachments').map((e) => e.obj).filter((a) => nodeId === undefined || a.NodeID === nodeId);
}

/**
 * On a manager, for node `nodeId`: an address of the network for the container. The container's earlier
 * attachments to that network (a restart) are replaced.
 */
export async function attachContainer(store: ClusterStore, allocator: NetworkAllocator, nodeId: string, body: unknown): Promise<AttachAnswer> {
  const req = checkAttachRequest(body);
  let e;
  try {
    e = lookup(store, 'networks', req.Network, (o) => o.Name, 'network');
  } catch (err) {
    if (err instanceof NotFound) throw new NotFound(`network ${req.Network} not found`);
    throw err;
  }
  const n = e.obj;
  if (!n.Attachable || n.Ingress) throw notAttachable(req.Network);
  for (const old of attachmentsOf(store, nodeId)) {
    if (old.ContainerID === req.ContainerID && old.NetworkID === n.ID) await store.remove('attachments', old.ID).catch(() => undefined);
  }
  const id = newObjectId(randomBytes(16));
  const address = allocator.take(n);
  await store.create('attachments', id, { ID: id, NodeID: nodeId, ContainerID: req.ContainerID, NetworkID: n.ID, Names: req.Names, Addresses: [address], CreatedAt: now() });
  return { ID: id, Network: { ID: n.ID, Name: n.Name, Subnet: n.Subnet, Gateway: n.Gateway, VNI: n.VNI, MTU: n.MTU, Internal: !!n.Internal }, Address: address };
}

/** On a manager: node `nodeId` releases an attachment (by its id); one already gone is no error. */
export async function detachContainer(store: ClusterStore, nodeId: string, body: unknown): Promise<void> {
  const id = (body as Obj | null)?.ID;
  if (typeof id !== 'string' || id === '') throw new InvalidParameter('ID must name an attachment');
  const a = store.get('attachments', id)?.obj;
  if (!a) return;
  if (a.NodeID !== nodeId) throw new NotFound(`no attachment ${id} on this node`);
  await store.remove('attachments', id).catch((err: unknown) => {
    if (!(err instanceof NotFound)) throw err;
  });
}

/** What a node's agent source offers for standalone containers (the store itself on a manager). */
export interface AttachmentSource {
  /** This node's attachments. */
  attachments(): Obj[];
  attach(body: AttachRequest): Promise<AttachAnswer>;
  /** Releases the attachment `ID`. */
  detach(body: { ID: string }): Promise<void>;
}

/** The attachment part of a manager's own agent source. */
export function managerAttachments(store: ClusterStore, allocator: NetworkAllocator, nodeId: string): AttachmentSource {
  return {
    attachments: () => attachmentsOf(store, nodeId),
    attach: (body) => attachContainer(store, allocator, nodeId, body),
    detach: (body) => detachContainer(store, nodeId, body),
  };
}
