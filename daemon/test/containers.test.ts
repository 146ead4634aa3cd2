/**
 * Containers through real clients: the docker CLI and dockerode against a real berthd running busybox
 * containers with conmon and the OCI runtime.
 */
import assert from 'node:assert/strict';
import { existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { eventually, runCommand, useEngine } from './harness.js';

const engine = useEngine();

describe('docker run', () => {
  test('runs a command and prints its output', async () => {
    const r = await engine.docker(['run', '--rm', 'busybox', 'echo', 'hi']);
    assert.equal(r.stderr, '');
    assert.equal(r.stdout, 'hi\n');
    assert.equal(r.code, 0);
  });

  test('carries exit codes through: a status, a missing command, death by signal', async () => {
    assert.equal((await engine.docker(['run', '--rm', 'busybox', 'sh', '-c', 'exit 3'])).code, 3);
    const missing = await engine.docker(['run', '--rm', 'busybox', 'no-such-command']);
    assert.equal(missing.code, 127);
    assert.match(missing.stderr, /executable file not found/);
    const id = (await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '60'])).trim();
    await engine.dockerOk(['kill', '-s', 'KILL', id]);
    assert.equal((await engine.dockerOk(['wait', id])).trim(), '137');
    await engine.dockerOk(['rm', id]);
  });

  test('gives piped stdin to the container with -i', async () => {
    const r = await engine.docker(['run', '--rm', '-i', 'busybox', 'sh', '-c', 'tr a-z A-Z; echo end'], { input: 'hello\nworld\n' });
    assert.equal(r.stdout, 'HELLO\nWORLD\nend\n');
    assert.equal(r.code, 0);
  });

  test('runs under a pseudo-terminal with -it', async () => {
    // `script` gives the docker CLI a real terminal of a known size.
    const r = await runCommand('script', ['-qec', `stty cols 91 rows 27; docker run --rm -it busybox sh -c 'tty; stty size'`, '/dev/null'], {
      env: { DOCKER_HOST: engine.host, DOCKER_CONFIG: engine.dockerConfig },
      timeoutMs: 30_000,
      holdInput: true,
    });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /\/dev\/pts\/\d+\r\n/);
    assert.match(r.stdout, /27 91\r\n/);
  });

  test('keeps the container files Docker provides: hostname, hosts and resolv.conf', async () => {
    const r = await engine.dockerOk(['run', '--rm', '--hostname', 'box1', '--add-host', 'db:10.1.2.3', 'busybox', 'sh', '-c', 'hostname; cat /etc/hosts; test -f /etc/resolv.conf && echo resolv']);
    assert.match(r, /^box1\n/);
    assert.match(r, /10\.1\.2\.3\tdb/);
    assert.match(r, /\tbox1\n/);
    assert.match(r, /resolv\n$/);
  });

  test('applies user, working directory, environment and read-only root', async () => {
    const r = await engine.dockerOk(['run', '--rm', '-u', 'nobody', '-w', '/tmp', '-e', 'GREETING=hey', 'busybox', 'sh', '-c', 'id -u; pwd; echo $GREETING']);
    assert.equal(r, '65534\n/tmp\nhey\n');
    const ro = await engine.docker(['run', '--rm', '--read-only', 'busybox', 'touch', '/x']);
    assert.notEqual(ro.code, 0);
    assert.match(ro.stderr, /Read-only file system/);
  });
});

/** Attaches before start (as `docker run` does), starts, and returns the raw stream after the headers. */
async function attachAndRun(body: Record<string, unknown>): Promise<string> {
  const { default: net } = await import('node:net');
  const { Id } = (await engine.request('POST', '/containers/create', { body })).json();
  const out = await new Promise<string>((resolve, reject) => {
    const sock = net.connect(engine.socket, () =>
      sock.write(`POST /containers/${Id}/attach?stream=1&stdout=1&stderr=1 HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n`),
    );
    let data = '';
    let started = false;
    sock.on('data', (d) => {
      data += d.toString('latin1');
      if (!started && data.includes('\r\n\r\n')) {
        started = true;
        engine.request('POST', `/containers/${Id}/start`).catch(reject);
      }
    });
    sock.on('close', () => resolve(data.slice(data.indexOf('\r\n\r\n') + 4)));
    sock.on('error', reject);
  });
  await engine.request('DELETE', `/containers/${Id}?force=1`);
  return out;
}

describe('attach from before the start', () => {
  test('delivers every byte of a short-lived container, exactly once, with and without a TTY', async () => {
    for (let i = 0; i < 20; i++) {
      const tty = await attachAndRun({ Image: 'busybox', Tty: true, Cmd: ['sh', '-c', 'echo one; echo two; echo end'] });
      assert.equal(tty, 'one\r\ntwo\r\nend\r\n', `run ${i} with a TTY`);
      // Without a TTY: multiplexed frames; stdout and stderr are separate pipes, so only each one's own order holds.
      const plain = Buffer.from(await attachAndRun({ Image: 'busybox', Cmd: ['sh', '-c', 'echo one; echo err >&2; echo end'] }), 'latin1');
      const streams: Record<number, string> = { 1: '', 2: '' };
      for (let at = 0; at < plain.length; ) {
        const size = plain.readUInt32BE(at + 4);
        streams[plain[at]] += plain.subarray(at + 8, at + 8 + size).toString();
        at += 8 + size;
      }
      assert.deepEqual(streams, { 1: 'one\nend\n', 2: 'err\n' }, `run ${i} without a TTY`);
    }
  });
});

describe('detached containers', () => {
  test('run -d, logs, logs -f, stop and rm', async () => {
    const id = (await engine.dockerOk(['run', '-d', '--name', 'ticker', 'busybox', 'sh', '-c', 'trap "exit 0" TERM; i=0; while true; do echo line $i; i=$((i+1)); sleep 0.1; done'])).trim();
    assert.match(id, /^[0-9a-f]{64}$/);
    await eventually(async () => (await engine.dockerOk(['logs', 'ticker'])).includes('line 3'));
    const follow = await engine.docker(['logs', '-f', '--tail', '1', 'ticker'], { timeoutMs: 1500 });
    assert.ok(follow.stdout.split('\n').filter(Boolean).length >= 3, 'logs -f keeps streaming new lines');
    const stamped = await engine.dockerOk(['logs', '-t', '--tail', '2', 'ticker']);
    assert.match(stamped, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z line \d+\n/);
    assert.equal(stamped.split('\n').filter(Boolean).length, 2);
    await engine.dockerOk(['stop', 'ticker']);
    assert.equal((await engine.dockerOk(['inspect', '-f', '{{.State.Status}} {{.State.ExitCode}}', 'ticker'])).trim(), 'exited 0');
    await engine.dockerOk(['rm', 'ticker']);
    const gone = await engine.docker(['inspect', 'ticker']);
    assert.notEqual(gone.code, 0);
    assert.match(gone.stderr, /No such (container|object)/);
  });

  test('stdout and stderr stay apart in logs', async () => {
    await engine.dockerOk(['run', '--name', 'split', 'busybox', 'sh', '-c', 'echo out; echo err >&2']);
    const r = await engine.docker(['logs', 'split']);
    assert.equal(r.stdout, 'out\n');
    assert.equal(r.stderr, 'err\n');
    await engine.dockerOk(['rm', 'split']);
  });

  test('stop sends the stop signal, then SIGKILL after the timeout', async () => {
    await engine.dockerOk(['run', '-d', '--name', 'stubborn', 'busybox', 'sleep', '60']);
    const started = Date.now();
    await engine.dockerOk(['stop', '-t', '1', 'stubborn']);
    assert.ok(Date.now() - started >= 900, 'waited for the timeout');
    assert.equal((await engine.dockerOk(['inspect', '-f', '{{.State.ExitCode}}', 'stubborn'])).trim(), '137');
    await engine.dockerOk(['rm', 'stubborn']);
  });

  test('kill -s delivers the named signal', async () => {
    await engine.dockerOk(['run', '-d', '--name', 'trapper', 'busybox', 'sh', '-c', 'trap "echo got-usr1; exit 5" USR1; while true; do sleep 0.1; done']);
    await engine.dockerOk(['kill', '-s', 'USR1', 'trapper']);
    assert.equal((await engine.dockerOk(['wait', 'trapper'])).trim(), '5');
    assert.equal(await engine.dockerOk(['logs', 'trapper']), 'got-usr1\n');
    await engine.dockerOk(['rm', 'trapper']);
  });

  test('rm refuses a running container unless forced', async () => {
    await engine.dockerOk(['run', '-d', '--name', 'busy', 'busybox', 'sleep', '60']);
    const refused = await engine.docker(['rm', 'busy']);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /container is running: stop the container before removing or force remove/);
    await engine.dockerOk(['rm', '-f', 'busy']);
    assert.notEqual((await engine.docker(['inspect', 'busy'])).code, 0);
  });

  test('rename, and a duplicate name is a conflict', async () => {
    await engine.dockerOk(['create', '--name', 'first', 'busybox', 'true']);
    await engine.dockerOk(['create', '--name', 'second', 'busybox', 'true']);
    const clash = await engine.docker(['rename', 'first', 'second']);
    assert.notEqual(clash.code, 0);
    assert.match(clash.stderr, /already in use/);
    await engine.dockerOk(['rename', 'first', 'third']);
    assert.equal((await engine.dockerOk(['inspect', '-f', '{{.Name}}', 'third'])).trim(), '/third');
    const dup = await engine.docker(['create', '--name', 'third', 'busybox', 'true']);
    assert.match(dup.stderr, /Conflict/);
    await engine.dockerOk(['rm', 'second', 'third']);
  });

  test('ps -a with filters', async () => {
    assert.equal((await engine.docker(['run', '--name', 'done3', '--label', 'tier=batch', 'busybox', 'sh', '-c', 'exit 3'])).code, 3);
    await engine.dockerOk(['run', '-d', '--name', 'alive', '--label', 'tier=web', 'busybox', 'sleep', '60']);
    await engine.dockerOk(['create', '--name', 'fresh', 'busybox', 'true']);
    const names = async (...args: string[]) => (await engine.dockerOk(['ps', ...args, '--format', '{{.Names}}'])).split('\n').filter(Boolean).sort();
    assert.deepEqual(await names(), ['alive']);
    assert.deepEqual(await names('-a', '--filter', 'status=exited'), ['done3']);
    assert.deepEqual(await names('-a', '--filter', 'status=created'), ['fresh']);
    assert.deepEqual(await names('-a', '--filter', 'exited=3'), ['done3']);
    assert.deepEqual(await names('-a', '--filter', 'label=tier=web'), ['alive']);
    assert.deepEqual(await names('-a', '--filter', 'label=tier'), ['alive', 'done3']);
    assert.deepEqual(await names('-a', '--filter', 'name=fre'), ['fresh']);
    assert.deepEqual(await names('-a', '--filter', 'ancestor=busybox', '--filter', 'name=alive'), ['alive']);
    assert.deepEqual(await names('-a', '--filter', 'before=fresh', '--filter', 'since=done3'), ['alive']);
    const last = await names('-a', '-n', '1');
    assert.deepEqual(last, ['fresh']);
    const bad = await engine.docker(['ps', '--filter', 'colour=red']);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /invalid filter 'colour'/);
    await engine.dockerOk(['rm', '-f', 'done3', 'alive', 'fresh']);
  });

  test('inspect shows the fields people look for', async () => {
    await engine.dockerOk(['run', '-d', '--name', 'insp', '-e', 'A=1', '--label', 'k=v', 'busybox', 'sleep', '60']);
    const [info] = JSON.parse(await engine.dockerOk(['inspect', 'insp']));
    assert.equal(info.Name, '/insp');
    assert.equal(info.State.Status, 'running');
    assert.equal(info.State.Running, true);
    assert.ok(info.State.Pid > 0);
    assert.match(info.State.StartedAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$/);
    assert.equal(info.Path, 'sleep');
    assert.deepEqual(info.Args, ['60']);
    assert.ok(info.Config.Env.includes('A=1'));
    assert.equal(info.Config.Labels.k, 'v');
    assert.equal(info.Config.Image, 'busybox');
    assert.match(info.Image, /^sha256:[0-9a-f]{64}$/);
    assert.equal(info.HostConfig.NetworkMode, 'bridge');
    assert.match(info.NetworkSettings.Networks.bridge.IPAddress, /^\d+\.\d+\.\d+\.\d+$/);
    await engine.dockerOk(['rm', '-f', 'insp']);
  });
});

describe('sizes', () => {
  test('size=1 gives the writable layer and the whole root filesystem', async () => {
    await engine.dockerOk(['run', '-d', '--name', 'sized', 'busybox', 'sh', '-c', 'head -c 300000 /dev/zero > /tmp/blob; sleep 60']);
    await eventually(async () => (await engine.request('GET', '/containers/sized/json?size=1')).json().SizeRw >= 300000);
    const sized = (await engine.request('GET', '/containers/sized/json?size=1')).json();
    const listed = (await engine.request('GET', '/containers/json?size=1&filters=' + encodeURIComponent('{"name":["sized"]}'))).json();
    assert.ok(sized.SizeRw < 400000, `SizeRw ${sized.SizeRw} counts only the container's own files`);
    assert.ok(sized.SizeRootFs > sized.SizeRw + 1_000_000, 'the image (busybox) counts in SizeRootFs');
    assert.equal(listed[0].SizeRootFs, sized.SizeRootFs);
    assert.equal((await engine.request('GET', '/containers/sized/json')).json().SizeRw, undefined);
    const ps = await engine.dockerOk(['ps', '-s', '--filter', 'name=sized', '--format', '{{.Size}}']);
    assert.match(ps, /^\d+(\.\d+)?kB \(virtual \d+(\.\d+)?MB\)/);
    await engine.dockerOk(['rm', '-f', 'sized']);
  });
});

describe('recovery', () => {
  test('a container keeps running through a daemon restart and is attached to afterwards', async () => {
    await engine.dockerOk(['run', '-d', '--name', 'survivor', 'busybox', 'sh', '-c', 'trap "exit 0" TERM; while true; do echo tick; sleep 0.2; done']);
    await engine.dockerOk(['run', '-d', '--name', 'ender', 'busybox', 'sh', '-c', 'sleep 1; exit 7']);
    const pidBefore = (await engine.dockerOk(['inspect', '-f', '{{.State.Pid}}', 'survivor'])).trim();
    await engine.crash();
    await new Promise((r) => setTimeout(r, 1500));
    await engine.start();
    assert.equal((await engine.dockerOk(['inspect', '-f', '{{.State.Status}} {{.State.Pid}}', 'survivor'])).trim(), `running ${pidBefore}`);
    assert.equal((await engine.dockerOk(['inspect', '-f', '{{.State.Status}} {{.State.ExitCode}}', 'ender'])).trim(), 'exited 7');
    // Attach again and see live output; --sig-proxy=false so that ending the client leaves the container be.
    const attached = await engine.docker(['attach', '--sig-proxy=false', 'survivor'], { timeoutMs: 1200 });
    assert.match(attached.stdout, /tick\n/);
    await engine.dockerOk(['stop', 'survivor']);
    assert.equal((await engine.dockerOk(['inspect', '-f', '{{.State.ExitCode}}', 'survivor'])).trim(), '0');
    await engine.dockerOk(['rm', 'survivor', 'ender']);
  });

  test('a removed container\'s folders are deleted soon after, in the data root and the exec root', async () => {
    const id = (await engine.dockerOk(['run', '-d', 'busybox', 'true'])).trim();
    await engine.dockerOk(['wait', id]);
    await engine.dockerOk(['rm', id]);
    const holding = async () => {
      const found: string[] = [];
      for (const dir of [path.join(engine.dataRoot, 'containers'), path.join(engine.dataRoot, 'runtime'), path.join(engine.execRoot, 'conmon')]) {
        for (const name of await fs.readdir(dir).catch(() => [] as string[])) if (name.includes(id)) found.push(path.join(dir, name));
      }
      return found;
    };
    await eventually(async () => (await holding()).length === 0, 15_000);
  });

  test('a creation cut short by a crash (a torn record, or none) leaves nothing behind', async () => {
    await engine.dockerOk(['create', '--name', 'kept', 'busybox', 'true']);
    await engine.crash();
    const containers = path.join(engine.dataRoot, 'containers');
    const torn = path.join(containers, 'a'.repeat(64));
    const empty = path.join(containers, 'b'.repeat(64));
    await fs.mkdir(torn);
    await fs.writeFile(path.join(torn, 'container.json'), '{"Id":"aaaa');
    await fs.mkdir(empty);
    await engine.start();
    assert.equal((await engine.dockerOk(['ps', '-a', '--format', '{{.Names}}'])).trim(), 'kept');
    assert.equal(existsSync(torn), false);
    assert.equal(existsSync(empty), false);
    await engine.dockerOk(['rm', 'kept']);
  });
});

describe('dockerode', () => {
  test('create, attach, start, wait, logs and remove', async () => {
    const docker = engine.dockerode();
    const container = await docker.createContainer({ Image: 'busybox', Cmd: ['sh', '-c', 'echo from-dockerode; exit 4'], Labels: { via: 'dockerode' } });
    await container.start();
    const result = await container.wait();
    assert.equal(result.StatusCode, 4);
    const logs = (await container.logs({ stdout: true, stderr: true })) as Buffer;
    // Multiplexed: an 8-byte header (stream 1 = stdout) before the line.
    assert.equal(logs[0], 1);
    assert.equal(logs.subarray(8).toString(), 'from-dockerode\n');
    const list = await docker.listContainers({ all: true, filters: { label: ['via=dockerode'] } });
    assert.equal(list.length, 1);
    assert.equal(list[0].State, 'exited');
    await container.remove();
    await assert.rejects(container.inspect(), (err: { statusCode?: number }) => err.statusCode === 404);
  });
});

describe('bad input to create', () => {
  const create = (body: unknown, query = '') =>
    engine.request('POST', `/v1.44/containers/create${query}`, { body, headers: { 'Content-Type': 'application/json' } });

  test('each bad value answers 400 naming what is wrong, and the daemon keeps serving', async () => {
    const cases: Array<[unknown, RegExp, string?]> = [
      ['{not json', /invalid JSON/],
      [{ Image: 42 }, /Image: expected a string/],
      [{ Image: 'busybox', Cmd: [1, 2] }, /Cmd\[0\]: expected a string/],
      [{ Image: 'busybox', HostConfig: { Memory: 'lots' } }, /HostConfig\.Memory: expected an integer/],
      [{ Image: 'busybox', HostConfig: { Memory: 1024 } }, /Minimum memory limit allowed is 6MB/],
      [{ Image: 'busybox', HostConfig: { CpuShares: -5 } }, /CpuShares/],
      [{ Image: 'busybox', HostConfig: { BlkioWeight: 5000 } }, /blkio weight/],
      [{ Image: 'busybox', HostConfig: { OomScoreAdj: 5000 } }, /oom score adj/],
      [{ Image: 'busybox', HostConfig: { RestartPolicy: { Name: 'sometimes' } } }, /restart policy/],
      [{ Image: 'busybox', HostConfig: { RestartPolicy: { Name: 'always', MaximumRetryCount: 3 } } }, /only be used with 'on-failure'/],
      [{ Image: 'busybox', HostConfig: { CapAdd: ['CAP_NOPE'] } }, /unknown capability/],
      [{ Image: 'busybox', HostConfig: { Binds: ['./relative:/x'] } }, /Binds/],
      [{ Image: 'busybox', HostConfig: { Ulimits: [{ Name: 'nofile', Soft: 10, Hard: 5 }] } }, /soft limit/],
      [{ Image: 'busybox', HostConfig: { Ulimits: [{ Name: 'nofile', Soft: 1 << 30, Hard: 1 << 30 }] } }, /exceeds what this host allows/],
      [{ Image: 'busybox', Healthcheck: { Test: ['CMD', 'true'], Interval: 10 } }, /cannot be less than 1ms/],
      [{ Image: 'busybox', ExposedPorts: { '99999/tcp': {} } }, /out of range/],
      [{ Image: 'busybox', Hostname: 'bad_host!' }, /not a valid RFC 1123 hostname/],
      [{ Image: 'busybox', WorkingDir: 'relative' }, /needs to be an absolute path/],
      [{ Image: 'busybox' }, /Invalid container name/, '?name=bad/name'],
      [[1, 2], /expected a JSON object/],
    ];
    for (const [body, message, query] of cases) {
      const r = await create(body, query);
      assert.ok(r.status === 400 || r.status === 404, `${JSON.stringify(body)} gave ${r.status}: ${r.text}`);
      assert.match(r.json().message, message, `${JSON.stringify(body)}: ${r.text}`);
    }
    assert.equal((await engine.request('GET', '/_ping')).text, 'OK');
  });

  test('features not built yet answer a clear 400 and create nothing', async () => {
    const cases: Array<[unknown, RegExp]> = [
      [{ Image: 'busybox', HostConfig: { Mounts: [{ Type: 'image', Source: 'busybox', Target: '/img' }] } }, /mounts of type "image" are not supported/],
    ];
    for (const [body, message] of cases) {
      const r = await create(body);
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.match(r.json().message, message);
    }
    assert.equal((await create({ Image: 'busybox', Healthcheck: { Test: ['NONE'] } })).status, 201);
    await engine.dockerOk(['container', 'prune', '-f']).catch(() => undefined);
    for (const c of (await engine.request('GET', '/containers/json?all=1')).json()) await engine.request('DELETE', `/containers/${c.Id}?force=1`);
  });

  test('an unknown network is reported at start, as Docker does', async () => {
    const created = await create({ Image: 'busybox', Cmd: ['true'], HostConfig: { NetworkMode: 'no-such-net' } });
    assert.equal(created.status, 201);
    const { Id } = created.json();
    const started = await engine.request('POST', `/containers/${Id}/start`);
    assert.equal(started.status, 404);
    assert.match(started.json().message, /network no-such-net not found/);
    assert.equal((await engine.request('DELETE', `/containers/${Id}`)).status, 204);
    // The docker CLI shows the error and exits instead of waiting on the attach it made before start.
    const run = await engine.docker(['run', '--rm', '--network', 'no-such-net', 'busybox', 'true'], { timeoutMs: 20_000 });
    assert.equal(run.code, 125);
    assert.match(run.stderr, /network no-such-net not found/);
  });

  test('a missing image answers 404, a body over the limit 413, a truncated body 400', async () => {
    const missing = await create({ Image: 'no-such-image:1' });
    assert.equal(missing.status, 404);
    assert.match(missing.json().message, /No such image/);
    const huge = await engine.request('POST', '/containers/create', { body: Buffer.alloc(5 * 1024 * 1024, 0x20), headers: { 'Content-Type': 'application/json' } });
    assert.equal(huge.status, 413);
    assert.match(huge.json().message, /exceeds the limit/);
    const truncated = await new Promise<number>((resolve, reject) => {
      import('node:net').then(({ default: net }) => {
        const sock = net.connect(engine.socket, () => {
          sock.end('POST /containers/create HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"Image": "busy');
        });
        let data = '';
        sock.on('data', (d) => (data += d));
        sock.on('close', () => resolve(Number(/^HTTP\/1\.1 (\d+)/.exec(data)?.[1] ?? 0)));
        sock.on('error', reject);
      });
    });
    assert.ok(truncated === 400 || truncated === 0, `truncated body answered ${truncated}`);
    assert.equal((await engine.request('GET', '/_ping')).text, 'OK');
    const list = await engine.request('GET', '/containers/json?all=1');
    assert.equal(list.status, 200);
    assert.deepEqual(list.json(), [], 'nothing was half-created');
  });

  test('start, stop, kill and wait answer the documented status codes', async () => {
    const { Id } = (await create({ Image: 'busybox', Cmd: ['sleep', '60'] })).json();
    assert.equal((await engine.request('POST', `/containers/${Id}/stop`)).status, 304);
    assert.equal((await engine.request('POST', `/containers/${Id}/kill`)).status, 409);
    assert.equal((await engine.request('POST', `/containers/${Id}/start`)).status, 204);
    assert.equal((await engine.request('POST', `/containers/${Id}/start`)).status, 304);
    assert.equal((await engine.request('POST', `/containers/${Id}/kill?signal=NOPE`)).status, 400);
    assert.equal((await engine.request('POST', `/containers/${Id}/wait?condition=sometime`)).status, 400);
    assert.equal((await engine.request('DELETE', `/containers/${Id}`)).status, 409);
    assert.equal((await engine.request('POST', `/containers/${Id}/kill`)).status, 204);
    assert.equal((await engine.request('DELETE', `/containers/${Id}`)).status, 204);
    assert.equal((await engine.request('GET', `/containers/${Id}/json`)).status, 404);
    assert.equal((await engine.request('POST', `/containers/nope/start`)).status, 404);
  });
});
