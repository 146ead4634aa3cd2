import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { containerBody, taskName } from './agent.js';
import { splitHostPort } from './cluster.js';
import { dataPathAddr, dataPathPort } from './addresses.js';
import { validateServiceSpec } from './objects.js';
import { constraintsMatch } from './orchestrator.js';
import { newDataKey, sealer } from './crypt.js';
import { caDigest, newJoinToken, newUnlockKey, parseJoinToken, sameToken } from './tokens.js';
import { isDirty, isTerminal, newObjectId, stateRank, swarmSpecDefaults } from './types.js';

test('join tokens: SWMTKN-1, the CA digest in base 36 over 50 digits, a 25-digit secret', () => {
  const ca = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
  const token = newJoinToken(ca);
  assert.match(token, /^SWMTKN-1-[0-9a-z]{50}-[0-9a-z]{25}$/);
  const expected = BigInt('0x' + createHash('sha256').update(ca).digest('hex')).toString(36).padStart(50, '0');
  assert.equal(parseJoinToken(token).digest, expected);
  assert.equal(caDigest(ca), expected);
  assert.notEqual(newJoinToken(ca), token);
  assert.ok(sameToken(token, token));
  assert.ok(!sameToken(token, newJoinToken(ca)));
  assert.throws(() => parseJoinToken('SWMTKN-1-abc-def'), /invalid join token/);
  assert.match(newUnlockKey(), /^SWMKEY-1-[A-Za-z0-9+/]{43}$/);
});

test('ids are 25 characters of base 36', () => {
  assert.equal(newObjectId(Buffer.alloc(16, 0xff)).length, 25);
  assert.equal(newObjectId(Buffer.alloc(16, 0)), '0'.repeat(25));
});

test('task states are ordered as swarmkit orders them', () => {
  assert.ok(stateRank('running') > stateRank('assigned'));
  assert.ok(isTerminal('failed') && isTerminal('shutdown') && !isTerminal('running'));
  assert.equal(stateRank('bogus'), -1);
});

test('placement constraints', () => {
  const node = { ID: 'n1', Spec: { Role: 'worker', Labels: { zone: 'a' } }, Description: { Hostname: 'Host-1', Platform: { OS: 'linux', Architecture: 'x86_64' }, Engine: { Labels: { disk: 'ssd' } } } };
  assert.ok(constraintsMatch(['node.role==worker', 'node.labels.zone==a', 'engine.labels.disk==ssd'], node));
  assert.ok(constraintsMatch(['node.hostname==host-1', 'node.platform.os==linux', 'node.id!=n2'], node));
  assert.ok(!constraintsMatch(['node.role==manager'], node));
  assert.ok(!constraintsMatch(['node.labels.zone!=a'], node));
  assert.ok(!constraintsMatch(['node.labels.missing==x'], node));
  assert.ok(constraintsMatch(['node.labels.missing!=x'], node));
  assert.ok(!constraintsMatch(['nonsense'], node));
  assert.ok(constraintsMatch(undefined, node));
});

test('a task is dirty when its spec or published ports differ from its service', () => {
  const spec = { ContainerSpec: { Image: 'busybox', Args: ['sleep', '1'] } };
  const service = { Spec: { TaskTemplate: spec }, Endpoint: {} };
  assert.ok(!isDirty({ Spec: structuredClone(spec) }, service));
  assert.ok(isDirty({ Spec: { ContainerSpec: { Image: 'busybox' } } }, service));
  assert.ok(isDirty({ Spec: spec, Endpoint: { Ports: [{ TargetPort: 80 }] } }, service));
});

test('addresses: host and port, with a default port and IPv6 in brackets', () => {
  assert.deepEqual(splitHostPort('10.0.0.1:2377', 1), { host: '10.0.0.1', port: 2377 });
  assert.deepEqual(splitHostPort('10.0.0.1', 2377), { host: '10.0.0.1', port: 2377 });
  assert.deepEqual(splitHostPort('[::1]:4000', 2377), { host: '::1', port: 4000 });
  assert.throws(() => splitHostPort('10.0.0.1:99999', 1), /invalid port/);
});

test('data path: the port 1024-49151 or 4789 for none, the address one of this machine\'s IPv4 addresses or an interface\'s', () => {
  assert.equal(dataPathPort({}), 4789);
  assert.equal(dataPathPort({ DataPathPort: 0 }), 4789);
  assert.equal(dataPathPort({ DataPathPort: 7789 }), 7789);
  for (const bad of [80, 1023, 49152, 70000, -1, 1.5, '7789']) assert.throws(() => dataPathPort({ DataPathPort: bad }), /DataPathPort .*1024-49151/);
  const interfaces: Record<string, string[]> = { eth1: ['172.16.0.1'], eth2: [], eth3: ['172.16.0.3', '172.16.0.4'] };
  const host = { isLocalAddress: (ip: string) => ip === '172.16.0.1', interfaceAddresses: (name: string) => interfaces[name] };
  assert.equal(dataPathAddr({}, host), undefined);
  assert.equal(dataPathAddr({ DataPathAddr: '' }, host), undefined);
  assert.equal(dataPathAddr({ DataPathAddr: '172.16.0.1' }, host), '172.16.0.1');
  assert.throws(() => dataPathAddr({ DataPathAddr: '172.16.0.9' }, host), /data path address 172\.16\.0\.9 is not an address of this machine/);
  assert.equal(dataPathAddr({ DataPathAddr: 'eth1' }, host), '172.16.0.1');
  assert.throws(() => dataPathAddr({ DataPathAddr: 'eth9' }, host), /invalid DataPathAddr "eth9": the data path address must be an IP address or the name of a network interface/);
  assert.throws(() => dataPathAddr({ DataPathAddr: 'eth2' }, host), /interface eth2 has no IPv4 address/);
  assert.throws(() => dataPathAddr({ DataPathAddr: 'eth3' }, host), /more than one IPv4 address \(172\.16\.0\.3 and 172\.16\.0\.4\)/);
  assert.throws(() => dataPathAddr({ DataPathAddr: '172.16.0.1:4789' }, host), /invalid DataPathAddr/);
  assert.throws(() => dataPathAddr({ DataPathAddr: '0.0.0.0' }, host), /non-zero/);
  assert.throws(() => dataPathAddr({ DataPathAddr: 7 }, host), /must be a string/);
});

test('service specs: defaults, and what is refused with a message naming it', () => {
  const spec = validateServiceSpec({ Name: 'web', TaskTemplate: { ContainerSpec: { Image: 'busybox' } } });
  assert.deepEqual(spec.Mode, { Replicated: { Replicas: 1 } });
  assert.match(validateServiceSpec({ TaskTemplate: { ContainerSpec: { Image: 'busybox' } } }).Name, /^[a-z]+_[a-z]+$/);
  assert.throws(() => validateServiceSpec({ Name: 'web', TaskTemplate: { ContainerSpec: { Image: 'x' }, Placement: { Constraints: ['node.colour==red'] } } }), /invalid constraint/);
  assert.throws(() => validateServiceSpec({ Name: 'web', TaskTemplate: { ContainerSpec: { Image: 'x' }, Placement: { Constraints: ['node.role=manager'] } } }), /invalid constraint/);
  assert.doesNotThrow(() => validateServiceSpec({ Name: 'web', TaskTemplate: { ContainerSpec: { Image: 'x' }, Placement: { Constraints: ['node.labels.zone != a', 'engine.labels.x==y'] } } }));
  assert.throws(() => validateServiceSpec({ Name: 'web', TaskTemplate: { ContainerSpec: {} } }), /image reference must be provided/);
  assert.throws(() => validateServiceSpec({ Name: 'bad name', TaskTemplate: { ContainerSpec: { Image: 'x' } } }), /invalid name/);
  assert.throws(() => validateServiceSpec({ Name: 'web', TaskTemplate: { ContainerSpec: { Image: 'x' } }, Mode: { Replicated: { Replicas: -1 } } }), /Replicas/);
  assert.throws(() => validateServiceSpec({ Name: 'web', TaskTemplate: { ContainerSpec: { Image: 'x' }, RestartPolicy: { Condition: 'sometimes' } } }), /Condition/);
  assert.throws(() => validateServiceSpec({ Name: 'web', TaskTemplate: { ContainerSpec: { Image: 'x' } }, Mode: { Global: {}, Replicated: {} } }), /one mode/);
  assert.deepEqual(validateServiceSpec({ Name: 'web', TaskTemplate: { ContainerSpec: { Image: 'x' } }, Mode: { ReplicatedJob: {} } }).Mode, { ReplicatedJob: { MaxConcurrent: 1, TotalCompletions: 1 } });
  assert.throws(() => validateServiceSpec({ Name: 'web', TaskTemplate: { ContainerSpec: { Image: 'x' } }, Mode: { ReplicatedJob: { MaxConcurrent: 0 } } }), /MaxConcurrent/);
  assert.doesNotThrow(() => validateServiceSpec({ Name: 'web', TaskTemplate: { ContainerSpec: { Image: 'x' } }, EndpointSpec: { Ports: [{ TargetPort: 80, PublishedPort: 8080, PublishMode: 'host' }] } }));
});

test('swarm spec defaults fill the zeros a client sends', () => {
  const spec = swarmSpecDefaults({ Raft: { ElectionTick: 0 }, Dispatcher: {}, Orchestration: { TaskHistoryRetentionLimit: 3 } });
  assert.equal(spec.Raft.ElectionTick, 10);
  assert.equal(spec.Dispatcher.HeartbeatPeriod, 5_000_000_000);
  assert.equal(spec.Orchestration.TaskHistoryRetentionLimit, 3);
});

test('a task\'s container: Docker\'s name and labels, command and args, secrets and configs at their targets', () => {
  const task = {
    ID: 't1', ServiceID: 's1', Slot: 2, NodeID: 'n1', ServiceAnnotations: { Name: 'web' },
    Spec: {
      ContainerSpec: {
        Image: 'busybox', Command: ['sh'], Args: ['-c', 'true'], Env: ['A=1'], Labels: { own: 'x' }, StopGracePeriod: 2_500_000_000, Hosts: ['10.0.0.1 db alias'],
        Secrets: [{ SecretID: 'sec', SecretName: 'pw', File: { Name: 'pw' } }],
        Configs: [{ ConfigID: 'cfg', ConfigName: 'conf', File: { Name: '/etc/app.conf' } }],
      },
      Resources: { Limits: { MemoryBytes: 1 << 20 } },
    },
    Endpoint: { Ports: [{ TargetPort: 80, PublishedPort: 8080, PublishMode: 'host', Protocol: 'tcp' }] },
  };
  assert.equal(taskName(task), 'web.2.t1');
  const files = new Map([['secret:sec:pw', '/x/f0'], ['config:cfg:/etc/app.conf', '/x/f1']]);
  const body = containerBody(task, 'n1', files);
  assert.deepEqual(body.Entrypoint, ['sh']);
  assert.deepEqual(body.Cmd, ['-c', 'true']);
  assert.equal(body.StopTimeout, 3);
  assert.equal(body.Labels['com.docker.swarm.task.name'], 'web.2.t1');
  assert.equal(body.Labels['com.docker.swarm.service.name'], 'web');
  assert.equal(body.Labels.own, 'x');
  assert.deepEqual(body.HostConfig.Mounts, [
    { Type: 'bind', Source: '/x/f0', Target: '/run/secrets/pw', ReadOnly: true },
    { Type: 'bind', Source: '/x/f1', Target: '/etc/app.conf', ReadOnly: true },
  ]);
  assert.deepEqual(body.HostConfig.PortBindings, { '80/tcp': [{ HostIp: '', HostPort: '8080' }] });
  assert.deepEqual(body.HostConfig.ExtraHosts, ['db:10.0.0.1', 'alias:10.0.0.1']);
  assert.equal(body.HostConfig.Memory, 1 << 20);
  assert.deepEqual(body.HostConfig.RestartPolicy, { Name: 'no' });
});

test('secret values are sealed with the data key, and only that key opens them', () => {
  const key = newDataKey();
  const sealed = sealer(key).seal(Buffer.from('s3cret'));
  assert.ok(!sealed.includes(Buffer.from('s3cret').toString('base64')));
  assert.equal(sealer(key).open(sealed).toString(), 's3cret');
  assert.throws(() => sealer(newDataKey()).open(sealed));
  assert.throws(() => sealer(undefined).seal(Buffer.from('x')), /no data key/);
});
