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
