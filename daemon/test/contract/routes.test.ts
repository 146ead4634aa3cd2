/**
 * Every path and method of the newest published schema (v1.53) is routed: a real berthd answers each one
 * with something other than "page not found". Path parameters name objects that do not exist (so that no
 * request changes anything or waits), except for HEAD requests, whose answers have no body to tell a
 * missing object from a missing route: those name a real container.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { startEngine, type Engine } from '../harness.js';
import { openapiDir } from './openapi.js';

const MISSING = 'berth-contract-missing';

/** Query strings that keep a request from streaming or from reaching a registry on the internet. */
const QUERIES: Record<string, string> = {
  'GET /events': '?since=1&until=2',
  'HEAD /containers/{id}/archive': '?path=/',
  'GET /containers/{id}/archive': '?path=/',
  'PUT /containers/{id}/archive': '?path=/',
};

/** Parameter values per path: names that hold a registry part point at a closed loopback port, not Docker Hub. */
function fill(method: string, template: string, container: string): string {
  return template.replace(/\{(\w+)\}/g, (_m, name: string) => {
    if (method === 'HEAD') return container;
    if (template.startsWith('/distribution/') || template.startsWith('/images/{name}/push')) return `127.0.0.1:9/${MISSING}`;
    return name === 'name' ? MISSING : `${MISSING}-${name}`;
  });
}

let engine: Engine;
let container = '';

before(async () => {
  engine = await startEngine();
  await engine.loadBusybox();
  container = (await engine.dockerOk(['create', 'busybox', 'true'])).trim();
});
after(async () => {
  await engine?.cleanup();
});

test('every path and method of the v1.53 schema is routed', async () => {
  const doc = JSON.parse(readFileSync(path.join(openapiDir(), 'v1.53.json'), 'utf8')) as { paths: Record<string, Record<string, unknown>> };
  const operations = Object.entries(doc.paths).flatMap(([template, methods]) =>
    Object.keys(methods).filter((m) => m !== 'parameters').map((m) => ({ method: m.toUpperCase(), template })));
  // HEAD requests first, while their container exists (POST /containers/prune removes it).
  operations.sort((a, b) => Number(b.method === 'HEAD') - Number(a.method === 'HEAD'));
  const missing: string[] = [];
  for (const { method, template } of operations) {
    const url = `/v1.53${fill(method, template, container)}${QUERIES[`${method} ${template}`] ?? ''}`;
    const r = await engine.request(method, url, { timeoutMs: 20_000 });
    const pageNotFound = r.status === 404 && (method === 'HEAD' || /page not found/.test(r.text));
    if (pageNotFound) missing.push(`${method} ${template}`);
    else if (method !== 'HEAD' && r.status >= 400) assert.ok(typeof r.json().message === 'string', `${method} ${url}: ${r.status} ${r.text}`);
  }
  assert.ok(operations.length > 100, `only ${operations.length} operations read from the schema`);
  assert.deepEqual(missing, [], `not routed: ${missing.join(', ')}`);
});
