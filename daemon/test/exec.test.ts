/**
 * Exec through real clients (the docker CLI, dockerode, raw HTTP) against a real berthd running busybox
 * containers: output, exit codes, stdin, users, working directory, environment, TTY with resize, inspect,
 * events, and the refusals (unknown container or exec, stopped or paused container, second start).
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { eventually, runCommand, startEngine, type Engine } from './harness.js';

let engine: Engine;
let box: string;

before(async () => {
  engine = await startEngine();
  await engine.loadBusybox();
  box = (await engine.dockerOk(['run', '-d', '--name', 'execbox', '-e', 'FROM_CONTAINER=yes', '-w', '/tmp', 'busybox', 'sleep', '600'])).trim();
});

after(async () => {
  await engine?.cleanup();
});

/** Splits a multiplexed stream into its stdout and stderr text. */
function demux(body: Buffer): { stdout: string; stderr: string } {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  let i = 0;
  while (i + 8 <= body.length) {
    const size = body.readUInt32BE(i + 4);
    const payload = body.subarray(i + 8, i + 8 + size);
    (body[i] === 2 ? err : out).push(payload);
    i += 8 + size;
  }
  return { stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() };
}

describe('docker exec', () => {
  test('runs a command in the container and prints its output', async () => {
    const r = await engine.docker(['exec', 'execbox', 'sh', '-c', 'echo out; echo err >&2']);
    assert.equal(r.stdout, 'out\n');
    assert.equal(r.stderr, 'err\n');
    assert.equal(r.code, 0);
  });

  test('carries exit codes through', async () => {
    assert.equal((await engine.docker(['exec', 'execbox', 'sh', '-c', 'exit 7'])).code, 7);
    const missing = await engine.docker(['exec', 'execbox', 'no-such-command']);
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr + missing.stdout, /no-such-command|executable file not found|No such file/);
  });

  test('gives piped stdin to the process with -i', async () => {
    const r = await engine.docker(['exec', '-i', 'execbox', 'sh', '-c', 'tr a-z A-Z; echo end'], { input: 'hello\nworld\n' });
    assert.equal(r.stdout, 'HELLO\nWORLD\nend\n');
    assert.equal(r.code, 0);
  });

  test('keeps the container environment and working directory, adds -e, honours -w', async () => {
    const r = await engine.dockerOk(['exec', '-e', 'EXTRA=1', 'execbox', 'sh', '-c', 'echo $FROM_CONTAINER $EXTRA; pwd']);
    assert.equal(r, 'yes 1\n/tmp\n');
    assert.equal(await engine.dockerOk(['exec', '-w', '/etc', 'execbox', 'pwd']), '/etc\n');
  });

  test('runs as the user asked for: name, uid, uid:gid, user:group', async () => {
    assert.equal(await engine.dockerOk(['exec', 'execbox', 'id', '-u']), '0\n');
    assert.equal(await engine.dockerOk(['exec', '-u', 'app', 'execbox', 'sh', '-c', 'echo $(id -u) $HOME']), '1000 /home/app\n');
    assert.equal(await engine.dockerOk(['exec', '-u', '1234', 'execbox', 'id', '-u']), '1234\n');
    assert.equal(await engine.dockerOk(['exec', '-u', '1234:5678', 'execbox', 'sh', '-c', 'echo $(id -u):$(id -g)']), '1234:5678\n');
    assert.equal(await engine.dockerOk(['exec', '-u', 'app:nobody', 'execbox', 'id', '-g']), '65534\n');
    const unknown = await engine.docker(['exec', '-u', 'no-such-user', 'execbox', 'true']);
    assert.notEqual(unknown.code, 0);
    assert.equal(unknown.code, 126);
    assert.match(unknown.stdout + unknown.stderr, /unable to find user no-such-user/);
  });

  test('runs under a pseudo-terminal with -it, at the client terminal size', async () => {
    const r = await runCommand('script', ['-qec', `stty cols 91 rows 27; docker exec -it execbox sh -c 'tty; stty size'`, '/dev/null'], {
      env: { DOCKER_HOST: engine.host, DOCKER_CONFIG: engine.dockerConfig },
      timeoutMs: 30_000,
      holdInput: true,
    });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /\/dev\/pts\/\d+\r\n/);
    assert.match(r.stdout, /27 91\r\n/);
  });

  test('exit code of a TTY exec carries through', async () => {
    const r = await runCommand('script', ['-qec', `docker exec -it execbox sh -c 'exit 5'`, '/dev/null'], {
      env: { DOCKER_HOST: engine.host, DOCKER_CONFIG: engine.dockerConfig },
      timeoutMs: 30_000,
      holdInput: true,
    });
    // script -e returns the child's status.
    assert.equal(r.code, 5);
  });

  test('-d starts the process and returns at once', async () => {
    await engine.dockerOk(['exec', '-d', 'execbox', 'sh', '-c', 'sleep 0.2; echo done > /tmp/detached']);
    await eventually(async () => (await engine.docker(['exec', 'execbox', 'cat', '/tmp/detached'])).stdout === 'done\n', 10_000, 100);
  });

  test('--privileged gives every capability', async () => {
    const plain = await engine.dockerOk(['exec', 'execbox', 'sh', '-c', 'grep CapEff /proc/self/status']);
    const privileged = await engine.dockerOk(['exec', '--privileged', 'execbox', 'sh', '-c', 'grep CapEff /proc/self/status']);
    assert.notEqual(plain, privileged);
    // Every capability the engine itself holds (this machine withholds CAP_SYS_RESOURCE from it).
    const own = /CapBnd:\s+([0-9a-f]+)/.exec(await (await import('node:fs/promises')).readFile('/proc/self/status', 'utf8'))![1];
    assert.match(privileged, new RegExp(`CapEff:\\s+${own}`));
  });
});

describe('exec API', () => {
  test('create, start, inspect: every field, ExitCode null until the end, ExecIDs on the container', async () => {
    const created = await engine.request('POST', `/v1.44/containers/${box}/exec`, {
      body: { AttachStdout: true, AttachStderr: true, Cmd: ['sh', '-c', 'echo hi; echo oops >&2; exit 3'], User: 'nobody' },
    });
    assert.equal(created.status, 201, created.text);
    const id = created.json().Id as string;
    assert.match(id, /^[0-9a-f]{64}$/);
    assert.deepEqual(created.json().Warnings, []);

    const before = (await engine.request('GET', `/v1.44/exec/${id}/json`)).json();
    assert.deepEqual(before, {
      CanRemove: false,
      ContainerID: box,
      DetachKeys: '',
      ExitCode: null,
      ID: id,
      OpenStderr: true,
      OpenStdin: false,
      OpenStdout: true,
      ProcessConfig: { arguments: ['-c', 'echo hi; echo oops >&2; exit 3'], entrypoint: 'sh', privileged: false, tty: false, user: 'nobody' },
      Running: false,
      Pid: 0,
    });
    const inspect = (await engine.request('GET', `/v1.44/containers/${box}/json`)).json();
    assert.ok(inspect.ExecIDs.includes(id));

    const started = await engine.request('POST', `/v1.44/exec/${id}/start`, { body: { Detach: false, Tty: false } });
    assert.equal(started.status, 200);
    assert.equal(started.headers['content-type'], 'application/vnd.docker.multiplexed-stream');
    assert.deepEqual(demux(started.body), { stdout: 'hi\n', stderr: 'oops\n' });

    const afterRun = (await engine.request('GET', `/v1.44/exec/${id}/json`)).json();
    assert.equal(afterRun.ExitCode, 3);
    assert.equal(afterRun.Running, false);
    assert.ok(afterRun.Pid > 0);

    const again = await engine.request('POST', `/v1.44/exec/${id}/start`, { body: {} });
    assert.equal(again.status, 409);
    assert.match(again.json().message, /already run/);
  });

  test('a TTY exec answers raw bytes', async () => {
    const id = (await engine.request('POST', `/containers/${box}/exec`, { body: { AttachStdout: true, Tty: true, Cmd: ['echo', 'tty'] } })).json().Id;
    const started = await engine.request('POST', `/exec/${id}/start`, { body: { Tty: true } });
    assert.equal(started.headers['content-type'], 'application/vnd.docker.raw-stream');
    assert.equal(started.text, 'tty\r\n');
  });

  test('dockerode: exec with hijacked stdin', async () => {
    const docker = engine.dockerode();
    const exec = await docker.getContainer(box).exec({ AttachStdin: true, AttachStdout: true, AttachStderr: true, Cmd: ['cat'] });
    const stream = await exec.start({ hijack: true, stdin: true });
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    const ended = new Promise((r) => stream.on('end', r));
    stream.write('through dockerode\n');
    (stream as unknown as { end(): void }).end();
    await ended;
    assert.equal(demux(Buffer.concat(chunks)).stdout, 'through dockerode\n');
    const info = await exec.inspect();
    assert.equal(info.ExitCode, 0);
  });

  test('the detach keys end the session and leave the process running, with exec_detach', async () => {
    const id = (await engine.request('POST', `/containers/${box}/exec`, { body: { AttachStdin: true, AttachStdout: true, Tty: true, DetachKeys: 'ctrl-x', Cmd: ['sh', '-c', 'cat; sleep 600'] } })).json().Id;
    const body = JSON.stringify({ Detach: false, Tty: true });
    const socket = net.connect(engine.socket);
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    const closed = new Promise((r) => socket.on('close', r));
    socket.write(`POST /exec/${id}/start HTTP/1.1\r\nHost: engine\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    await eventually(() => Buffer.concat(chunks).includes('\r\n\r\n'));
    socket.write('echoed\r');
    await eventually(() => Buffer.concat(chunks).includes('echoed\r\n'));
    socket.write(Buffer.from([0x18]));
    await closed;
    assert.match(Buffer.concat(chunks).toString('latin1'), /^HTTP\/1\.1 101 UPGRADED\r\n/);
    const inspect = (await engine.request('GET', `/exec/${id}/json`)).json();
    assert.equal(inspect.Running, true);
    assert.equal(inspect.ExitCode, null);
    const events = await engine.request('GET', `/events?since=${Math.floor(Date.now() / 1000) - 5}&until=${Math.floor(Date.now() / 1000) + 1}&filters=${encodeURIComponent(JSON.stringify({ event: ['exec_detach'] }))}`);
    assert.ok(events.text.split('\n').filter(Boolean).some((l) => JSON.parse(l).Actor.Attributes.execID === id), events.text);
  });

  test('without a TTY the detach keys are input, as Docker has them', async () => {
    const id = (await engine.request('POST', `/containers/${box}/exec`, { body: { AttachStdin: true, AttachStdout: true, DetachKeys: 'ctrl-x', Cmd: ['od', '-An', '-tx1'] } })).json().Id;
    const body = JSON.stringify({ Detach: false, Tty: false });
    const socket = net.connect(engine.socket);
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    const closed = new Promise((r) => socket.on('close', r));
    socket.write(`POST /exec/${id}/start HTTP/1.1\r\nHost: engine\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    await eventually(() => Buffer.concat(chunks).includes('\r\n\r\n'));
    socket.end(Buffer.from([0x18, 0x41]));
    await closed;
    const all = Buffer.concat(chunks);
    assert.equal(demux(all.subarray(all.indexOf('\r\n\r\n') + 4)).stdout.trim(), '18 41');
    assert.equal((await engine.request('GET', `/exec/${id}/json`)).json().ExitCode, 0);
  });

  test('stdin sent as soon as the stream is taken over, and its end, reach the process (exec and attach)', { timeout: 60_000 }, async () => {
    // The input and the half-close come while the process (or the attach) is still being set up: they wait
    // for it. Sent with the request itself, or right after the answer's head (the request's body sent apart
    // from its head, which made the daemon pause the connection while it read the body).
    const start = async (request: string, expected: string, withRequest: boolean) => {
      const socket = net.connect(engine.socket);
      socket.on('error', () => undefined);
      const chunks: Buffer[] = [];
      socket.on('data', (c: Buffer) => chunks.push(c));
      const closed = new Promise((r) => socket.on('close', r));
      if (withRequest) {
        socket.end(`${request}hello\nworld\n`);
      } else {
        // The head and the body in two writes, as clients sometimes send them, then the input after the answer.
        const split = request.indexOf('\r\n\r\n') + 4;
        socket.write(request.slice(0, split));
        await new Promise((r) => setTimeout(r, 20));
        socket.write(request.slice(split));
        await eventually(() => Buffer.concat(chunks).includes('\r\n\r\n'), 10_000, 1);
        socket.end('hello\nworld\n');
      }
      await closed;
      const all = Buffer.concat(chunks);
      assert.match(all.toString('latin1'), /^HTTP\/1\.1 (101 UPGRADED|200 OK)\r\n/);
      assert.equal(demux(all.subarray(all.indexOf('\r\n\r\n') + 4)).stdout, expected);
    };
    for (const withRequest of [true, false, false, false]) {
      const id = (await engine.request('POST', `/containers/${box}/exec`, {
        body: { AttachStdin: true, AttachStdout: true, AttachStderr: true, Cmd: ['sh', '-c', 'tr a-z A-Z; echo end'] },
      })).json().Id;
      const body = JSON.stringify({ Detach: false, Tty: false });
      await start(`POST /exec/${id}/start HTTP/1.1\r\nHost: engine\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`, 'HELLO\nWORLD\nend\n', withRequest);
    }
    for (const withRequest of [true, false]) {
      const created = await engine.request('POST', '/containers/create', { body: { Image: 'busybox', Cmd: ['sh', '-c', 'tr a-z A-Z; echo end'], OpenStdin: true, StdinOnce: true, AttachStdin: true, AttachStdout: true } });
      const cid = created.json().Id;
      assert.equal((await engine.request('POST', `/containers/${cid}/start`)).status, 204);
      await start(`POST /containers/${cid}/attach?stream=1&stdin=1&stdout=1 HTTP/1.1\r\nHost: engine\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: 0\r\n\r\n`, 'HELLO\nWORLD\nend\n', withRequest);
      await engine.request('DELETE', `/containers/${cid}?force=1`);
    }
  });

  test('input the process never reads costs none of its output', async () => {
    // The client keeps typing while the process, its stdin closed, prints and exits: the monitor then goes
    // away with input unread, and the socket's reset must not drop the output already sent.
    const expected = Array.from({ length: 2000 }, (_, i) => `${i + 1}\n`).join('');
    for (let round = 0; round < 3; round++) {
      const id = (await engine.request('POST', `/containers/${box}/exec`, {
        body: { AttachStdin: true, AttachStdout: true, AttachStderr: true, Cmd: ['sh', '-c', 'exec 0<&-; sleep 0.2; seq 1 2000'] },
      })).json().Id;
      const body = JSON.stringify({ Detach: false, Tty: false });
      const socket = net.connect(engine.socket);
      socket.on('error', () => undefined);
      const chunks: Buffer[] = [];
      socket.on('data', (c: Buffer) => chunks.push(c));
      const typing = setInterval(() => socket.writable && socket.write('typed\n'), 5);
      const closed = new Promise((r) => socket.on('close', r));
      socket.write(`POST /exec/${id}/start HTTP/1.1\r\nHost: engine\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
      await closed;
      clearInterval(typing);
      const all = Buffer.concat(chunks);
      const out = demux(all.subarray(all.indexOf('\r\n\r\n') + 4)).stdout;
      assert.equal(out.length, expected.length, `round ${round}: ${out.length} of ${expected.length} bytes`);
      assert.equal(out, expected);
    }
  });

  test('resize answers 201, and a resized TTY exec sees the new size', async () => {
    const id = (await engine.request('POST', `/containers/${box}/exec`, { body: { AttachStdout: true, Tty: true, Cmd: ['sh', '-c', 'sleep 0.5; stty size'] } })).json().Id;
    const started = engine.request('POST', `/exec/${id}/start`, { body: { Tty: true } });
    const resized = await engine.request('POST', `/exec/${id}/resize?h=33&w=101`);
    assert.equal(resized.status, 201, resized.text);
    assert.equal((await started).text, '33 101\r\n');
  });

  test('ConsoleSize sets the initial terminal size', async () => {
    // The monitor sizes the terminal just after the process starts (crun leaves an exec's terminal at 0x0):
    // a process that reads the size in its first milliseconds may still see 0x0, hence the short wait.
    const id = (await engine.request('POST', `/v1.44/containers/${box}/exec`, { body: { AttachStdout: true, Tty: true, ConsoleSize: [12, 34], Cmd: ['sh', '-c', 'sleep 0.3; stty size'] } })).json().Id;
    assert.equal((await engine.request('POST', `/v1.44/exec/${id}/start`, { body: { Tty: true } })).text, '12 34\r\n');
  });

  test('refusals: unknown container 404, unknown exec 404, bad body 400, stopped container 409', async () => {
    assert.equal((await engine.request('POST', '/containers/no-such/exec', { body: { Cmd: ['true'] } })).status, 404);
    assert.equal((await engine.request('POST', '/exec/no-such/start', { body: {} })).status, 404);
    assert.equal((await engine.request('GET', '/exec/no-such/json')).status, 404);
    assert.equal((await engine.request('POST', '/exec/no-such/resize?h=1&w=1')).status, 404);
    const empty = await engine.request('POST', `/containers/${box}/exec`, { body: { Cmd: [] } });
    assert.equal(empty.status, 400);
    assert.match(empty.json().message, /No exec command specified/);
    assert.equal((await engine.request('POST', `/containers/${box}/exec`, { body: { Cmd: 'true', DetachKeys: 'ctrl-' } })).status, 400);
    assert.equal((await engine.request('POST', `/containers/${box}/exec`, { body: { Cmd: ['true'], WorkingDir: 'relative' } })).status, 400);

    const stopped = (await engine.dockerOk(['create', 'busybox', 'true'])).trim();
    const r = await engine.request('POST', `/containers/${stopped}/exec`, { body: { Cmd: ['true'] } });
    assert.equal(r.status, 409);
    assert.match(r.json().message, /is not running/);
    await engine.dockerOk(['rm', stopped]);
  });

  test('an exec created before the container stopped cannot start, and is gone after', async () => {
    const c = (await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '600'])).trim();
    const id = (await engine.request('POST', `/containers/${c}/exec`, { body: { Cmd: ['true'] } })).json().Id;
    await engine.dockerOk(['kill', c]);
    await engine.dockerOk(['wait', c]);
    const r = await engine.request('POST', `/exec/${id}/start`, { body: {} });
    assert.ok(r.status === 409 || r.status === 404, `${r.status} ${r.text}`);
    assert.equal((await engine.request('GET', `/exec/${id}/json`)).status, 404);
    assert.equal((await engine.request('GET', `/containers/${c}/json`)).json().ExecIDs, null);
    await engine.dockerOk(['rm', c]);
  });

  test('events exec_create, exec_start and exec_die with the exit code', async () => {
    const since = Math.floor(Date.now() / 1000) - 1;
    await engine.docker(['exec', 'execbox', 'sh', '-c', 'exit 4']);
    const until = Math.floor(Date.now() / 1000) + 1;
    const r = await engine.request('GET', `/events?since=${since}&until=${until}&filters=${encodeURIComponent(JSON.stringify({ container: [box] }))}`);
    const events = r.text.trim().split('\n').map((l) => JSON.parse(l));
    const actions = events.map((e) => e.Action as string);
    assert.ok(actions.includes('exec_create: sh -c exit 4'), actions.join(', '));
    assert.ok(actions.includes('exec_start: sh -c exit 4'), actions.join(', '));
    const execId = events.find((e) => e.Action === 'exec_create: sh -c exit 4').Actor.Attributes.execID;
    const die = events.find((e) => e.Action === 'exec_die' && e.Actor.Attributes.execID === execId);
    assert.ok(die, actions.join(', '));
    assert.equal(die.Actor.Attributes.exitCode, '4');
    assert.match(die.Actor.Attributes.execID, /^[0-9a-f]{64}$/);
  });
});
