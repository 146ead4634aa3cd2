/**
 * The Host conformance suite (test/conformance/host.ts) against each implementation: the LinuxHost of this
 * machine, and the remote Host over the agent protocol to a `berthd agent` in a child process on a
 * temporary socket (its restart between the two halves of the recovery test is the agent's: a new process,
 * a new connection), and the in-memory Host in the groups that need no kernel.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { once } from 'node:events';
import { createLinuxHost } from '../src/host/linux/index.js';
import { createRemoteHost } from '../src/host/remote/index.js';
import { createFakeHost } from '../src/host/fake/index.js';
import type { Host } from '../src/host/host.js';
import { hostConformance } from './conformance/host.js';
import { BERTHD, eventually } from './harness.js';
import type { RuntimeSandbox } from './runtime-support.js';

const canRun = process.getuid?.() === 0 && existsSync('/bin/busybox') && existsSync('/usr/bin/conmon');
const skip = !canRun && 'needs root, /bin/busybox and conmon';

hostConformance(
  'LinuxHost',
  {
    create: (box) => createLinuxHost({ dataRoot: box.dataRoot, execRoot: box.execRoot, runtime: 'crun' }),
    release: (host) => host.close(),
  },
  { skip },
);

/** Starts `berthd agent` on the sandbox's roots; resolves once its socket answers. */
async function startAgent(box: RuntimeSandbox): Promise<{ child: ChildProcess; socket: string; log: () => string }> {
  const socket = path.join(box.root, 'agent.sock');
  const chunks: Buffer[] = [];
  const child = spawn(process.execPath, [BERTHD, 'agent', '--socket', socket, '--data-root', box.dataRoot, '--exec-root', box.execRoot], { stdio: ['ignore', 'ignore', 'pipe'] });
  child.stderr!.on('data', (c: Buffer) => {
    chunks.push(c);
    if (process.env.BERTH_TEST_VERBOSE) process.stderr.write(c);
  });
  await eventually(() => {
    if (child.exitCode !== null) throw new Error(`the agent exited: ${Buffer.concat(chunks).toString()}`);
    if (!existsSync(socket)) throw new Error('no socket yet');
    return true;
  }, 20_000);
  return { child, socket, log: () => Buffer.concat(chunks).toString() };
}

async function stopAgent(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  await exited;
}

let agent: ChildProcess | undefined;
hostConformance(
  'remote Host over the agent protocol',
  {
    async create(box) {
      const started = await startAgent(box);
      agent = started.child;
      return createRemoteHost(`unix://${started.socket}`, { waitMs: 10_000 });
    },
    async release(host: Host) {
      await host.close();
      await stopAgent(agent);
    },
    cleanup: () => stopAgent(agent),
  },
  { skip },
);

hostConformance(
  'in-memory Host',
  {
    create: async () => createFakeHost(),
    release: (host) => host.close(),
  },
  { skip: existsSync('/bin/busybox') ? ['runtime', 'exec', 'files', 'stats', 'tools', 'recovery', 'plugins'] : 'needs /bin/busybox' },
);
