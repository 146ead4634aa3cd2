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
