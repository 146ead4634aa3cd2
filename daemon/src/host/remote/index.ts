/**
 * The remote Host: the Host contract over the agent protocol, for a daemon whose containers run elsewhere (in
 * a VM's guest, or under a root agent service while the daemon runs as a user). Every part is one generic
 * proxy built from host/remote/parts.ts: calls go to the agent's Host as `part.member`; the synchronous
 * members answer from a snapshot the agent gives at each connection (and the layer index, read again after
 * each change of the layer store made through this Host).
 */
import { Duplex, PassThrough, Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { NotFound } from '../../errors.js';
import { log } from '../../util/log.js';
import type { Host } from '../host.js';
import type { LayerInfo } from '../layers.js';
import { AgentConnection, agentSocketPath } from './connection.js';
import { holderOf, partMembers, PART_NAMES, type MemberSpec } from './parts.js';
import { argsToGuest, type GuestPaths } from './paths.js';
import { Flag, type Hello } from './session.js';

/** Targets the agent serves beside the Host's members (agent/dispatch.ts). */
const SNAPSHOT = '$snapshot';
const LAYER_INDEX = '$layers';

interface HostSnapshot {
  values: Record<string, { value: unknown; fn: boolean }>;
  missing: string[];
  layers: { infos: LayerInfo[]; dirs: Record<string, string> };
}

/** Layer store members that change the index. */
const LAYER_CHANGES = new Set(['layers.commit', 'layers.remove']);

export interface RemoteHost extends Host {
  readonly connection: AgentConnection;
  /** The agent's hello on the current connection (its version). */
  agent(): Hello | undefined;
}

/** A stream that a promise gives later: its bytes, or its error. */
function streamLater(source: Promise<unknown>): Readable {
  const out = new PassThrough();
  out.on('error', () => undefined);
  source.then(
    (stream) => pipeline(stream as Readable, out).catch((err: unknown) => out.destroy(err as Error)),
    (err: unknown) => out.destroy(err as Error),
  );
  return out;
}

/**
 * One Duplex of a connection's two halves as they cross (the agent's socket written through `input`, read
 * through `output`). As with a socket, the far end closing its side is no error of this one: what it sent
 * is read to its end, and a write after that fails with EPIPE.
 */
function joinHalves(input: Writable, output: Readable): Duplex {
  let inputGone = false;
  const duplex = new Duplex({
    write(chunk: Buffer, _encoding, callback) {
      if (inputGone) return callback(Object.assign(new Error('write EPIPE: the connection was closed at the far end'), { code: 'EPIPE' }));
      input.write(chunk, (err) => callback(err ?? null));
    },
    final(callback) {
      if (inputGone) return callback();
      input.end(() => callback());
    },
    read() {
      output.resume();
    },
    destroy(err, callback) {
      input.destroy();
      output.destroy();
      callback(err);
    },
  });
  input.on('error', () => undefined);
  input.once('close', () => {
    inputGone = true;
  });
  output.on('data', (chunk: Buffer) => {
    if (!duplex.push(chunk)) output.pause();
  });
  output.once('end', () => duplex.push(null));
  output.once('error', (err) => duplex.destroy(err));
  return duplex;
}

/**
 * The arguments as they cross (copies, never edits): the paths named by the spec in the guest's terms (when
 * the guest names the daemon's folders otherwise), synchronous predicates named by it as flags.
 */
function prepare(args: unknown[], spec: MemberSpec, paths: GuestPaths | undefined): unknown[] {
  if (paths && (spec.paths || spec.sources)) args = argsToGuest(args, spec, paths);
  if (!spec.flags) return args;
  const out = [...args];
  for (const flag of spec.flags) {
    const [index, ...rest] = flag.split('.');
    const i = Number(index);
    if (rest.length === 0) {
      if (typeof out[i] === 'function') out[i] = new Flag(out[i] as () => boolean);
      continue;
    }
    out[i] = out[i] && typeof out[i] === 'object' ? { ...(out[i] as object) } : out[i];
    const at = holderOf(out[i], rest.join('.'));
    if (at && typeof at.holder[at.key] === 'function') at.holder[at.key] = new Flag(at.holder[at.key] as () => boolean);
  }
  return out;
}

/**
 * Connects to the agent at `address` (unix://PATH) and builds the Host over it. `paths` translates the
 * daemon's paths to the guest's (absent: the guest names folders as the daemon does).
 */
export async function createRemoteHost(address: string, opts: { waitMs?: number; paths?: GuestPaths } = {}): Promise<RemoteHost> {
  const connection = new AgentConnection(agentSocketPath(address), opts);
  let snap = (await connection.call(SNAPSHOT, [], { retry: true })) as HostSnapshot;
  let layerInfos = new Map(snap.layers.infos.map((info) => [info.chainId, info]));
  const setLayers = (index: HostSnapshot['layers']) => {
    layerInfos = new Map(index.infos.map((info) => [info.chainId, info]));
    snap = { ...snap, layers: index };
  };
  connection.on('reconnect', () => {
    connection.call(SNAPSHOT, [], { retry: true }).then(
      (fresh) => {
        snap = fresh as HostSnapshot;
        setLayers(snap.layers);
      },
      (err: Error) => log.warn('the agent snapshot could not be read again', { error: err.message }),
    );
  });
  const refreshLayers = async () => setLayers((await connection.call(LAYER_INDEX, [], { retry: true })) as HostSnapshot['layers']);

  const host = {
    connection,
    agent: () => connection.hello,
    close: async () => connection.close(),
  } as Record<string, unknown>;
  for (const part of PART_NAMES) {
    const proxy: Record<string, unknown> = {};
    for (const [member, spec] of partMembers(part)) {
      const target = `${part}.${member}`;
      if (snap.missing.includes(target)) continue;
      const call = (args: unknown[]): Promise<unknown> => {
        let prepared: unknown[];
        try {
          prepared = prepare(args, spec, opts.paths);
        } catch (err) {
          return Promise.reject(err as Error); // a path the guest does not see fails the call, as the agent's errors do
        }
        return connection.call(target, prepared, { retry: spec.kind === 'retry' });
      };
      switch (spec.kind) {
        case 'call':
        case 'retry':
          proxy[member] = LAYER_CHANGES.has(target)
            ? async (...args: unknown[]) => {
                try {
                  return await call(args);
                } finally {
                  await refreshLayers();
                }
              }
            : (...args: unknown[]) => call(args);
          break;
        case 'fire':
          proxy[member] = (...args: unknown[]) => {
            call(args).catch((err: Error) => log.warn('an agent call failed', { call: target, error: err.message }));
          };
          break;
        case 'stream':
          proxy[member] = (...args: unknown[]) => streamLater(call(args));
          break;
        case 'iterable':
          proxy[member] = (...args: unknown[]) => ({
            async *[Symbol.asyncIterator]() {
              // Leaving the loop returns the inner iterator, which ends the stream on the agent's side.
              yield* (await call(args)) as AsyncIterable<unknown>;
            },
          });
          break;
        case 'duplex':
          proxy[member] = (...args: unknown[]) => {
            const toAgent = new PassThrough();
            const fromAgent = new PassThrough();
            const duplex = Duplex.from({ writable: toAgent, readable: fromAgent });
            call(args).then(
              (halves) => {
                const { input, output } = halves as { input: Writable; output: Readable };
                pipeline(toAgent, input).catch((err: Error) => duplex.destroy(err));
                pipeline(output, fromAgent).catch((err: Error) => duplex.destroy(err));
              },
              (err: Error) => duplex.destroy(err),
            );
            return duplex;
          };
          break;
        case 'open':
          proxy[member] = async (...args: unknown[]) => {
            const { input, output } = (await call(args)) as { input: Writable; output: Readable };
            return joinHalves(input, output);
          };
          break;
        case 'snapshot':
          if (snap.values[target]?.fn) proxy[member] = () => snap.values[target]!.value;
          else Object.defineProperty(proxy, member, { get: () => snap.values[target]?.value, enumerable: true });
          break;
        case 'layers':
          break;
      }
    }
    host[part] = proxy;
  }
  Object.assign(host.layers as object, {
    has: (chainId: string) => layerInfos.has(chainId),
    chainIds: () => [...layerInfos.keys()],
    info: (chainId: string) => layerInfos.get(chainId),
    lowerDirs: (chainIds: string[]) =>
      chainIds.map((chainId) => {
        const dir = snap.layers.dirs[chainId];
        if (!dir) throw new NotFound(`layer ${chainId} does not exist`);
        return dir;
      }),
  });
  return host as unknown as RemoteHost;
}
