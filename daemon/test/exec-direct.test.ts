/**
 * Execs that need no monitor (no terminal, no stdin, not detached) run as `crun exec` in the foreground,
 * without conmon: exit codes (also by signal), stdout and stderr apart, large output, a command that cannot
 * start, a killed process, its pid, and the exec events. Execs with stdin, a terminal or detach keep conmon
 * (exec.test.ts covers them).
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { eventually, startEngine, type Engine } from './harness.js';

let engine: Engine;
let box: string;

before(async () => {
  engine = await startEngine();
  await engine.loadBusybox();
  box = (await engine.dockerOk(['run', '-d', '--name', 'directbox', 'busybox', 'sleep', '600'])).trim();
});

after(async () => {
  await engine?.cleanup();
});

/** Splits a multiplexed stream into its frames. */
function frames(body: Buffer): Array<{ stream: number; data: Buffer }> {
  const out: Array<{ stream: number; data: Buffer }> = [];
  let i = 0;
  while (i + 8 <= body.length) {
    const size = body.readUInt32BE(i + 4);
    out.push({ stream: body[i], data: body.subarray(i + 8, i + 8 + size) });
    i += 8 + size;
  }
  assert.equal(i, body.length, 'the stream ends on a frame boundary');
  return out;
}

function demux(body: Buffer): { stdout: string; stderr: string } {
  const f = frames(body);
  return {
    stdout: Buffer.concat(f.filter((x) => x.stream === 1).map((x) => x.data)).toString(),
    stderr: Buffer.concat(f.filter((x) => x.stream === 2).map((x) => x.data)).toString(),
  };
}

async function createExec(cmd: string[], extra: Record<string, unknown> = {}): Promise<string> {
  const r = await engine.request('POST', `/containers/${box}/exec`, { body: { AttachStdout: true, AttachStderr: true, Cmd: cmd, ...extra } });
  assert.equal(r.status, 201, r.text);
  return r.json().Id;
}

/** Create and start (attached, without an upgrade): the body, and the exec's inspect once the stream ended. */
async function run(cmd: string[], extra: Record<string, unknown> = {}): Promise<{ id: string; body: Buffer; inspect: any }> {
  const id = await createExec(cmd, extra);
  const r = await engine.request('POST', `/exec/${id}/start`, { body: { Detach: false, Tty: false } });
  assert.equal(r.status, 200, r.text);
  const inspect = (await engine.request('GET', `/exec/${id}/json`)).json();
  return { id, body: r.body, inspect };
}

/** The command lines of the processes that mention `needle`. */
function processesMentioning(needle: string): string[] {
  const found: string[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (argv.some((a) => a.includes(needle))) found.push(argv.join(' '));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

/** The daemon's open files, as `fd -> target`. */
function daemonFds(): string[] {
  const dir = `/proc/${engine.pid}/fd`;
  return readdirSync(dir).flatMap((fd) => {
    try {
      return [`${fd} -> ${readlinkSync(`${dir}/${fd}`)}`];
    } catch {
      return []; // closed meanwhile
    }
  });
}

describe('exec without a monitor', () => {
  test('exit codes carry through, also of a process killed by a signal', async () => {
    assert.equal((await run(['true'])).inspect.ExitCode, 0);
    assert.equal((await run(['sh', '-c', 'exit 7'])).inspect.ExitCode, 7);
    assert.equal((await run(['sh', '-c', 'kill -TERM $$'])).inspect.ExitCode, 143);
    assert.equal((await run(['sh', '-c', 'kill -KILL $$'])).inspect.ExitCode, 137);
    const r = await engine.docker(['exec', 'directbox', 'sh', '-c', 'exit 3']);
    assert.equal(r.code, 3);
  });

  test('stdout and stderr stay apart, each in order, and only the streams asked for are sent', async () => {
    const script = 'for i in 1 2 3 4 5; do echo out$i; echo err$i >&2; done';
    const both = demux((await run(['sh', '-c', script])).body);
    assert.equal(both.stdout, 'out1\nout2\nout3\nout4\nout5\n');
    assert.equal(both.stderr, 'err1\nerr2\nerr3\nerr4\nerr5\n');
    const onlyErr = demux((await run(['sh', '-c', script], { AttachStdout: false })).body);
    assert.deepEqual(onlyErr, { stdout: '', stderr: 'err1\nerr2\nerr3\nerr4\nerr5\n' });
    const cli = await engine.docker(['exec', 'directbox', 'sh', '-c', 'echo to-out; echo to-err >&2']);
    assert.deepEqual([cli.stdout, cli.stderr, cli.code], ['to-out\n', 'to-err\n', 0]);
  });

  test('large output arrives whole', async () => {
    const bytes = 24 * 1024 * 1024;
    const { body, inspect } = await run(['sh', '-c', `yes 0123456789abcdef | head -c ${bytes}; echo done >&2`]);
    const { stdout, stderr } = demux(body);
    assert.equal(stdout.length, bytes);
    assert.equal(stdout.slice(0, 17), '0123456789abcdef\n');
    assert.equal(stderr, 'done\n');
    assert.equal(inspect.ExitCode, 0);
  });

  test('a command that cannot start: the error on the stream, exit code 126, and the exec has run', async () => {
    const { id, body, inspect } = await run(['no-such-command']);
    assert.match(body.toString(), /executable file not found/);
    assert.equal(inspect.ExitCode, 126);
    assert.equal(inspect.Running, false);
    const again = await engine.request('POST', `/exec/${id}/start`, { body: { Detach: false } });
    assert.equal(again.status, 409);
    const cli = await engine.docker(['exec', 'directbox', 'no-such-command']);
    assert.notEqual(cli.code, 0);
    assert.match(cli.stderr + cli.stdout, /executable file not found/);
  });

  test('runs as crun exec without conmon; the pid is the process in the container; killing it ends the exec with its signal', async () => {
    const id = await createExec(['sh', '-c', 'echo started; exec sleep 300']);
    const started = engine.request('POST', `/exec/${id}/start`, { body: { Detach: false } });
    const inspect = await eventually(async () => {
      const r = (await engine.request('GET', `/exec/${id}/json`)).json();
      return r.Running && r.Pid > 0 ? r : undefined;
    }, 30_000);
    const monitors = processesMentioning(id.slice(0, 16));
    assert.ok(monitors.some((cmd) => /\bcrun\b.*\bexec\b/.test(cmd)), monitors.join('\n'));
    assert.ok(!monitors.some((cmd) => cmd.includes('conmon')), monitors.join('\n'));
    // The pid is the exec's process, in the container's pid namespace and cgroup.
    const cmdline = readFileSync(`/proc/${inspect.Pid}/cmdline`, 'utf8');
    assert.match(cmdline, /sleep/);
    const top = await engine.request('GET', `/containers/${box}/top`);
    assert.ok((top.json().Processes as string[][]).some((p) => p.includes(String(inspect.Pid))), top.text);
    process.kill(inspect.Pid, 'SIGKILL');
    const r = await started;
    assert.equal(demux(r.body).stdout, 'started\n');
    const after = (await engine.request('GET', `/exec/${id}/json`)).json();
    assert.equal(after.Running, false);
    assert.equal(after.ExitCode, 137);
  });

  test('exec_create, exec_start and exec_die with the exit code; the session folder is removed', async () => {
    const since = Math.floor(Date.now() / 1000) - 1;
    const { id } = await run(['sh', '-c', 'exit 5']);
    const until = Math.floor(Date.now() / 1000) + 1;
    const r = await engine.request('GET', `/events?since=${since}&until=${until}&filters=${encodeURIComponent(JSON.stringify({ container: [box] }))}`);
    const events = r.text.trim().split('\n').map((l) => JSON.parse(l)).filter((e) => e.Actor.Attributes.execID === id);
    assert.deepEqual(events.map((e) => e.Action), ['exec_create: sh -c exit 5', 'exec_start: sh -c exit 5', 'exec_die']);
    assert.equal(events[2].Actor.Attributes.exitCode, '5');
    await eventually(() => {
      const left = readdirSync(`${engine.execRoot}`, { recursive: true }).map(String).filter((p) => p.includes(id.slice(0, 16)));
      return left.length === 0 ? true : undefined;
    }, 10_000);
  });

  test('a background child that keeps stdout open does not keep the exec running (the streams close after its exit)', async () => {
    const { body, inspect } = await run(['sh', '-c', '(sleep 120 &); echo hi']);
    assert.equal(demux(body).stdout, 'hi\n');
    assert.equal(inspect.Running, false);
    assert.equal(inspect.ExitCode, 0);
  });

  test('many execs leave no file descriptors open in the daemon', async () => {
    assert.ok(engine.pid, 'the daemon runs');
    await run(['true']); // whatever the daemon opens once for execs is open now
    const before = daemonFds();
    const execs: Array<Promise<unknown>> = [];
    for (let i = 0; i < 40; i++) {
      const cmd = [
        ['true'],
        ['sh', '-c', 'echo out; echo err >&2; exit 3'],
        ['no-such-command'],
        ['sh', '-c', 'kill -KILL $$'],
      ][i % 4];
      execs.push(run(cmd));
      if (execs.length >= 4) await Promise.all(execs.splice(0));
    }
    // A background child that holds the output past the exit, whose streams the daemon closes.
    execs.push(run(['sh', '-c', '(sleep 5 &); echo hi']));
    await Promise.all(execs);
    // The pipes of the last execs close as their readers see the end (the background child's when it exits).
    const pipes = (fds: string[]) => fds.filter((f) => f.includes('pipe:')).length;
    await eventually(() => {
      const now = daemonFds();
      return pipes(now) <= pipes(before) && now.length <= before.length + 2 ? true : undefined;
    }, 30_000).catch(() => {
      const now = daemonFds();
      assert.fail(`the daemon had ${before.length} files open before the execs and ${now.length} after; new:\n${now.filter((f) => !before.includes(f)).join('\n')}`);
    });
  });

  test('a client that goes away leaves the process running to its end', async () => {
    const id = await createExec(['sh', '-c', 'yes | head -c 50000000 > /dev/null; sleep 1; echo finished > /tmp/direct-gone']);
    // A raw client: it reads the first bytes of the stream, then closes the connection.
    const body = JSON.stringify({ Detach: false });
    const conn = net.connect(engine.socket);
    conn.on('error', () => undefined);
    conn.write(`POST /exec/${id}/start HTTP/1.1\r\nHost: engine\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    await new Promise((resolve) => conn.once('data', resolve));
    await eventually(async () => ((await engine.request('GET', `/exec/${id}/json`)).json().Running ? true : undefined), 30_000);
    conn.destroy();
    await eventually(async () => {
      const r = (await engine.request('GET', `/exec/${id}/json`)).json();
      return r.Running === false ? r : undefined;
    }, 60_000);
    assert.equal((await engine.dockerOk(['exec', 'directbox', 'cat', '/tmp/direct-gone'])).trim(), 'finished');
  });
});
