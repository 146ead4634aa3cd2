/**
 * A daemon whose agent names folders otherwise than it does, as a VM's guest: `--agent-path` maps a shared
 * folder of the daemon's machine to its mount in the guest (here another folder of the same machine, and the
 * daemon's own path of it does not exist, so only a translated path works), and the daemon's containers
 * folder, which both sides write, to itself. Bind mounts (`-v`, `--mount`), `docker cp` through a bind mount
 * and the containers' /etc files and logs go through the translation; a bind source outside the shared
 * folders is refused with a 400 naming it and them.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import path from 'node:path';
import { BERTHD, Engine, eventually } from './harness.js';
import { killContainers } from './runtime-support.js';

const canRun = process.getuid?.() === 0 && existsSync('/bin/busybox') && existsSync('/usr/bin/conmon');

describe('a daemon with --agent-path: the agent is given the guest\'s paths', { skip: !canRun && 'needs root, busybox and conmon' }, () => {
  const args: string[] = [];
  const engine = new Engine({ args });
  let agent: ChildProcess | undefined;
  const agentLog: Buffer[] = [];
  // The daemon's name of the shared folder (absent on this machine) and the guest's mount of it.
  const hostSrc = path.join(engine.root, 'host-src');
  const guestSrc = path.join(engine.root, 'guest-src');
  const elsewhere = path.join(engine.root, 'elsewhere');
  const logs = () => `agent:\n${Buffer.concat(agentLog).toString()}\ndaemon:\n${engine.daemonLog}`;

  before(async () => {
    mkdirSync(guestSrc);
    mkdirSync(elsewhere);
    writeFileSync(path.join(guestSrc, 'in.txt'), 'from the shared folder\n');
    const agentSocket = path.join(engine.root, 'agent.sock');
    agent = spawn(process.execPath, [BERTHD, 'agent', '--socket', agentSocket, '--data-root', path.join(engine.root, 'gd'), '--exec-root', path.join(engine.root, 'gx')], { stdio: ['ignore', 'ignore', 'pipe'] });
    agent.stderr!.on('data', (c: Buffer) => agentLog.push(c));
    await eventually(() => existsSync(agentSocket), 20_000);
    const containers = path.join(engine.dataRoot, 'containers');
    args.push(
      '--agent', `unix://${agentSocket}`,
      '--agent-path', `${hostSrc}=${guestSrc}`,
      // The data root is the guest's own; its containers folder is shared at its path.
      '--agent-path', `${engine.dataRoot}=${path.join(engine.root, 'gd')}`,
      '--agent-path', `${containers}=${containers}`,
    );
    await engine.start();
    await engine.loadBusybox();
  });

  after(async () => {
    await engine.stop().catch(() => undefined);
    if (agent && agent.exitCode === null && agent.signalCode === null) {
      const exited = once(agent, 'exit');
      agent.kill('SIGTERM');
      await exited;
    }
    killContainers(path.join(engine.root, 'gx', 'runtime'));
    await engine.cleanup();
  });

  test('-v and --mount of the shared folder reach its guest mount, read and written; inspect shows the daemon\'s path', async () => {
    const read = await engine.docker(['run', '--rm', '-v', `${hostSrc}:/src`, 'busybox', 'cat', '/src/in.txt']);
    assert.equal(read.code, 0, `${read.stderr}\n${logs()}`);
    assert.equal(read.stdout, 'from the shared folder\n');
    const id = (await engine.dockerOk(['run', '-d', '--mount', `type=bind,source=${hostSrc},target=/m`, 'busybox', 'sh', '-c', 'echo written > /m/out.txt; echo logged; exec sleep 600'])).trim();
    try {
      await eventually(() => existsSync(path.join(guestSrc, 'out.txt')), 20_000);
      assert.equal(readFileSync(path.join(guestSrc, 'out.txt'), 'utf8'), 'written\n');
      const [inspected] = JSON.parse(await engine.dockerOk(['inspect', id]));
      assert.deepEqual(inspected.Mounts.map((m: { Source: string }) => m.Source), [hostSrc]);
      // The log and /etc files, in the daemon's containers folder through the translation.
      assert.equal(await eventually(async () => ((await engine.dockerOk(['logs', id])) === 'logged\n' ? 'logged\n' : undefined), 20_000), 'logged\n');
      assert.match(await engine.dockerOk(['exec', id, 'cat', '/etc/hostname']), new RegExp(id.slice(0, 12)));
      assert.ok(existsSync(path.join(engine.dataRoot, 'containers', id, 'hostname')));
    } finally {
      await engine.docker(['rm', '-f', id]);
    }
  });

  test('docker cp into and out of a bind mount of the shared folder', async () => {
    const id = (await engine.dockerOk(['create', '-v', `${hostSrc}:/src`, 'busybox', 'true'])).trim();
    try {
      const file = path.join(engine.root, 'cp-in.txt');
      writeFileSync(file, 'copied in\n');
      const cpIn = await engine.docker(['cp', file, `${id}:/src/copied.txt`]);
      assert.equal(cpIn.code, 0, `${cpIn.stderr}\n${logs()}`);
      assert.equal(readFileSync(path.join(guestSrc, 'copied.txt'), 'utf8'), 'copied in\n');
      const cpOut = await engine.docker(['cp', `${id}:/src/in.txt`, '-']);
      assert.equal(cpOut.code, 0, cpOut.stderr);
      assert.match(cpOut.stdout, /from the shared folder/);
    } finally {
      await engine.docker(['rm', '-f', id]);
    }
  });

  test('a bind source outside the shared folders is a 400 naming it and them', async () => {
    for (const flag of [['-v', `${elsewhere}:/x`], ['--mount', `type=bind,source=${elsewhere},target=/x`]]) {
      const run = await engine.docker(['run', '--rm', ...flag, 'busybox', 'true']);
      assert.notEqual(run.code, 0);
      assert.match(run.stderr, /not shared with the VM/);
      assert.ok(run.stderr.includes(elsewhere) && run.stderr.includes(hostSrc), run.stderr);
    }
    const res = await engine.request('POST', '/containers/create', { body: { Image: 'busybox', HostConfig: { Binds: [`${elsewhere}:/x`] } } });
    assert.equal(res.status, 400);
    assert.match(JSON.parse(res.text).message, /mounts denied: the path .*elsewhere is not shared/);
  });
});
