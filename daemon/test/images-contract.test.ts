/**
 * Image responses checked against the published Engine API schema of the version each request asked for.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { conformanceErrors } from './contract/openapi.js';
import { startEngine, type Engine } from './harness.js';

const VERSIONS = ['1.25', '1.30', '1.41', '1.43', '1.44', '1.47', '1.48', '1.50', '1.51', '1.52', '1.53'];

describe('image responses conform to the published schemas', () => {
  let engine: Engine;
  before(async () => {
    engine = await startEngine();
    await engine.loadBusybox();
    await engine.dockerOk(['tag', 'busybox', 'second:tag']);
  });
  after(async () => {
    await engine?.cleanup();
  });

  async function check(version: string, method: string, template: string, concrete: string): Promise<void> {
    const res = await engine.request(method, `/v${version}${concrete}`);
    assert.equal(res.status, 200, `${method} ${concrete} at ${version}: ${res.text}`);
    const errors = conformanceErrors(version, method, template, 200, res.json());
    assert.equal(errors, undefined, `${method} ${template} at ${version}: ${errors}`);
  }

  for (const version of VERSIONS) {
    it(`list, inspect and history at API ${version}`, async () => {
      await check(version, 'GET', '/images/json', '/images/json');
      await check(version, 'GET', '/images/{name}/json', '/images/busybox/json');
      await check(version, 'GET', '/images/{name}/history', '/images/busybox/history');
    });
  }

  it('remove and prune answers', async () => {
    await check('1.53', 'DELETE', '/images/{name}', '/images/second:tag');
    await check('1.53', 'POST', '/images/prune', '/images/prune');
  });
});
