import assert from 'node:assert/strict';
import { test } from 'node:test';
import { answerQuery, machineResolvers } from './server.js';

test('resolvers: BERTH_DNS_UPSTREAM names the machine resolvers a query without the engine\'s upstreams goes to', async () => {
  const before = process.env.BERTH_DNS_UPSTREAM;
  process.env.BERTH_DNS_UPSTREAM = '127.0.0.1:9, 127.0.0.2';
  try {
    assert.deepEqual(machineResolvers(), ['127.0.0.1:9', '127.0.0.2']);
  } finally {
    if (before === undefined) delete process.env.BERTH_DNS_UPSTREAM;
    else process.env.BERTH_DNS_UPSTREAM = before;
  }
});

test('resolvers: an empty list of upstreams forwards nowhere (SERVFAIL)', async () => {
  // A query for example.test, type A, class IN.
  const query = Buffer.concat([
    Buffer.from([0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]),
    Buffer.from([7, ...Buffer.from('example'), 4, ...Buffer.from('test'), 0]),
    Buffer.from([0, 1, 0, 1]),
  ]);
  const answer = await answerQuery(query, { lookup: () => undefined, upstreams: () => [] }, 'udp');
  assert.equal(answer![3] & 0x0f, 2);
});
