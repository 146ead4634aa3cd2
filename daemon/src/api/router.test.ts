import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidParameter } from '../errors.js';
import { Router } from './router.js';

test('router: methods, parameters, greedy names and order', () => {
  const noop = () => undefined;
  const r = new Router()
    .get('/containers/json', noop)
    .get('/containers/:id/json', noop)
    .get('/images/:name*/json', noop)
    .delete('/images/:name*', noop);
  assert.deepEqual(r.match('GET', '/containers/json')?.params, {});
  assert.deepEqual(r.match('GET', '/containers/abc/json')?.params, { id: 'abc' });
  assert.equal(r.match('POST', '/containers/abc/json'), undefined);
  assert.equal(r.match('GET', '/containers/a/b/json'), undefined);
  assert.deepEqual(r.match('GET', '/images/localhost:5000/a/b:1/json')?.params, { name: 'localhost:5000/a/b:1' });
  assert.deepEqual(r.match('DELETE', '/images/busybox%3Alatest')?.params, { name: 'busybox:latest' });
  // Regex characters in literal segments are matched literally.
  const dots = new Router().get('/a.b', noop);
  assert.ok(dots.match('GET', '/a.b'));
  assert.equal(dots.match('GET', '/axb'), undefined);
});

test('router: a malformed escape in a parameter is an invalid parameter, not a crash of the handler', () => {
  const r = new Router().get('/containers/:id/json', () => undefined);
  assert.throws(() => r.match('GET', '/containers/%zz/json'), (err: unknown) => err instanceof InvalidParameter && /invalid escape in the id/.test((err as Error).message));
  assert.throws(() => r.match('GET', '/containers/%E2%98/json'), InvalidParameter);
  assert.deepEqual(r.match('GET', '/containers/%E2%98%83/json')?.params, { id: '\u2603' });
});

test('router held: only beforeReady routes are routed at once; the others wait for ready, or for their route to come beforeReady', async () => {
  const noop = () => undefined;
  const r = new Router().get('/_ping', noop, { beforeReady: true }).get('/early', noop);
  assert.equal(r.waitFor('GET', '/containers/json'), undefined, 'a router never held routes at once');
  let open!: () => void;
  r.holdUntil(new Promise<void>((resolve) => (open = resolve)));
  assert.equal(r.waitFor('GET', '/_ping'), undefined);
  assert.equal(r.waitFor('HEAD', '/_ping') instanceof Promise, true, 'another method of the path waits');
  const order: string[] = [];
  const list = r.waitFor('GET', '/containers/json')!.then(() => order.push('list'));
  const version = r.waitFor('GET', '/version')!.then(() => order.push('version'));
  const early = r.waitFor('GET', '/early')!.then(() => order.push('early'));
  await new Promise((resolve) => setTimeout(resolve, 10));
  assert.deepEqual(order, [], 'nothing is routed while held');
  r.get('/version', noop, { beforeReady: true });
  r.get('/containers/json', noop);
  await version;
  assert.deepEqual(order, ['version'], 'a route added beforeReady serves its waiting request at once');
  open();
  await Promise.all([list, early]);
  assert.deepEqual(order.sort(), ['early', 'list', 'version']);
  assert.equal(r.waitFor('GET', '/containers/json'), undefined, 'once ready, nothing waits');
});

test('router held: when ready fails, the waiting requests fail with its error', async () => {
  const r = new Router().get('/_ping', () => undefined, { beforeReady: true });
  let fail!: (err: Error) => void;
  r.holdUntil(new Promise<void>((_, reject) => (fail = reject)));
  const waiting = r.waitFor('GET', '/info')!;
  fail(new Error('the default bridge cannot be made'));
  await assert.rejects(waiting, /the default bridge cannot be made/);
  assert.equal(r.waitFor('GET', '/_ping'), undefined, 'ping still answers');
});
