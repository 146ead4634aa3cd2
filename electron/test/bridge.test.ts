import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BridgeError, checkRequest, checkUpload, forwardRequest, hostAccessOf, openStream, openTerminal, openUpload } from '../src/bridge.js';
import { fakeEngine, FakePort } from './fakes.js';

describe('bridge allow-list', () => {
  it('lets through the operations the app uses', () => {
    assert.deepEqual(checkRequest('get', '/v1.53/containers/json?all=1'), { method: 'GET', path: '/v1.53/containers/json?all=1' });
    for (const [m, p] of [
      ['POST', '/v1.53/containers/abc/stop'],
      ['DELETE', '/v1.53/containers/abc?force=1'],
      ['POST', '/v1.53/exec/e1/resize?h=10&w=20'],
      ['GET', '/v1.53/images/registry:5000/x/y:1/history'],
      ['POST', '/v1.53/images/create?fromImage=busybox&tag=latest'],
      ['GET', '/v1.53/events'],
      ['POST', '/v1.53/networks/n1/connect'],
      ['GET', '/_ping'],
      ['GET', '/v1/sandboxes/c1/network-policies'],
      ['PUT', '/v1/sandboxes/web/network-policies'],
      ['GET', '/v1.53/plugins'],
      ['GET', '/v1.53/plugins/privileges?remote=127.0.0.1:5000/fixvol:1'],
      ['POST', '/v1.53/plugins/pull?remote=127.0.0.1:5000/fixvol:1'],
      ['POST', '/v1.53/plugins/127.0.0.1:5000/fixvol:1/enable?timeout=30'],
      ['DELETE', '/v1.53/plugins/fixvol:latest?force=1'],
      ['GET', '/v1.53/services?status=true'],
      ['GET', '/v1.53/services/web/logs?stdout=1&follow=1'],
      ['POST', '/v1.53/services/web/update?version=12'],
      ['DELETE', '/v1.53/services/abc123'],
      ['GET', '/v1.53/nodes/n1'],
      ['POST', '/v1.53/nodes/n1/update?version=3'],
      ['POST', '/v1.53/swarm/init'],
      ['GET', '/v1.53/secrets'],
      ['POST', '/v1.53/services/create'],
      ['GET', '/v1.53/configs'],
    ]) assert.doesNotThrow(() => checkRequest(m, p), `${m} ${p}`);
  });

  it('refuses everything else, and paths that climb out', () => {
    const refused = (m: unknown, p: unknown, status: number) => {
      assert.throws(() => checkRequest(m, p), (err: unknown) => err instanceof BridgeError && err.status === status, `${String(m)} ${String(p)}`);
    };
    refused('PUT', '/v1.53/containers/abc/archive?path=/etc', 403);
    refused('POST', '/v1.53/plugins/fixvol/set', 403);
    refused('POST', '/v1.53/plugins/create?name=x', 403);
    refused('POST', '/v1.53/swarm/leave', 403);
    refused('GET', '/v1.53/secrets/s1', 403);
    refused('POST', '/v1.53/secrets/create', 403);
    refused('POST', '/v1.53/nodes/n1/promote', 403);
    refused('DELETE', '/v1/sandboxes/c1/network-policies', 403);
    refused('GET', '/v2/scim/2.0/Users/u1', 403);
    refused('GET', '/v1.53/containers/abc/export', 403);
    refused('POST', '/v1.53/exec/e1/start', 403);
    refused('GET', '/v1.53/containers/../../secrets', 400);
    refused('GET', '/v1.53/containers/%2e%2e/json', 400);
    refused('GET', 'http://elsewhere/v1.53/info', 400);
    refused(undefined, '/v1.53/info', 400);
  });
});

describe('bridge body checks', () => {
  const create = (body: unknown) => hostAccessOf('POST', '/v1.53/containers/create?name=x', JSON.stringify(body));

  it('passes what the run form sends: named and anonymous volumes, ports, a user network, limits', () => {
    assert.deepEqual(
      create({
        Image: 'busybox',
        Cmd: ['sh'],
        Volumes: { '/scratch': {} },
        HostConfig: { Binds: ['data:/data', 'cache:/cache:ro'], PortBindings: { '80/tcp': [{ HostPort: '8080' }] }, NetworkMode: 'mynet', Memory: 1 << 28, NanoCpus: 5e8, RestartPolicy: { Name: 'always' } },
      }),
      [],
    );
    assert.deepEqual(create({ Image: 'busybox', HostConfig: { Mounts: [{ Type: 'volume', Source: 'data', Target: '/d' }, { Type: 'tmpfs', Target: '/t' }] } }), []);
    assert.deepEqual(hostAccessOf('POST', '/v1.53/containers/c1/exec', JSON.stringify({ Cmd: ['sh'], Tty: true })), []);
    assert.deepEqual(hostAccessOf('POST', '/v1.53/volumes/create', JSON.stringify({ Name: 'v', DriverOpts: { type: 'tmpfs', device: 'tmpfs', o: 'size=64m' } })), []);
    assert.deepEqual(hostAccessOf('GET', '/v1.53/containers/json', undefined), []);
    assert.deepEqual(hostAccessOf('POST', '/v1.53/containers/create', undefined), []);
  });

  it('names what a service update or a swarm init would grant', () => {
    const update = (spec: unknown) => hostAccessOf('POST', '/v1.53/services/web/update?version=4', JSON.stringify(spec));
    // What the Swarm view's scale sends: the spec as it was, with another replica count.
    assert.deepEqual(update({ Name: 'web', Mode: { Replicated: { Replicas: 3 } }, TaskTemplate: { ContainerSpec: { Image: 'busybox', Mounts: [{ Type: 'volume', Source: 'd', Target: '/d' }] } } }), []);
    assert.deepEqual(
      update({ Name: 'web', TaskTemplate: { ContainerSpec: { Image: 'busybox', Mounts: [{ Type: 'bind', Source: '/', Target: '/host' }], CapabilityAdd: ['SYS_ADMIN'], Privileges: { Seccomp: { Mode: 'unconfined' } } } } }),
      ["mounts the host's / at /host (read-write)", 'adds the capability SYS_ADMIN', 'turns off or replaces the seccomp profile (unconfined)'],
    );
    // A create is looked at as an update is.
    assert.deepEqual(hostAccessOf('POST', '/v1.53/services/create', JSON.stringify({ Name: 'web', TaskTemplate: { ContainerSpec: { Image: 'busybox', Args: ['httpd'] } } })), []);
    assert.deepEqual(hostAccessOf('POST', '/v1.53/services/create', JSON.stringify({ TaskTemplate: { ContainerSpec: { Image: 'busybox', Mounts: [{ Type: 'bind', Source: '/etc', Target: '/e', ReadOnly: true }] } } })), [
      "mounts the host's /etc at /e (read-only)",
    ]);
    assert.deepEqual(hostAccessOf('POST', '/v1.53/swarm/init', JSON.stringify({ ListenAddr: '127.0.0.1:2377' })), [
      'makes this engine a swarm manager, its swarm port listening on 127.0.0.1:2377 for other machines to join',
    ]);
    assert.match(hostAccessOf('POST', '/v1.53/swarm/init', undefined)[0]!, /listening on 0\.0\.0\.0:2377/);
  });

  it('names privileges, host mounts, host namespaces, devices and lifted confinement', () => {
    assert.deepEqual(create({ Image: 'busybox', HostConfig: { Privileged: true, Binds: ['/:/host'] } }), [
      'runs privileged: every capability and every device of the host',
      "mounts the host's / at /host (read-write)",
    ]);
    assert.deepEqual(create({ HostConfig: { Binds: ['/etc:/etc:ro'] } }), ["mounts the host's /etc at /etc (read-only)"]);
    assert.deepEqual(create({ HostConfig: { Mounts: [{ Type: 'bind', Source: '/var/run', Target: '/r' }] } }), ["mounts the host's /var/run at /r (read-write)"]);
    assert.deepEqual(create({ HostConfig: { Mounts: [{ Type: 'volume', Target: '/x', VolumeOptions: { DriverConfig: { Name: 'local', Options: { type: 'none', o: 'bind', device: '/root' } } } }] } }), [
      "mounts the host's /root at /x (through a volume's options)",
    ]);
    assert.deepEqual(create({ HostConfig: { CapAdd: ['SYS_ADMIN'], Devices: [{ PathOnHost: '/dev/sda' }], PidMode: 'host', NetworkMode: 'host', SecurityOpt: ['seccomp=unconfined', 'label=disable'] } }), [
      'adds the capability SYS_ADMIN',
      "uses the host's devices",
      "shares the host's process namespace",
      "shares the host's network namespace",
      'turns off a confinement (seccomp=unconfined)',
      'turns off a confinement (label=disable)',
    ]);
    assert.deepEqual(create({ HostConfig: { VolumesFrom: ['other'] } }), ['takes the volumes and host mounts of other']);
    assert.deepEqual(create({ HostConfig: { SecurityOpt: ['no-new-privileges', 'seccomp={"defaultAction":"SCMP_ACT_ALLOW"}'] } }), ['replaces the default seccomp profile with its own']);
    assert.deepEqual(hostAccessOf('POST', '/v1.53/containers/c1/exec', JSON.stringify({ Cmd: ['sh'], Privileged: true })), ['runs a privileged command in the container']);
    assert.deepEqual(hostAccessOf('POST', '/v1.53/volumes/create', JSON.stringify({ Name: 'v', DriverOpts: { type: 'none', o: 'bind', device: '/' } })), ["makes a volume of the host's /"]);
    // A plugin runs as root with what its install grants: an isolated network alone asks nothing.
    const pluginPull = (privileges: unknown) => hostAccessOf('POST', '/v1.53/plugins/pull?remote=r/p:1', JSON.stringify(privileges));
    assert.deepEqual(pluginPull([{ Name: 'network', Description: '', Value: ['none'] }]), []);
    assert.deepEqual(pluginPull([{ Name: 'network', Value: ['host'] }, { Name: 'mount', Value: ['/var/lib'] }, { Name: 'capabilities', Value: ['CAP_SYS_ADMIN'] }]), [
      'installs a plugin granted network: host',
      'installs a plugin granted mount: /var/lib',
      'installs a plugin granted capabilities: CAP_SYS_ADMIN',
    ]);
    assert.throws(() => pluginPull({ Name: 'mount' }), (err: unknown) => err instanceof BridgeError && err.status === 400);
  });

  it('reads keys in any case, as a Go engine decodes them, and refuses a body that is not JSON', () => {
    assert.equal(create({ hostconfig: { privileged: true } }).length, 1);
    assert.equal(create({ HostConfig: { PRIVILEGED: false, privileged: true } }).length, 1, 'any spelling that asks counts');
    assert.equal(create({ HostConfig: { binds: ['/:/h'] } }).length, 1);
    assert.throws(() => hostAccessOf('POST', '/v1.53/containers/create', '{"HostConfig": {"Privileged": true}'), (err: unknown) => err instanceof BridgeError && err.status === 400);
  });
});

describe('bridge to an engine socket', () => {
  let dir: string;
  let engine: Awaited<ReturnType<typeof fakeEngine>>;
  let endpoint: { socketPath: string };
  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'berth-bridge-'));
    endpoint = { socketPath: path.join(dir, 'e.sock') };
    engine = await fakeEngine(endpoint.socketPath);
  });
  after(async () => {
    await engine.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('forwards an allowed request and returns status and body', async () => {
    const res = await forwardRequest(endpoint, { method: 'GET', path: '/v1.53/containers/json?all=1' });
    assert.equal(res.status, 200);
    assert.deepEqual(JSON.parse(res.body), [{ Id: 'c1', Names: ['/web'] }]);
    const missing = await forwardRequest(endpoint, { method: 'GET', path: '/v1.53/containers/zz/json' });
    assert.equal(missing.status, 404);
    await assert.rejects(forwardRequest(endpoint, { method: 'POST', path: '/v1.53/swarm/leave' }), /not an operation the app may use/);
    // swarm init goes through only with the user's consent (none given here).
    await assert.rejects(forwardRequest(endpoint, { method: 'POST', path: '/v1.53/swarm/init' }), /refused without the user's consent: the request makes this engine a swarm manager/);
  });

  it('sends a privileged or host-mounting create only after the user allowed it', async () => {
    const body = JSON.stringify({ Image: 'busybox', HostConfig: { Privileged: true, Binds: ['/:/host'] } });
    const req = { method: 'POST', path: '/v1.53/containers/create?name=root', body };
    const reached = () => engine.seen.filter((s) => s.startsWith('POST /v1.53/containers/create?name=root')).length;
    await assert.rejects(forwardRequest(endpoint, req), (err: unknown) => err instanceof BridgeError && err.status === 403 && /consent.*privileged.*mounts the host's \/ at \/host/.test(err.message));
    const asked: string[][] = [];
    await assert.rejects(
      forwardRequest(endpoint, req, async (ask) => (asked.push(ask.reasons), false)),
      (err: unknown) => err instanceof BridgeError && err.status === 403,
    );
    assert.equal(asked.length, 1);
    assert.equal(reached(), 0, 'nothing reached the engine');
    // Streams are held to the same check (a create could be sent as one).
    const port = new FakePort();
    await openStream(endpoint, req, port);
    assert.equal(port.sent[0].type, 'error');
    assert.equal(port.sent[0].status, 403);
    assert.equal(reached(), 0);
    // Allowed: it goes through, once.
    const res = await forwardRequest(endpoint, req, async () => true);
    assert.equal(res.status, 404, 'the fake engine answered');
    assert.equal(reached(), 1);
    // A plain create never asks.
    let questions = 0;
    await forwardRequest(endpoint, { method: 'POST', path: '/v1.53/containers/create?name=plain', body: JSON.stringify({ Image: 'busybox', HostConfig: { Binds: ['data:/data'] } }) }, async () => (questions++, false));
    assert.equal(questions, 0);
    assert.ok(engine.seen.some((s) => s.startsWith('POST /v1.53/containers/create?name=plain')));
  });

  it('streams a response over a port until the engine ends it', async () => {
    const port = new FakePort();
    openStream(endpoint, { method: 'GET', path: '/v1.53/events' }, port);
    await port.until((s) => s.some((m) => m.type === 'end'));
    assert.equal(port.text(), '{"Type":"container","Action":"start"}\n{"Type":"container","Action":"die"}\n');
    assert.equal(port.closed, true);
    const refused = new FakePort();
    openStream(endpoint, { method: 'GET', path: '/v1.53/containers/c1/export' }, refused);
    assert.equal(refused.sent[0].type, 'error');
    assert.equal(refused.sent[0].status, 403);
  });

  it('bridges an exec terminal both ways, with keystrokes sent before the upgrade', async () => {
    const port = new FakePort();
    openTerminal(endpoint, { kind: 'exec', execId: 'e1' }, '1.53', port);
    port.send({ type: 'data', data: new TextEncoder().encode('echo hi') });
    await port.until(() => port.text() === 'ECHO HI');
    assert.ok(engine.seen.some((s) => s.startsWith('POST /v1.53/exec/e1/start upgrade=tcp body={"Detach":false,"Tty":true}')));
    port.send({ type: 'data', data: new TextEncoder().encode('exit\n') });
    await port.until((s) => s.some((m) => m.type === 'end'));
  });

  it('attaches to a container, and reports an unknown exec with the engine message', async () => {
    const port = new FakePort();
    openTerminal(endpoint, { kind: 'attach', containerId: 'c1' }, '1.53', port);
    port.send({ type: 'data', data: new TextEncoder().encode('ls') });
    await port.until(() => port.text() === 'LS');
    port.send({ type: 'close' });
    const bad = new FakePort();
    openTerminal(endpoint, { kind: 'exec', execId: 'nope' }, '1.53', bad);
    await bad.until((s) => s.some((m) => m.type === 'error'));
    assert.equal(bad.sent.at(-1).message, 'No such exec: nope');
    const invalid = new FakePort();
    openTerminal(endpoint, { kind: 'exec', execId: '../x' } as never, '1.53', invalid);
    assert.equal(invalid.sent[0].status, 400);
  });
});

describe('bridge uploads', () => {
  let dir: string;
  let engine: Awaited<ReturnType<typeof fakeEngine>>;
  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'berth-bridge-upload-'));
    engine = await fakeEngine(path.join(dir, 'engine.sock'));
  });
  after(async () => {
    await engine.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('sends a build context in chunks, acknowledges each once sent, and streams the answer back', async () => {
    const port = new FakePort();
    openUpload({ socketPath: path.join(dir, 'engine.sock') }, { method: 'POST', path: '/v1.53/build?t=app%3A1&dockerfile=Dockerfile' }, port);
    const chunk = new Uint8Array(256 * 1024).fill(7);
    for (let i = 0; i < 3; i++) port.send({ type: 'data', data: chunk });
    await port.until((sent) => sent.filter((m) => m.type === 'ack').length === 3);
    assert.equal(port.sent.filter((m) => m.type === 'ack').reduce((n, m) => n + m.bytes, 0), 3 * chunk.length);
    port.send({ type: 'end-upload' });
    await port.until((sent) => sent.some((m) => m.type === 'end'));
    assert.match(port.text(), new RegExp(`context of ${3 * chunk.length} bytes \\(application/x-tar\\)`));
    assert.match(port.text(), /"aux":\{"ID":"sha256:feed"\}/);
    assert.ok(engine.seen.includes('POST /v1.53/build?t=app%3A1&dockerfile=Dockerfile'));
  });

  it('takes uploads for builds only, without options that reach beyond the build', () => {
    assert.equal(checkUpload('POST', '/v1.53/build?t=a&t=b&nocache=1'), '/v1.53/build?t=a&t=b&nocache=1');
    for (const [m, p] of [
      ['POST', '/v1.53/images/load'],
      ['PUT', '/v1.53/containers/c1/archive?path=/'],
      ['GET', '/v1.53/build'],
      ['POST', '/v1.53/build?networkmode=host'],
      ['POST', '/v1.53/build?cgroupparent=/'],
    ])
      assert.throws(() => checkUpload(m, p), (err: unknown) => err instanceof BridgeError && err.status === 403, `${m} ${p}`);
    const port = new FakePort();
    openUpload({ socketPath: path.join(dir, 'engine.sock') }, { method: 'POST', path: '/v1.53/build?networkmode=host' }, port);
    assert.equal(port.sent[0].type, 'error');
    assert.equal(port.sent[0].status, 403);
    assert.equal(port.closed, true);
  });
});
