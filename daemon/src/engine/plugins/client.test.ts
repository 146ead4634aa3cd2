import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Duplex, PassThrough } from 'node:stream';
import { after, describe, test } from 'node:test';
import { NotFound } from '../../errors.js';
import { parsePluginAddress, PluginClient, PluginError, PluginUnreachable } from './client.js';
import { LegacyPlugins, PluginNotImplementing } from './legacy.js';

const tmp = mkdtempSync(path.join(os.tmpdir(), 'plugin-client-'));
const servers: http.Server[] = [];
after(async () => {
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  rmSync(tmp, { recursive: true, force: true });
});

function serve(socketPath: string, handler: (method: string, body: any, req: http.IncomingMessage) => { status?: number; json: object }): Promise<void> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString();
      const { status = 200, json } = handler((req.url ?? '/').slice(1), text ? JSON.parse(text) : {}, req);
      res.writeHead(status, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(json));
    });
  });
  servers.push(server);
  return new Promise((resolve) => server.listen(socketPath, () => resolve()));
}


/** The plugin part's discovery reads, on this machine's files (as host/linux does them). */
const machineFiles: ConstructorParameters<typeof LegacyPlugins>[0]['files'] = {
  kindOf: async (p) => {
    try {
      const st = statSync(p);
      return st.isDirectory() ? 'dir' : st.isFile() ? 'file' : st.isSocket() ? 'socket' : 'other';
    } catch {
      return undefined;
    }
  },
  readText: async (file) => (existsSync(file) ? readFileSync(file, 'utf8') : undefined),
  dial: async (address) => {
    const socket = 'socketPath' in address ? net.connect(address.socketPath) : net.connect(address.port, address.host);
    await once(socket, 'connect');
    return socket;
  },
  entries: async (dir) => {
    if (!existsSync(dir)) return [];
    return readdirSync(dir).map((name) => {
      const st = statSync(path.join(dir, name));
      return { name, kind: st.isDirectory() ? 'dir' : st.isFile() ? 'file' : st.isSocket() ? 'socket' : 'other' };
    });
  },
};

describe('PluginClient', () => {
  test('POSTs /Interface.Method with a JSON body in the plugins media type', async () => {
    const sock = path.join(tmp, 'echo.sock');
    let seen: { method: string; body: any; accept?: string; type?: string; verb?: string } | undefined;
    await serve(sock, (method, body, req) => {
      seen = { method, body, accept: req.headers.accept, type: req.headers['content-type'], verb: req.method };
      return { json: { Mountpoint: '/somewhere' } };
    });
    const answer = await new PluginClient({ socketPath: sock }).call('VolumeDriver.Path', { Name: 'v' });
    assert.deepEqual(answer, { Mountpoint: '/somewhere' });
    assert.deepEqual(seen, {
      method: 'VolumeDriver.Path', body: { Name: 'v' }, verb: 'POST',
      accept: 'application/vnd.docker.plugins.v1.2+json', type: 'application/vnd.docker.plugins.v1.2+json',
    });
  });

  test('Err is an error: as is with status 200, after the method otherwise', async () => {
    const sock = path.join(tmp, 'err.sock');
    await serve(sock, (method) => (method === 'A.Ok' ? { json: { Err: 'plain' } } : { status: 500, json: { Err: 'failed' } }));
    const client = new PluginClient({ socketPath: sock });
    await assert.rejects(client.call('A.Ok'), (err: unknown) => err instanceof PluginError && err.message === 'plain');
    await assert.rejects(client.call('A.Bad'), (err: unknown) => err instanceof PluginError && err.message === 'A.Bad: failed');
  });

  test('retries while the plugin starts, and gives up after its window', async () => {
    const sock = path.join(tmp, 'late.sock');
    const started = Date.now();
    setTimeout(() => void serve(sock, () => ({ json: { Implements: ['VolumeDriver'] } })), 400);
    assert.deepEqual(await new PluginClient({ socketPath: sock }, 5000).call('Plugin.Activate'), { Implements: ['VolumeDriver'] });
    assert.ok(Date.now() - started >= 350);
    await assert.rejects(new PluginClient({ socketPath: path.join(tmp, 'never.sock') }, 300).call('Plugin.Activate'), PluginUnreachable);
  });

  test('connections are the dialer\'s: a stream that is no socket carries the call, and a refused dial is retried', async () => {
    const sock = path.join(tmp, 'dialed.sock');
    await serve(sock, (method, body) => ({ json: { Method: method, Name: body.Name } }));
    const dialed: string[] = [];
    const client = new PluginClient({ socketPath: '/no/such/place.sock' }, 5000, async (address) => {
      dialed.push('socketPath' in address ? address.socketPath : '');
      if (dialed.length === 1) throw Object.assign(new Error('connect ENOENT'), { code: 'ENOENT' });
      // As the remote Host gives it: two streams joined, the socket at the far end of both.
      const socket = net.connect(sock);
      await once(socket, 'connect');
      const toPlugin = new PassThrough();
      const fromPlugin = new PassThrough();
      toPlugin.pipe(socket);
      socket.pipe(fromPlugin);
      return Duplex.from({ writable: toPlugin, readable: fromPlugin });
    });
    assert.deepEqual(await client.call('VolumeDriver.Get', { Name: 'v' }), { Method: 'VolumeDriver.Get', Name: 'v' });
    assert.deepEqual(await client.call('VolumeDriver.List'), { Method: 'VolumeDriver.List' });
    assert.deepEqual(dialed, ['/no/such/place.sock', '/no/such/place.sock', '/no/such/place.sock']);
    const refused = new PluginClient({ socketPath: sock }, 300, async () => {
      throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    });
    await assert.rejects(refused.call('Plugin.Activate'), PluginUnreachable);
  });

  test('addresses of spec files', () => {
    assert.deepEqual(parsePluginAddress('unix:///run/x.sock\n'), { socketPath: '/run/x.sock' });
    assert.deepEqual(parsePluginAddress('tcp://127.0.0.1:8080'), { host: '127.0.0.1', port: 8080 });
    assert.throws(() => parsePluginAddress('ftp://x'), /unsupported scheme/);
  });
});

describe('LegacyPlugins', () => {
  test('finds sockets and spec files, activates once, checks the interface', async () => {
    const socketDir = path.join(tmp, 'socks');
    const specDir = path.join(tmp, 'specs');
    mkdirSync(path.join(socketDir, 'nested'), { recursive: true });
    mkdirSync(specDir);
    let activations = 0;
    const handler = () => {
      activations++;
      return { json: { Implements: ['VolumeDriver'] } };
    };
    await serve(path.join(socketDir, 'flat.sock'), handler);
    await serve(path.join(socketDir, 'nested', 'nested.sock'), handler);
    await serve(path.join(tmp, 'far.sock'), handler);
    writeFileSync(path.join(specDir, 'byspec.spec'), `unix://${path.join(tmp, 'far.sock')}`);
    writeFileSync(path.join(specDir, 'byjson.json'), JSON.stringify({ Name: 'byjson', Addr: `unix://${path.join(tmp, 'far.sock')}` }));
    const plugins = new LegacyPlugins({ files: machineFiles, socketDirs: [socketDir], specDirs: [specDir] });
    assert.deepEqual(await plugins.names(), ['byjson', 'byspec', 'flat', 'nested']);
    for (const name of ['flat', 'nested', 'byspec', 'byjson']) assert.equal((await plugins.get(name, 'VolumeDriver')).name, name);
    await plugins.get('flat', 'VolumeDriver');
    assert.equal(activations, 4, 'one activation per plugin');
    await assert.rejects(plugins.get('flat', 'NetworkDriver'), PluginNotImplementing);
    await assert.rejects(plugins.get('absent', 'VolumeDriver'), (err: unknown) => err instanceof NotFound && err.message === 'plugin "absent" not found');
    await assert.rejects(plugins.get('../etc', 'VolumeDriver'), NotFound);
  });
});
