import assert from 'node:assert/strict';
import { test } from 'node:test';
import { forwardsOf } from './ports.js';

test('the forwards that published ports ask for', () => {
  assert.deepEqual(
    forwardsOf([
      { Ports: [{ IP: '0.0.0.0', PrivatePort: 80, PublicPort: 8080, Type: 'tcp' }, { IP: '::', PrivatePort: 80, PublicPort: 8080, Type: 'tcp' }] },
      { Ports: [{ PrivatePort: 53, PublicPort: 5353, Type: 'udp' }, { PrivatePort: 9000, Type: 'tcp' }] },
      { Ports: [{ IP: '10.0.2.15', PrivatePort: 22, PublicPort: 2222, Type: 'tcp' }, { IP: '127.0.0.1', PrivatePort: 5432, PublicPort: 5432, Type: 'tcp' }] },
      {},
    ]),
    [
      { protocol: 'tcp', hostPort: 8080, guestPort: 8080 },
      { protocol: 'udp', hostPort: 5353, guestPort: 5353 },
      { protocol: 'tcp', hostPort: 5432, guestPort: 5432 },
    ],
  );
});
