import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Router } from './router.js';
import { registerPingRoutes, registerSystemRoutes, type SystemDeps } from './system.js';
import { serveRouter } from './testing.js';

test('the ping answers while the router is held, and its Swarm header follows the swarm state given to the system routes later', async (t) => {
  const router = new Router();
  let ready!: () => void;
  router.holdUntil(new Promise<void>((resolve) => (ready = resolve)));
  registerPingRoutes(router);
  const api = await serveRouter(router);
  t.after(() => api.close());

  const early = await api.request('GET', '/_ping');
  assert.equal(early.status, 200);
  assert.equal(early.text, 'OK');
  assert.equal(early.headers.swarm, 'inactive');
  assert.equal((await api.request('HEAD', '/_ping')).headers.swarm, 'inactive');

  const swarm = { NodeID: 'n1', NodeAddr: '10.0.0.1', LocalNodeState: 'active' as const, ControlAvailable: true, Error: '', RemoteManagers: null };
  registerSystemRoutes(router, { swarm: () => swarm } as unknown as SystemDeps);
  assert.equal((await api.request('GET', '/_ping')).headers.swarm, 'active/manager');
  ready();
});
