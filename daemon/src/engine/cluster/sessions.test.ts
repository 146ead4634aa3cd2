import assert from 'node:assert/strict';
import { test } from 'node:test';
import { NodeSessions } from './sessions.js';
import { key, type ClusterStore } from './store.js';

/**
 * A store whose session keys live on fake leases, as etcd keeps them: a key rides on the lease it was last
 * put with, and goes when that lease is revoked or expires.
 */
function fakeStore() {
  const keys = new Map<string, string>();
  let next = 1;
  const leases = new Map<string, { expired: boolean; revoked: boolean }>();
  const drop = (lease: string) => {
    for (const [k, on] of keys) if (on === lease) keys.delete(k);
  };
  const client = {
    lease: () => {
      const id = String(next++);
      const state = { expired: false, revoked: false };
      leases.set(id, state);
      return {
        on: () => undefined,
        grant: async () => id,
        revoked: () => state.revoked,
        keepaliveOnce: async () => {
          if (state.expired) throw new Error('lease expired');
          return { TTL: '3' };
        },
        put: (k: string) => ({ value: async () => void keys.set(k, id) }),
        revoke: async () => {
          state.revoked = true;
          drop(id);
        },
      };
    },
  };
  const store = {
    client,
    get: (kind: string, id: string) => {
      if (kind !== 'sessions') return undefined;
      const lease = keys.get(key('sessions', id));
      return lease ? { obj: { NodeID: id }, createRev: 1, modRev: 1, lease } : undefined;
    },
  } as unknown as ClusterStore;
  return {
    store,
    /** The lease the node's session key rides on, or undefined when the key is gone. */
    sessionLease: (nodeId: string) => keys.get(key('sessions', nodeId)),
    /** Puts the key on a lease of someone else's (another manager's, the node's own as a manager). */
    putElsewhere: (nodeId: string) => keys.set(key('sessions', nodeId), 'elsewhere'),
    expire: (lease: string) => {
      leases.get(lease)!.expired = true;
      drop(lease);
    },
  };
}

const PERIOD_MS = 40;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const sessions = (store: ClusterStore) => new NodeSessions(store, () => PERIOD_MS / 1000);

test('sessions: a stream that closes unannounced ends the session one heartbeat period later', async () => {
  const fake = fakeStore();
  const s = sessions(fake.store);
  const stream = s.streamOpened('n1');
  await s.heartbeat('n1', '10.0.0.2');
  assert.ok(fake.sessionLease('n1'));
  s.streamClosed('n1', stream);
  await sleep(PERIOD_MS / 2);
  assert.ok(fake.sessionLease('n1'), 'the session ended before the period');
  await sleep(PERIOD_MS * 2);
  assert.equal(fake.sessionLease('n1'), undefined);
});

test('sessions: a node that opens a stream again within the period keeps its session', async () => {
  const fake = fakeStore();
  const s = sessions(fake.store);
  s.streamClosed('n1', s.streamOpened('n1'));
  await s.heartbeat('n1', '10.0.0.2');
  // The first stream closes, another opens (the node reconnected); then an older stream's close comes late.
  const first = s.streamOpened('n1');
  s.streamClosed('n1', first);
  await sleep(PERIOD_MS / 4);
  const second = s.streamOpened('n1');
  await s.heartbeat('n1', '10.0.0.2');
  s.streamClosed('n1', first);
  await sleep(PERIOD_MS * 3);
  assert.ok(fake.sessionLease('n1'));
  s.streamClosed('n1', second);
  await sleep(PERIOD_MS * 3);
  assert.equal(fake.sessionLease('n1'), undefined);
});

test('sessions: an announced close, or the dispatcher\'s own, leaves the session to its lease', async () => {
  const fake = fakeStore();
  const s = sessions(fake.store);
  const a = s.streamOpened('a');
  const b = s.streamOpened('b');
  await s.heartbeat('a', '10.0.0.2');
  await s.heartbeat('b', '10.0.0.3');
  s.announceStop('a');
  s.streamClosed('a', a);
  await sleep(PERIOD_MS * 3);
  assert.ok(fake.sessionLease('a'), 'an announced stop ended the session');
  // The announcement held for one close: the next stream's close starts a grace, which the dispatcher's own
  // close cancels (and the streams it closes start none).
  const again = s.streamOpened('a');
  s.streamClosed('a', again);
  s.close();
  s.streamClosed('b', b);
  await sleep(PERIOD_MS * 3);
  assert.ok(fake.sessionLease('a'), 'a grace outlived the dispatcher');
  assert.ok(fake.sessionLease('b'), 'the dispatcher\'s close ended a session');
});

test('sessions: a heartbeat puts the key again on this dispatcher\'s lease when it rides on another, or its lease expired', async () => {
  const fake = fakeStore();
  const s = sessions(fake.store);
  await s.heartbeat('n1', '10.0.0.2');
  const mine = fake.sessionLease('n1')!;
  await s.heartbeat('n1', '10.0.0.2');
  assert.equal(fake.sessionLease('n1'), mine);
  fake.putElsewhere('n1');
  await s.heartbeat('n1', '10.0.0.2');
  assert.equal(fake.sessionLease('n1'), mine);
  fake.expire(mine);
  assert.equal(fake.sessionLease('n1'), undefined);
  await s.heartbeat('n1', '10.0.0.2');
  const fresh = fake.sessionLease('n1');
  assert.ok(fresh && fresh !== mine);
});
