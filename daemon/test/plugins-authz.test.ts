/**
 * Authorization plugins: `berthd --authorization-plugin fixauthz` with a legacy plugin built from C source
 * in this repository (fixtures/plugin/authzplugin.c, serving a socket in a folder of the test's own). Every
 * request and response is put to it in Docker's shapes (the method, URI, headers without credentials, the
 * JSON body in base64; the response's status, headers and JSON body); it denies volume creation and the
 * image list's answer, which the docker CLI then shows as Docker words it. The same program as a managed
 * plugin (`docker.authz/1.0`), enabled before the daemon restarts with the flag naming it.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { eventually, startEngine, type Engine, type EngineOptions } from './harness.js';
import { FIXTURE_DIR, pluginContext } from './plugin-support.js';
import { freePort } from './registry-support.js';

let engine: Engine;
let dir: string;
let plugin: ChildProcess | undefined;
let logFile: string;

before(async () => {
  dir = mkdtempSync('/tmp/bpa-');
  const binary = path.join(dir, 'authzplugin');
  const cc = spawnSync('gcc', ['-static', '-O2', '-o', binary, path.join(FIXTURE_DIR, 'authzplugin.c')], { encoding: 'utf8' });
  assert.equal(cc.status, 0, cc.stderr);
  const sockets = path.join(dir, 'sockets');
  spawnSync('mkdir', ['-p', sockets]);
  logFile = path.join(dir, 'calls.log');
  plugin = spawn(binary, [path.join(sockets, 'fixauthz.sock'), logFile], { stdio: 'ignore' });
  await eventually(() => existsSync(path.join(sockets, 'fixauthz.sock')));
  engine = await startEngine({ args: ['--authorization-plugin', 'fixauthz'], env: { BERTH_PLUGIN_SOCKET_DIRS: sockets, BERTH_PLUGIN_SPEC_DIRS: '' } });
  await engine.loadBusybox();
});

after(async () => {
  await engine?.cleanup();
  if (plugin?.pid) process.kill(plugin.pid, 'SIGKILL');
  if (dir) rmSync(dir, { recursive: true, force: true });
});

interface Call {
  method: string;
  body: any;
}

function calls(): Call[] {
  return readFileSync(logFile, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const space = line.indexOf(' ');
      return { method: line.slice(0, space), body: JSON.parse(line.slice(space + 1)) };
    });
}

const decode = (b64: string | undefined) => (b64 === undefined ? undefined : Buffer.from(b64, 'base64').toString('utf8'));

describe('authorization plugins', () => {
  test('requests and responses are put to the plugin in Docker shapes; allowed ones are served', async () => {
    assert.equal(await engine.dockerOk(['run', '--rm', '--name', 'authz-run', 'busybox', 'echo', 'hi']), 'hi\n');
    const all = calls();
    assert.equal(all[0]?.method, 'Plugin.Activate');
    const create = all.find((c) => c.method === 'AuthZPlugin.AuthZReq' && /^\/v1\.\d+\/containers\/create\?name=authz-run$/.test(c.body.RequestUri));
    assert.ok(create, 'the create request was put to the plugin');
    assert.equal(create.body.RequestMethod, 'POST');
    assert.equal(JSON.parse(decode(create.body.RequestBody)!).Image, 'busybox');
    assert.equal(create.body.RequestHeaders['Content-Type'], 'application/json');
    const created = all.find((c) => c.method === 'AuthZPlugin.AuthZRes' && c.body.RequestUri === create.body.RequestUri);
    assert.ok(created, 'and its response');
    assert.equal(created.body.ResponseStatusCode, 201);
    assert.match(JSON.parse(decode(created.body.ResponseBody)!).Id, /^[0-9a-f]{64}$/);
    assert.equal(JSON.parse(decode(created.body.RequestBody)!).Image, 'busybox');
    // The attach (a hijacked connection) and the wait went through it too.
    assert.ok(all.some((c) => c.method === 'AuthZPlugin.AuthZReq' && /\/containers\/[0-9a-f]{64}\/attach\?/.test(c.body.RequestUri)));
    // The wait's answer is a stream: the plugin hears of it once it ended, maybe after the client went on.
    await eventually(() => calls().some((c) => c.method === 'AuthZPlugin.AuthZRes' && /\/containers\/[0-9a-f]{64}\/wait/.test(c.body.RequestUri)));
  });

  test('exec (a JSON body in the head of an upgrade request) and logs (a stream) go through it', async () => {
    await engine.dockerOk(['run', '-d', '--name', 'authz-exec', 'busybox', 'sh', '-c', 'echo logged; exec sleep 300']);
    assert.equal(await engine.dockerOk(['exec', 'authz-exec', 'echo', 'from exec'], { timeoutMs: 30_000 }), 'from exec\n');
    assert.equal(await engine.dockerOk(['logs', 'authz-exec']), 'logged\n');
    const start = calls().find((c) => c.method === 'AuthZPlugin.AuthZReq' && /\/exec\/[0-9a-f]{64}\/start$/.test(c.body.RequestUri));
    assert.ok(start, 'the exec start was put to the plugin');
    assert.equal(JSON.parse(decode(start.body.RequestBody)!).Detach, false);
    await engine.dockerOk(['rm', '-f', 'authz-exec']);
  });

  test('a denied request is a 403 with the plugin message, the CLI shows it, nothing is done', async () => {
    const cli = await engine.docker(['volume', 'create', 'authz-vol']);
    assert.notEqual(cli.code, 0);
    assert.match(cli.stderr, /Error response from daemon: authorization denied by plugin fixauthz: volume creation is not allowed/);
    const api = await engine.request('POST', '/volumes/create', { body: { Name: 'authz-vol' } });
    assert.equal(api.status, 403);
    assert.deepEqual(api.json(), { message: 'authorization denied by plugin fixauthz: volume creation is not allowed' });
    assert.equal((await engine.dockerOk(['volume', 'ls', '-q'])).trim(), '');
  });

  test('a denied response is replaced by the 403', async () => {
    const cli = await engine.docker(['images']);
    assert.notEqual(cli.code, 0);
    assert.match(cli.stderr, /authorization denied by plugin fixauthz: the image list is secret/);
    const api = await engine.request('GET', '/images/json');
    assert.equal(api.status, 403);
    assert.doesNotMatch(api.text, /busybox/);
  });

  test('credentials are not shown to the plugin; bodies are read whole by the handler after it', async () => {
    const before = calls().length;
    const name = 'x'.repeat(60);
    const r = await engine.request('POST', `/containers/create?name=authz-secret`, {
      body: { Image: 'busybox', Cmd: ['true'], Labels: { big: name.repeat(1000) } },
      headers: { 'X-Registry-Auth': 'c2VjcmV0', Authorization: 'Bearer secret' },
    });
    assert.equal(r.status, 201, r.text);
    const inspected = (await engine.request('GET', '/containers/authz-secret/json')).json();
    assert.equal(inspected.Config.Labels.big.length, 60_000);
    const seen = calls().slice(before).find((c) => c.method === 'AuthZPlugin.AuthZReq' && c.body.RequestUri.startsWith('/containers/create'));
    assert.ok(seen);
    assert.deepEqual(Object.keys(seen.body.RequestHeaders).filter((h) => /auth/i.test(h)), []);
    assert.equal(JSON.parse(decode(seen.body.RequestBody)!).Labels.big.length, 60_000);
    await engine.dockerOk(['rm', 'authz-secret']);
  });
});

describe('a managed authorization plugin', () => {
  let managed: Engine | undefined;
  let context: string | undefined;
  before(async () => {
    context = pluginContext('authzplugin.c', 'authzplugin', {
      Description: 'an authorization plugin for the tests',
      Interface: { Types: ['docker.authz/1.0'], Socket: 'fixauthz.sock' },
      Entrypoint: ['/authzplugin', '/run/docker/plugins/fixauthz.sock', '/data/calls.log'],
      Network: { Type: 'none' },
    });
    managed = await startEngine();
    await managed.dockerOk(['plugin', 'create', 'fixauthz', context], { timeoutMs: 60_000 });
    await managed.dockerOk(['plugin', 'enable', 'fixauthz'], { timeoutMs: 60_000 });
    await managed.stop();
    // The same daemon (its roots), started again naming the plugin.
    (managed as unknown as { opts: EngineOptions }).opts.args = ['--authorization-plugin', 'fixauthz'];
    await managed.start();
  });
  after(async () => {
    await managed?.cleanup();
    if (context) rmSync(context, { recursive: true, force: true });
  });

  test('is started with the daemon before the first request and denies what it denies', async () => {
    const cli = await managed!.docker(['volume', 'create', 'authz-managed']);
    assert.notEqual(cli.code, 0);
    assert.match(cli.stderr, /authorization denied by plugin fixauthz: volume creation is not allowed/);
    const p = JSON.parse(await managed!.dockerOk(['plugin', 'inspect', 'fixauthz']))[0];
    assert.equal(p.Enabled, true);
    const log = readFileSync(path.join(managed!.dataRoot, 'plugins', p.Id, 'rootfs', 'data', 'calls.log'), 'utf8');
    assert.match(log, /^AuthZPlugin\.AuthZReq .*"RequestUri":"\/v1\.\d+\/volumes\/create"/m);
    // The daemon needs it for every request: it stays enabled.
    const disable = await managed!.docker(['plugin', 'disable', 'fixauthz']);
    assert.notEqual(disable.code, 0);
    assert.match(disable.stderr, /plugin fixauthz:latest is in use/);
  });
});

describe('an authorization plugin behind a TLS listener', () => {
  let tlsEngine: Engine | undefined;
  let certs: string | undefined;
  let port = 0;
  const file = (name: string) => path.join(certs!, name);
  before(async () => {
    certs = mkdtempSync('/tmp/bpt-');
    const openssl = (args: string[]) => assert.equal(spawnSync('openssl', args, { cwd: certs, encoding: 'utf8' }).status, 0, `openssl ${args.join(' ')}`);
    const key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
    openssl(['req', '-x509', ...key, '-keyout', 'ca-key.pem', '-out', 'ca.pem', '-days', '1', '-subj', '/CN=authz test CA']);
    for (const [who, ext] of [['server', 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n'], ['alice', 'extendedKeyUsage=clientAuth\n']]) {
      writeFileSync(file(`${who}.ext`), ext);
      openssl(['req', ...key, '-keyout', `${who}-key.pem`, '-out', `${who}.csr`, '-subj', `/CN=${who}`]);
      openssl(['x509', '-req', '-in', `${who}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca-key.pem', '-CAcreateserial', '-out', `${who}-cert.pem`, '-days', '1', '-extfile', `${who}.ext`]);
    }
    port = await freePort();
    tlsEngine = await startEngine({
      args: ['-H', `tcp://127.0.0.1:${port}`, '--tlsverify', '--tlscacert', file('ca.pem'), '--tlscert', file('server-cert.pem'), '--tlskey', file('server-key.pem'), '--authorization-plugin', 'fixauthz'],
      env: { BERTH_PLUGIN_SOCKET_DIRS: path.join(dir, 'sockets'), BERTH_PLUGIN_SPEC_DIRS: '' },
    });
  });
  after(async () => {
    await tlsEngine?.cleanup();
    if (certs) rmSync(certs, { recursive: true, force: true });
  });

  test("the user is the client certificate's common name", async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const req = https.request(
        { host: '127.0.0.1', port, path: '/v1.44/version?authz-tls-user', ca: readFileSync(file('ca.pem')), cert: readFileSync(file('alice-cert.pem')), key: readFileSync(file('alice-key.pem')), agent: false },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      req.end();
    });
    assert.equal(status, 200);
    const seen = calls().find((c) => c.method === 'AuthZPlugin.AuthZReq' && c.body.RequestUri === '/v1.44/version?authz-tls-user');
    assert.ok(seen);
    assert.equal(seen.body.User, 'alice');
    assert.equal(seen.body.UserAuthNMethod, 'TLS');
    const local = calls().find((c) => c.method === 'AuthZPlugin.AuthZReq' && c.body.RequestUri.startsWith('/v1.') && c.body.User === undefined);
    assert.ok(local, 'a request on the unix socket has no user');
  });
});
