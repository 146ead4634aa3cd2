/**
 * Bad input gets a clear 4xx and never a 5xx, a crash or a stored surprise: streams of the build, import,
 * archive and export paths failing or cut by the client; statuses of odd requests (an over-long path or
 * volume name, a body nested thousands deep, a link removal of a missing container); name filters as Go
 * (RE2) regular expressions in linear time; control characters in values written into the container's
 * files; request bodies decoded as Go decodes them (keys in any case, unknown keys dropped).
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { describe, it } from 'node:test';
import { buildLines, compress, contextTar } from './build-support.js';
import { useEngine } from './harness.js';

describe('input hardening', () => {
  const engine = useEngine();

  const alive = async () => {
    const ping = await engine.request('GET', '/_ping');
    assert.equal(ping.status, 200, `the daemon stopped answering:\n${engine.daemonLog}`);
  };
  const create = async (body: unknown, name?: string) =>
    engine.request('POST', `/v1.47/containers/create${name ? `?name=${name}` : ''}`, { body });
  const assert400 = (r: { status: number; text: string; json(): any }, message: RegExp) => {
    assert.equal(r.status, 400, r.text);
    assert.match(r.json().message, message);
  };

  /** Sends a request and hangs up as soon as the first bytes of the answer arrive. */
  const hangUpAfterFirstBytes = (method: string, urlPath: string) =>
    new Promise<number>((resolve, reject) => {
      const req = http.request({ socketPath: engine.socket, method, path: urlPath }, (res) => {
        res.once('data', () => {
          req.destroy();
          resolve(res.statusCode ?? 0);
        });
        res.once('end', () => resolve(res.statusCode ?? 0));
      });
      req.on('error', () => undefined);
      req.setTimeout(30_000, () => reject(new Error(`${urlPath} timed out`)));
      req.end();
    });

  describe('streams', () => {
    it('ADD of a local tar holding a ../ entry fails the build in its stream; the daemon lives on', async () => {
      const evil = await contextTar({ 'ok.txt': 'fine', '../escape.txt': 'no' });
      for (const [name, archive] of [['evil.tar', evil], ['evil.tar.gz', compress(evil, 'gzip')]] as const) {
        const context = await contextTar({ Dockerfile: `FROM busybox\nADD ${name} /unpacked/\n`, [name]: archive });
        const r = await engine.request('POST', '/v1.41/build?t=evil:1&rm=1', { body: context, headers: { 'content-type': 'application/x-tar' }, timeoutMs: 120_000 });
        await alive();
        assert.equal(r.status, 200, r.text);
        const last = buildLines(r.text).pop()!;
        assert.match(last.error ?? '', /points outside its destination/, r.text);
      }
      assert.equal((await engine.request('GET', '/images/evil:1/json')).status, 404);
      // A gzip archive that is corrupt after its header fails the same way.
      const corrupt = Buffer.concat([compress(evil, 'gzip').subarray(0, 20), Buffer.alloc(4096, 0x5a)]);
      const context = await contextTar({ Dockerfile: 'FROM busybox\nADD corrupt.tar.gz /unpacked/\n', 'corrupt.tar.gz': corrupt });
      const r = await engine.request('POST', '/v1.41/build?t=evil:2&rm=1', { body: context, headers: { 'content-type': 'application/x-tar' }, timeoutMs: 120_000 });
      await alive();
      assert.equal(r.status, 200, r.text);
      assert.ok(buildLines(r.text).pop()!.error, r.text);
    });

    it('a corrupt tar to import or to archive PUT is an error, the daemon lives on', async () => {
      const garbage = Buffer.concat([Buffer.from('not a tar at all '), Buffer.alloc(2048, 0x41)]);
      const truncated = (await contextTar({ 'big.bin': Buffer.alloc(100_000, 1) })).subarray(0, 20_000);
      for (const body of [garbage, truncated]) {
        const imported = await engine.request('POST', '/v1.41/images/create?fromSrc=-&repo=corrupt&tag=1', { body, headers: { 'content-type': 'application/x-tar' } });
        await alive();
        assert.ok(imported.status >= 400 || /error/i.test(imported.text), imported.text);
      }
      const created = await create({ Image: 'busybox', Cmd: ['true'] }, 'corrupt-put');
      assert.equal(created.status, 201, created.text);
      const longName = await contextTar({ ['n'.repeat(300)]: 'x' });
      for (const body of [garbage, truncated, longName]) {
        const put = await engine.request('PUT', '/v1.41/containers/corrupt-put/archive?path=/tmp', { body, headers: { 'content-type': 'application/x-tar' } });
        await alive();
        assert.ok(put.status >= 400 && put.status < 500, `${put.status} ${put.text}`);
      }
    });

    it('an import from a URL refused before reading (bad repository) closes its download; a failing server later does no harm', async () => {
      const server = http.createServer((_req, res) => {
        res.writeHead(200, { 'content-type': 'application/x-tar' });
        res.write(Buffer.alloc(512, 0x41));
        setTimeout(() => res.socket?.destroy(), 300);
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      try {
        const port = (server.address() as { port: number }).port;
        const r = await engine.request('POST', `/v1.41/images/create?fromSrc=${encodeURIComponent(`http://127.0.0.1:${port}/rootfs.tar`)}&repo=Not_A_Valid_Repo`);
        assert.equal(r.status, 400, r.text);
        await new Promise((resolve) => setTimeout(resolve, 800));
        await alive();
      } finally {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      }
    });

    it('a client hanging up in the middle of an upload (load, import, archive PUT, build) leaves the daemon serving', async () => {
      const created = await create({ Image: 'busybox', Cmd: ['true'] }, 'upload-cut');
      assert.equal(created.status, 201, created.text);
      const whole = await contextTar({ Dockerfile: 'FROM busybox\nCOPY f /f\n', f: Buffer.alloc(2_000_000, 3) });
      const uploadAndHangUp = (method: string, urlPath: string) =>
        new Promise<void>((resolve) => {
          const req = http.request({ socketPath: engine.socket, method, path: urlPath, headers: { 'content-type': 'application/x-tar', 'content-length': String(whole.length) } });
          req.on('error', () => resolve());
          req.on('response', (res) => res.resume());
          req.write(whole.subarray(0, 600_000));
          setTimeout(() => {
            req.destroy();
            resolve();
          }, 300);
        });
      for (const [method, urlPath] of [
        ['POST', '/v1.41/images/load'],
        ['POST', '/v1.41/images/create?fromSrc=-&repo=cut'],
        ['PUT', '/v1.41/containers/upload-cut/archive?path=/tmp'],
        ['POST', '/v1.41/build?t=cut'],
      ]) {
        await uploadAndHangUp(method, urlPath);
        await new Promise((resolve) => setTimeout(resolve, 300));
        await alive();
      }
      assert.equal((await engine.request('GET', '/images/cut/json')).status, 404);
    });

    it('a client hanging up in the middle of export, save and archive GET leaves the daemon serving', async () => {
      const created = await create({ Image: 'busybox', Cmd: ['true'] }, 'hangup');
      assert.equal(created.status, 201, created.text);
      for (let round = 0; round < 3; round++) {
        assert.equal(await hangUpAfterFirstBytes('GET', '/v1.41/containers/hangup/export'), 200);
        assert.equal(await hangUpAfterFirstBytes('GET', '/v1.41/containers/hangup/archive?path=/bin'), 200);
        assert.equal(await hangUpAfterFirstBytes('GET', '/v1.41/images/busybox/get'), 200);
        assert.equal(await hangUpAfterFirstBytes('GET', '/v1.41/images/get?names=busybox'), 200);
      }
      await alive();
      // The stopped container's root was released by every cut copy: it can be removed.
      assert.equal((await engine.request('DELETE', '/containers/hangup')).status, 204);
    });
  });

  describe('statuses', () => {
    it('DELETE with link=1 of a missing container is a 404', async () => {
      const r = await engine.request('DELETE', '/v1.41/containers/no-such-container?link=1');
      assert.equal(r.status, 404, r.text);
      assert.match(r.json().message, /no-such-container/);
    });

    it('archive HEAD and GET with an over-long path are 400', async () => {
      const created = await create({ Image: 'busybox', Cmd: ['true'] }, 'longpath');
      assert.equal(created.status, 201, created.text);
      for (const p of [`/${'a'.repeat(300)}`, `/${'abc/'.repeat(1100)}x`]) {
        for (const method of ['HEAD', 'GET']) {
          const r = await engine.request(method, `/v1.41/containers/longpath/archive?path=${encodeURIComponent(p)}`);
          assert.equal(r.status, 400, `${method} ${r.status} ${r.text}`);
          if (method === 'GET') assert.match(r.json().message, /too long/);
        }
      }
    });

    it('a volume name over 255 characters is a 400 naming the limit', async () => {
      const r = await engine.request('POST', '/v1.41/volumes/create', { body: { Name: 'v'.repeat(300) } });
      assert400(r, /the limit is 255/);
      const ok = await engine.request('POST', '/v1.41/volumes/create', { body: { Name: 'v'.repeat(255) } });
      assert.equal(ok.status, 201, ok.text);
      assert.equal((await engine.request('DELETE', `/volumes/${'v'.repeat(255)}`)).status, 204);
    });

    it('a create body nested 5,000 levels deep is a 400', async () => {
      const nested = '{"Labels":'.repeat(5000) + '{}' + '}'.repeat(5000);
      const r = await engine.request('POST', '/v1.41/containers/create', { body: nested, headers: { 'content-type': 'application/json' } });
      assert400(r, /nested deeper than/);
      const inHostConfig = `{"Image":"busybox","HostConfig":{"Bogus":${'['.repeat(5000)}${']'.repeat(5000)}}}`;
      assert400(await engine.request('POST', '/v1.41/containers/create', { body: inHostConfig, headers: { 'content-type': 'application/json' } }), /nested deeper than/);
      await alive();
    });
  });

  describe('name filters', () => {
    it('match as RE2 patterns in linear time; invalid and Perl-only patterns are 400', async () => {
      const count = 200;
      for (let i = 0; i < count; i += 20) {
        await Promise.all(
          Array.from({ length: 20 }, async (_, j) => {
            const r = await create({ Image: 'busybox', Cmd: ['true'] }, `${'a'.repeat(28)}-${i + j}`);
            assert.equal(r.status, 201, r.text);
          }),
        );
      }
      const list = (filters: object) => engine.request('GET', `/v1.41/containers/json?all=1&filters=${encodeURIComponent(JSON.stringify(filters))}`);
      for (const pattern of ['(a+)+$', '(a|aa)+$', '(a*)*b']) {
        const started = Date.now();
        const r = await list({ name: [pattern] });
        const took = Date.now() - started;
        assert.equal(r.status, 200, r.text);
        assert.deepEqual(r.json(), []);
        assert.ok(took < 1000, `${pattern} took ${took} ms`);
      }
      const some = await list({ name: ['^a+-1\\d$'] });
      assert.equal(some.json().length, 10);
      const names = await list({ name: [`^/${'a'.repeat(28)}-7$`] });
      assert.deepEqual(names.json().map((c: { Names: string[] }) => c.Names[0]), [`/${'a'.repeat(28)}-7`]);
      for (const bad of ['(', '(?=x)', 'a(?!b)', '[z-a]']) assert400(await list({ name: [bad] }), /invalid filter 'name'/);
      assert400(await engine.request('GET', `/v1.41/networks?filters=${encodeURIComponent(JSON.stringify({ name: ['(?=x)'] }))}`), /invalid filter 'name'/);
      assert400(await engine.request('GET', `/v1.41/images/json?filters=${encodeURIComponent(JSON.stringify({ reference: ['busy[z-a]'] }))}`), /invalid reference filter pattern/);
    });
  });

  describe('values that end up in files', () => {
    it('control characters in DNS, host and name fields are refused at create', async () => {
      const cases: Array<[Record<string, unknown>, RegExp]> = [
        [{ HostConfig: { Dns: ['1.1.1.1\nnameserver 6.6.6.6'] } }, /HostConfig\.Dns\[0\]/],
        [{ HostConfig: { DnsSearch: ['example.com\roptions ndots:9'] } }, /HostConfig\.DnsSearch\[0\]/],
        [{ HostConfig: { DnsOptions: ['ndots:1\nnameserver 6.6.6.6'] } }, /HostConfig\.DnsOptions\[0\]/],
        [{ HostConfig: { ExtraHosts: ['good:10.0.0.1', 'evil:10.0.0.2\u0000'] } }, /HostConfig\.ExtraHosts\[1\]/],
        [{ Hostname: 'box\nevil' }, /Hostname/],
        [{ Domainname: 'example.com\n10.0.0.9 bank' }, /Domainname/],
        [{ NetworkingConfig: { EndpointsConfig: { bridge: { Aliases: ['x\ny'] } } } }, /Aliases\[0\]/],
      ];
      for (const [extra, message] of cases) {
        const r = await create({ Image: 'busybox', Cmd: ['true'], ...extra });
        assert400(r, message);
        assert.match(r.json().message, /control characters/);
      }
    });

    it('network connect refuses control characters in aliases', async () => {
      const net = await engine.request('POST', '/v1.41/networks/create', { body: { Name: 'ctl-net' } });
      assert.equal(net.status, 201, net.text);
      const c = await create({ Image: 'busybox', Cmd: ['true'] }, 'ctl-box');
      assert.equal(c.status, 201, c.text);
      const r = await engine.request('POST', '/v1.41/networks/ctl-net/connect', { body: { Container: 'ctl-box', EndpointConfig: { Aliases: ['ok', 'bad\nalias'] } } });
      assert400(r, /EndpointConfig\.Aliases\[1\].*control characters/);
      assert.equal((await engine.request('DELETE', '/containers/ctl-box')).status, 204);
      assert.equal((await engine.request('DELETE', '/networks/ctl-net')).status, 204);
    });

    it('a bind mount with a relative source is refused at create', async () => {
      const r = await create({ Image: 'busybox', Cmd: ['true'], HostConfig: { Mounts: [{ Type: 'bind', Source: 'relative/dir', Target: '/mnt' }] } });
      assert400(r, /must be absolute/);
      const lower = await create({ image: 'busybox', cmd: ['true'], hostconfig: { mounts: [{ type: 'bind', source: 'rel', target: '/mnt' }] } });
      assert400(lower, /must be absolute/);
    });
  });

  describe('bodies decoded as Go decodes them', () => {
    it('field names in any case land under their canonical names; unknown keys are not stored', async () => {
      const r = await create(
        {
          image: 'busybox',
          cmd: ['true'],
          LABELS: { 'Keep.Case': 'yes' },
          Bogus: 'dropped',
          hostconfig: { memory: 16 * 1024 * 1024, CPURealtimePeriod: 0, restartpolicy: { name: 'on-failure', maximumretrycount: 2 }, NotAField: { deep: true } },
        },
        'lowercase',
      );
      assert.equal(r.status, 201, r.text);
      const inspect = await engine.request('GET', '/v1.47/containers/lowercase/json');
      const c = inspect.json();
      assert.deepEqual(c.Config.Cmd, ['true']);
      assert.equal(c.Config.Image, 'busybox');
      assert.equal(c.Config.Labels['Keep.Case'], 'yes');
      assert.equal(c.HostConfig.Memory, 16 * 1024 * 1024);
      assert.deepEqual(c.HostConfig.RestartPolicy, { Name: 'on-failure', MaximumRetryCount: 2 });
      assert.doesNotMatch(inspect.text, /Bogus|NotAField|hostconfig|"memory"/);
      // Through the docker CLI too.
      assert.match(await engine.dockerOk(['inspect', '--format', '{{.HostConfig.Memory}} {{.HostConfig.RestartPolicy.Name}}', 'lowercase']), /^16777216 on-failure\n$/);
    });

    it('exec create reads detachKeys as DetachKeys, and null as absent', async () => {
      const started = await create({ Image: 'busybox', Cmd: ['sleep', '60'] }, 'execcase');
      assert.equal(started.status, 201, started.text);
      assert.equal((await engine.request('POST', '/containers/execcase/start')).status, 204);
      const bad = await engine.request('POST', '/v1.41/containers/execcase/exec', { body: { cmd: ['true'], detachKeys: 'not-a-key' } });
      assert400(bad, /Invalid detach keys/);
      const ok = await engine.request('POST', '/v1.41/containers/execcase/exec', { body: { cmd: ['true'], attachstdout: true, Env: null, whatever: 1 } });
      assert.equal(ok.status, 201, ok.text);
      const exec = (await engine.request('GET', `/exec/${ok.json().Id}/json`)).json();
      assert.deepEqual(exec.ProcessConfig.arguments ?? [], []);
      assert.equal(exec.ProcessConfig.entrypoint, 'true');
      assert.equal(exec.OpenStdout, true);
      assert.equal((await engine.request('DELETE', '/containers/execcase?force=1')).status, 204);
    });
  });
});
