/**
 * `berthd agent --device`: the agent on a character device, as on the guest's virtio-serial port. Here the
 * device is a pseudo-terminal in raw mode whose other end a small relay serves on a unix socket, one client at
 * a time (as QEMU's chardev socket does): a daemon's remote Host connects, works, goes away, and the next one
 * is served on the same device, past what the agent wrote to the device meanwhile.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { once } from 'node:events';
import path from 'node:path';
import { createRemoteHost } from '../src/host/remote/index.js';
import { BERTHD, eventually, unmountUnder } from './harness.js';

const RELAY = `
import os, pty, select, socket, sys, tty
master, slave = pty.openpty()
tty.setraw(slave)
print(os.ttyname(slave), flush=True)
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(sys.argv[1])
server.listen(1)
while True:
    client, _ = server.accept()
    while True:
        ready, _, _ = select.select([master, client], [], [])
        if client in ready:
            data = client.recv(65536)
            if not data:
                break
            os.write(master, data)
        if master in ready:
            client.sendall(os.read(master, 65536))
    client.close()
`;

const canRun = process.getuid?.() === 0 && existsSync('/usr/bin/python3');

describe('the agent on a character device', { skip: !canRun && 'needs root and python3' }, () => {
  let root: string;
  let relay: ChildProcess;
  let agent: ChildProcess;
  let socketPath: string;
  const agentLog: Buffer[] = [];

  before(async () => {
    root = mkdtempSync('/tmp/bd-');
    socketPath = path.join(root, 'relay.sock');
    relay = spawn('python3', ['-c', RELAY, socketPath], { stdio: ['ignore', 'pipe', 'inherit'] });
    const [line] = (await once(relay.stdout!, 'data')) as [Buffer];
    const device = line.toString().trim();
    agent = spawn(process.execPath, [BERTHD, 'agent', '--device', device, '--data-root', path.join(root, 'data'), '--exec-root', path.join(root, 'x')], { stdio: ['ignore', 'ignore', 'pipe'] });
    agent.stderr!.on('data', (c: Buffer) => agentLog.push(c));
    await eventually(() => existsSync(socketPath), 10_000);
  });

  after(async () => {
    for (const child of [agent, relay]) {
      if (!child || child.exitCode !== null || child.signalCode !== null) continue;
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    }
    if (root) {
      unmountUnder(root);
      rmSync(root, { recursive: true, force: true });
    }
  });

  test('one daemon after another is served on the same device, streams included', async () => {
    const plain = Buffer.from('bytes through a serial port '.repeat(20_000));
    const xz = spawnSync('xz', ['-c'], { input: plain }).stdout;
    for (const round of [1, 2, 3]) {
      const host = await createRemoteHost(`unix://${socketPath}`, { waitMs: 10_000 });
      try {
        assert.equal((await host.probe.info()).osType, 'linux', `round ${round}:\n${Buffer.concat(agentLog).toString()}`);
        assert.equal(await host.volumes.exists(root), true);
        const out = host.tools.decompressor('xz');
        const chunks: Buffer[] = [];
        out.on('data', (c: Buffer) => chunks.push(c));
        out.end(xz);
        await once(out, 'end');
        assert.ok(Buffer.concat(chunks).equals(plain), `round ${round}`);
        // The last call's answer is left unread in the device when the next daemon comes.
        if (round < 3) void host.probe.componentVersions().catch(() => undefined);
      } finally {
        await host.close();
      }
    }
  });
});
