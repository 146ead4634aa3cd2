/**
 * Attach and stdin as with Docker Engine, against a real berthd: `docker run -it` in a real pseudo-terminal
 * (util-linux `script`) detached with the detach keys and attached to again, the JSON options body that
 * docker-modem sends with attach and exec start (never stdin), StdinOnce, detach keys on the raw protocol,
 * and `POST /wait` answered only after the output reached the attached clients.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import net from 'node:net';
import { describe, test } from 'node:test';
import { eventually, useEngine, type Engine } from './harness.js';

const engine = useEngine();

/** A command running in a pseudo-terminal made by `script`: what it prints, and keys typed into it. */
class Terminal {
  private readonly child: ChildProcessWithoutNullStreams;
  private chunks: Buffer[] = [];
  readonly exited: Promise<number | null>;

  constructor(e: Engine, command: string) {
    this.child = spawn('script', ['-qec', command, '/dev/null'], {
      env: { ...process.env, DOCKER_HOST: e.host, DOCKER_CONFIG: e.dockerConfig, DOCKER_CLI_HINTS: 'false', TERM: 'xterm' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.child.stdout.on('data', (c: Buffer) => this.chunks.push(c));
    this.child.stderr.on('data', (c: Buffer) => this.chunks.push(c));
    this.child.stdin.on('error', () => undefined);
    this.exited = new Promise((resolve) => this.child.on('close', (code) => resolve(code)));
  }

  get output(): string {
    return Buffer.concat(this.chunks).toString('latin1');
  }

  type(keys: string | Buffer): void {
    this.child.stdin.write(keys);
  }

  /** Waits until the output holds `pattern` (after `from`, an offset in the output). */
  async see(pattern: RegExp, from = 0, timeoutMs = 15_000): Promise<void> {
    try {
      await eventually(() => pattern.test(this.output.slice(from)), timeoutMs, 20);
    } catch {
      throw new Error(`the terminal did not show ${pattern} after offset ${from}:\n${JSON.stringify(this.output)}`);
    }
  }

  /** Ends the session; resolves with script's exit code. */
  async close(timeoutMs = 10_000): Promise<number | null> {
    const timer = setTimeout(() => this.child.kill('SIGKILL'), timeoutMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }

  kill(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
  }
}

describe('docker run -it, detach and attach again', () => {
  test('typing reaches the process again after ctrl-p ctrl-q and docker attach', { timeout: 90_000 }, async () => {
    const first = new Terminal(engine, 'docker run -it --name typist busybox sh');
    try {
      // The CLI puts the terminal in raw mode once attached: the shell's prompt comes from the container.
      await first.see(/\/ # /);
      first.type('echo one-$((40+2))\r');
      await first.see(/one-42/);
      first.type(Buffer.from([0x10, 0x11]));
      assert.equal(await first.close(), 0, first.output);
    } finally {
      first.kill();
    }
    const inspect = JSON.parse(await engine.dockerOk(['inspect', 'typist']))[0];
    assert.equal(inspect.State.Running, true, 'the container keeps running after the detach');
    assert.equal(inspect.Config.StdinOnce, true, 'docker run -i sets StdinOnce');

    const second = new Terminal(engine, 'docker attach typist');
    try {
      // Nothing is printed on attach: a newline gives a fresh prompt, then a command runs in the same shell.
      await new Promise((r) => setTimeout(r, 300));
      second.type('\r');
      await second.see(/\/ # /);
      const mark = second.output.length;
      second.type('echo two-$((40+3))\r');
      await second.see(/two-43/, mark);
      second.type(Buffer.from([0x10, 0x11]));
      // As with Docker Engine, docker attach reports the detach as its error.
      assert.equal(await second.close(), 1, second.output);
      assert.match(second.output, /read escape sequence/);
    } finally {
      second.kill();
    }

    // Other detach keys (--detach-keys, sent as the detachKeys parameter).
    const third = new Terminal(engine, 'docker attach --detach-keys ctrl-x,x typist');
    try {
      await new Promise((r) => setTimeout(r, 300));
      third.type('echo three-$((40+4))\r');
      await third.see(/three-44/);
      third.type(Buffer.from([0x18]));
      third.type('x');
      assert.equal(await third.close(), 1, third.output);
      assert.match(third.output, /read escape sequence/);
    } finally {
      third.kill();
    }
    assert.equal(JSON.parse(await engine.dockerOk(['inspect', 'typist']))[0].State.Running, true);

    // Ending the shell through a last attach: `exit` stops the container with its code.
    const last = new Terminal(engine, 'docker attach typist');
    try {
      await new Promise((r) => setTimeout(r, 300));
      last.type('exit 3\r');
      assert.equal(await last.close(), 3, last.output);
    } finally {
      last.kill();
    }
    await engine.dockerOk(['rm', '-f', 'typist']);
  });
});

/** Splits a multiplexed stream into its stdout and stderr text. */
function demux(body: Buffer): { stdout: string; stderr: string } {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  for (let at = 0; at + 8 <= body.length; ) {
    const size = body.readUInt32BE(at + 4);
    (body[at] === 2 ? err : out).push(body.subarray(at + 8, at + 8 + size));
    at += 8 + size;
  }
  return { stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() };
}

/** Reads a dockerode hijacked stream to its end. */
function readAll(stream: NodeJS.ReadableStream): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => resolve(Buffer.concat(chunks)));
    stream.on('close', () => resolve(Buffer.concat(chunks)));
    stream.on('error', reject);
  });
}

describe('the options body of attach and exec start is not stdin', () => {
  test('dockerode attach: the container reads only what was written after the upgrade', async () => {
    const docker = engine.dockerode();
    for (const before of [true, false]) {
      const container = await docker.createContainer({ Image: 'busybox', Cmd: ['cat'], OpenStdin: true, StdinOnce: true, AttachStdin: true, AttachStdout: true });
      try {
        if (!before) await container.start();
        // docker-modem sends these options as a JSON body with the upgrade request, beside the query.
        const stream = (await container.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true })) as unknown as NodeJS.ReadWriteStream;
        const all = readAll(stream);
        if (before) await container.start();
        stream.write('after the upgrade\n');
        stream.end();
        assert.equal(demux(await all).stdout, 'after the upgrade\n', before ? 'attached before the start' : 'attached while running');
        assert.equal((await container.wait()).StatusCode, 0);
      } finally {
        await container.remove({ force: true });
      }
    }
  });

  test('dockerode exec start: the process reads only what was written after the upgrade', async () => {
    const docker = engine.dockerode();
    const container = await docker.createContainer({ Image: 'busybox', Cmd: ['sleep', '600'] });
    try {
      await container.start();
      const exec = await container.exec({ AttachStdin: true, AttachStdout: true, AttachStderr: true, Cmd: ['cat'] });
      const stream = (await exec.start({ hijack: true, stdin: true, Detach: false, Tty: false })) as unknown as NodeJS.ReadWriteStream;
      const all = readAll(stream);
      stream.write('typed into the exec\n');
      stream.end();
      assert.equal(demux(await all).stdout, 'typed into the exec\n');
      assert.equal((await exec.inspect()).ExitCode, 0);
    } finally {
      await container.remove({ force: true });
    }
  });

  test('plain HTTP: a body sent with the upgrade request, in one write or apart, is not stdin', async () => {
    const created = await engine.request('POST', '/containers/create', { body: { Image: 'busybox', Cmd: ['cat'], OpenStdin: true, StdinOnce: true } });
    const id = created.json().Id;
    try {
      assert.equal((await engine.request('POST', `/containers/${id}/start`)).status, 204);
      const body = JSON.stringify({ stream: true, stdin: true, stdout: true });
      for (const apart of [false, true]) {
        const socket = net.connect(engine.socket);
        socket.on('error', () => undefined);
        const chunks: Buffer[] = [];
        socket.on('data', (c: Buffer) => chunks.push(c));
        const head = `POST /containers/${id}/attach?stream=1&stdin=1&stdout=1 HTTP/1.1\r\nHost: engine\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
        if (apart) {
          socket.write(head);
          await new Promise((r) => setTimeout(r, 50));
          socket.write(body);
        } else {
          socket.write(head + body);
        }
        await eventually(() => Buffer.concat(chunks).includes('\r\n\r\n'));
        socket.write(`line ${apart ? 2 : 1}\n`);
        await eventually(() => demux(Buffer.concat(chunks).subarray(Buffer.concat(chunks).indexOf('\r\n\r\n') + 4)).stdout.includes(`line ${apart ? 2 : 1}\n`));
        const all = Buffer.concat(chunks);
        assert.match(all.toString('latin1'), /^HTTP\/1\.1 101 UPGRADED\r\n/);
        assert.equal(demux(all.subarray(all.indexOf('\r\n\r\n') + 4)).stdout, `line ${apart ? 2 : 1}\n`);
        socket.destroy();
        if (!apart) {
          // The client went away without ending its stdin: with StdinOnce, that closes the container's stdin.
          await eventually(async () => (await engine.request('GET', `/containers/${id}/json`)).json().State.Running === false);
          await engine.request('POST', `/containers/${id}/start`);
        }
      }
    } finally {
      await engine.request('DELETE', `/containers/${id}?force=1`);
    }
  });
});

/** Opens a hijacked attach over plain HTTP; resolves once the answer's head is in. */
async function rawAttach(id: string, query: string): Promise<{ socket: net.Socket; received(): Buffer; closed: Promise<void> }> {
  const socket = net.connect(engine.socket);
  socket.on('error', () => undefined);
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  const closed = new Promise<void>((r) => socket.on('close', () => r()));
  socket.write(`POST /containers/${id}/attach?${query} HTTP/1.1\r\nHost: engine\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n`);
  await eventually(() => Buffer.concat(chunks).includes('\r\n\r\n'));
  const head = Buffer.concat(chunks);
  assert.match(head.toString('latin1'), /^HTTP\/1\.1 101 UPGRADED\r\n/);
  return {
    socket,
    received: () => {
      const all = Buffer.concat(chunks);
      return all.subarray(all.indexOf('\r\n\r\n') + 4);
    },
    closed,
  };
}

describe('detach keys and stdin on the raw protocol', () => {
  test('with a TTY, the detachKeys parameter ends the attachment and the stdin stays open for the next one', async () => {
    // StdinOnce as docker run -it sets it: with a TTY the container's stdin outlives every attached client.
    const created = await engine.request('POST', '/containers/create', { body: { Image: 'busybox', Cmd: ['cat'], Tty: true, OpenStdin: true, StdinOnce: true } });
    const id = created.json().Id;
    try {
      assert.equal((await engine.request('POST', `/containers/${id}/start`)).status, 204);
      const bad = await engine.request('POST', `/containers/${id}/attach?stream=1&stdin=1&detachKeys=ctrl-`);
      assert.equal(bad.status, 400);
      assert.match(bad.json().message, /Invalid detach keys/);
      const first = await rawAttach(id, 'stream=1&stdin=1&stdout=1&stderr=1&detachKeys=ctrl-a,b');
      first.socket.write('one\r');
      await eventually(() => first.received().toString().includes('one\r\n'));
      // ctrl-a followed by another key is input; ctrl-a b detaches, and neither key reaches the container.
      first.socket.write(Buffer.from([0x01]));
      first.socket.write('c\r');
      // The terminal echoes it as ^Ac, then cat prints it back.
      await eventually(() => first.received().toString('latin1').includes('\x01c\r\n'));
      first.socket.write(Buffer.from([0x01, 0x62]));
      await first.closed;
      assert.equal((await engine.request('GET', `/containers/${id}/json`)).json().State.Running, true);
      // The daemon saw the keys: a detach event, as Docker's.
      const now = Math.floor(Date.now() / 1000);
      const events = await engine.request('GET', `/events?since=${now - 30}&until=${now + 1}&filters=${encodeURIComponent(JSON.stringify({ container: [id], event: ['detach'] }))}`);
      assert.equal(events.text.split('\n').filter(Boolean).length, 1, events.text);
      const second = await rawAttach(id, 'stream=1&stdin=1&stdout=1');
      second.socket.write('two\r');
      await eventually(() => second.received().toString().includes('two\r\n'));
      assert.ok(!second.received().toString('latin1').includes('b'), JSON.stringify(second.received().toString('latin1')));
      // The end of the client's input ends the attachment too (as Docker: with a TTY, stdin stays open).
      second.socket.end();
      await second.closed;
      const third = await rawAttach(id, 'stream=1&stdin=1&stdout=1');
      third.socket.write('three\r');
      await eventually(() => third.received().toString().includes('three\r\n'));
      third.socket.destroy();
    } finally {
      await engine.request('DELETE', `/containers/${id}?force=1`);
    }
  });

  test('without a TTY, the detach keys are input; StdinOnce: the end of the first client stdin ends the container', { timeout: 60_000 }, async () => {
    const created = await engine.request('POST', '/containers/create', { body: { Image: 'busybox', Cmd: ['sh', '-c', 'read go; seq 1 100000; cat'], OpenStdin: true, StdinOnce: true } });
    const id = created.json().Id;
    try {
      assert.equal((await engine.request('POST', `/containers/${id}/start`)).status, 204);
      const openFds = async () => (await engine.request('GET', '/info')).json().NFd as number;
      const fdsBefore = await openFds();
      // Attachments without stdin going away leave the container's stdin open, and do not hold up its output.
      for (let i = 0; i < 5; i++) {
        const watcher = await rawAttach(id, 'stream=1&stdout=1');
        watcher.socket.destroy();
        await watcher.closed;
      }
      const client = await rawAttach(id, 'stream=1&stdin=1&stdout=1');
      client.socket.write('go\n');
      const numbers = Array.from({ length: 100000 }, (_, i) => `${i + 1}\n`).join('');
      await eventually(() => demux(client.received()).stdout.length >= numbers.length, 30_000);
      client.socket.write(Buffer.from([0x10, 0x11, 0x0a]));
      await eventually(() => demux(client.received()).stdout === `${numbers}\x10\x11\n`);
      client.socket.end();
      // cat sees the end of its input and exits: the output ends, then the connection.
      await client.closed;
      const state = (await engine.request('GET', `/containers/${id}/json`)).json().State;
      assert.equal(state.Running, false);
      assert.equal(state.ExitCode, 0);
      // The watchers' sessions, read to the container's end, are released then (a running container holds a
      // few descriptors of its own, fewer than five sessions would leave).
      const settled = await eventually(async () => ((await openFds()) <= fdsBefore ? true : undefined), 5000).catch(() => false);
      assert.ok(settled, `the daemon holds ${(await openFds()) - fdsBefore} more descriptors after the container ended`);
    } finally {
      await engine.request('DELETE', `/containers/${id}?force=1`);
    }
  });

  test('without StdinOnce, the end of a client stdin ends its attachment only', async () => {
    const created = await engine.request('POST', '/containers/create', { body: { Image: 'busybox', Cmd: ['cat'], OpenStdin: true } });
    const id = created.json().Id;
    try {
      assert.equal((await engine.request('POST', `/containers/${id}/start`)).status, 204);
      for (const word of ['first', 'second']) {
        const client = await rawAttach(id, 'stream=1&stdin=1&stdout=1');
        client.socket.write(`${word}\n`);
        await eventually(() => demux(client.received()).stdout === `${word}\n`);
        client.socket.end();
        await client.closed;
      }
      assert.equal((await engine.request('GET', `/containers/${id}/json`)).json().State.Running, true);
    } finally {
      await engine.request('DELETE', `/containers/${id}?force=1`);
    }
  });
});

describe('the end of an attached client stdin, the container stdin staying open', () => {
  test('docker run -d -i, then docker attach with piped input: the answer to the input is printed', async () => {
    const id = (await engine.dockerOk(['run', '-d', '-i', 'busybox', 'sh', '-c', 'read line; echo "got $line"'])).trim();
    try {
      const attached = await engine.docker(['attach', id], { input: 'piped in\n' });
      assert.equal(attached.code, 0, attached.stderr);
      assert.equal(attached.stdout, 'got piped in\n');
    } finally {
      await engine.docker(['rm', '-f', id]);
    }
  });

  test('raw protocol: output written after the end of the client stdin still reaches it, then the attachment ends', async () => {
    // The answer comes a while after the input, which the client ended at once; the container goes on.
    const created = await engine.request('POST', '/containers/create', { body: { Image: 'busybox', Cmd: ['sh', '-c', 'while read line; do sleep 0.2; echo "got $line"; done'], OpenStdin: true } });
    const id = created.json().Id;
    try {
      assert.equal((await engine.request('POST', `/containers/${id}/start`)).status, 204);
      const client = await rawAttach(id, 'stream=1&stdin=1&stdout=1&stderr=1');
      client.socket.end('one\n');
      await client.closed;
      assert.equal(demux(client.received()).stdout, 'got one\n');
      assert.equal((await engine.request('GET', `/containers/${id}/json`)).json().State.Running, true);
    } finally {
      await engine.request('DELETE', `/containers/${id}?force=1`);
    }
  });
});

describe('wait answers after the attached clients have the output', () => {
  test('attach, start, wait, then read: every byte is there when the wait answers (50 runs each way)', { timeout: 300_000 }, async () => {
    // 64 KiB through stdout and a line on stderr, written as fast as the container can, then an exit.
    const lines = 1024;
    const line = (i: number) => `${String(i).padStart(5, '0')} ${'x'.repeat(57)}\n`;
    const expected = Array.from({ length: lines }, (_, i) => line(i)).join('');
    const cmd = ['sh', '-c', `i=0; while [ $i -lt ${lines} ]; do printf '%05d %s\\n' $i ${'x'.repeat(57)}; i=$((i+1)); done; echo done >&2; exit 7`];
    for (const tty of [false, true]) {
      for (let run = 0; run < 50; run++) {
        const created = await engine.request('POST', '/containers/create', { body: { Image: 'busybox', Cmd: cmd, Tty: tty, NetworkDisabled: true, HostConfig: { NetworkMode: 'none' } } });
        const id = created.json().Id;
        try {
          const attached = await rawAttach(id, 'stream=1&stdout=1&stderr=1');
          const waited = new Promise<{ status: number; body: string }>((resolve, reject) => {
            // The wait's head comes at once; its body (the exit code) when the container is done.
            engine.request('POST', `/containers/${id}/wait?condition=next-exit`).then((r) => resolve({ status: r.status, body: r.text }), reject);
          });
          assert.equal((await engine.request('POST', `/containers/${id}/start`)).status, 204);
          const answer = await waited;
          // Read what had arrived when the wait answered, without waiting further.
          const got = attached.received();
          attached.socket.destroy();
          assert.equal(answer.status, 200);
          assert.equal(JSON.parse(answer.body).StatusCode, 7);
          if (tty) {
            assert.equal(got.toString().replace(/\r\n/g, '\n'), expected + 'done\n', `run ${run} with a TTY: ${got.length} bytes`);
          } else {
            const out = demux(got);
            assert.equal(out.stdout.length, expected.length, `run ${run}: ${out.stdout.length} of ${expected.length} bytes`);
            assert.equal(out.stdout, expected);
            assert.equal(out.stderr, 'done\n', `run ${run}`);
          }
        } finally {
          await engine.request('DELETE', `/containers/${id}?force=1`);
        }
      }
    }
  });
});
