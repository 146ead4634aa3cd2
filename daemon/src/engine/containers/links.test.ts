import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidParameter } from '../../errors.js';
import { linkEntry, linkEnv, parseLink } from './links.js';

test('parseLink reads name, name:alias and the stored /name:/parent/alias', () => {
  assert.deepEqual(parseLink('db'), { name: 'db', alias: 'db' });
  assert.deepEqual(parseLink('db:data'), { name: 'db', alias: 'data' });
  assert.deepEqual(parseLink('/db:/web/data'), { name: 'db', alias: 'data' });
  for (const bad of ['', 'a:b:c', ':x', 'x:']) assert.throws(() => parseLink(bad), InvalidParameter, bad);
  assert.equal(linkEntry('/db', '/web', 'data'), '/db:/web/data');
});

test('linkEnv: the first port, every port, runs of ports, the name and the variables but HOME and PATH', () => {
  const env = linkEnv({
    linkName: '/web/my-db',
    address: '172.17.0.2',
    env: ['A=1', 'HOME=/root', 'PATH=/bin', 'B=x=y', 'NOEQUALS'],
    exposedPorts: ['53/udp', '5433/tcp', '5432/tcp', '6000'],
  });
  assert.deepEqual(env, [
    'MY_DB_PORT=tcp://172.17.0.2:5432',
    'MY_DB_PORT_5432_TCP=tcp://172.17.0.2:5432',
    'MY_DB_PORT_5432_TCP_ADDR=172.17.0.2',
    'MY_DB_PORT_5432_TCP_PORT=5432',
    'MY_DB_PORT_5432_TCP_PROTO=tcp',
    'MY_DB_PORT_5433_TCP=tcp://172.17.0.2:5433',
    'MY_DB_PORT_5433_TCP_ADDR=172.17.0.2',
    'MY_DB_PORT_5433_TCP_PORT=5433',
    'MY_DB_PORT_5433_TCP_PROTO=tcp',
    'MY_DB_PORT_6000_TCP=tcp://172.17.0.2:6000',
    'MY_DB_PORT_6000_TCP_ADDR=172.17.0.2',
    'MY_DB_PORT_6000_TCP_PORT=6000',
    'MY_DB_PORT_6000_TCP_PROTO=tcp',
    // The run 5432-5433 ends at 6000.
    'MY_DB_PORT_5432_TCP_START=tcp://172.17.0.2:5432',
    'MY_DB_PORT_5432_TCP_PORT_START=5432',
    'MY_DB_PORT_5432_TCP_END=tcp://172.17.0.2:5433',
    'MY_DB_PORT_5432_TCP_PORT_END=5433',
    'MY_DB_PORT_53_UDP=udp://172.17.0.2:53',
    'MY_DB_PORT_53_UDP_ADDR=172.17.0.2',
    'MY_DB_PORT_53_UDP_PORT=53',
    'MY_DB_PORT_53_UDP_PROTO=udp',
    'MY_DB_NAME=/web/my-db',
    'MY_DB_ENV_A=1',
    'MY_DB_ENV_B=x=y',
  ]);
  assert.deepEqual(linkEnv({ linkName: '/p/x', address: '10.0.0.2', env: [], exposedPorts: [] }), ['X_NAME=/p/x']);
});
