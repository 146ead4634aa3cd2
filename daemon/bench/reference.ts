/**
 * The reference the engine is measured against: the OCI runtime alone running /bin/true in an OCI bundle of the
 * same busybox root filesystem as the busybox image (`crun run --bundle B id`, in the foreground).
 *
 * crun 1.8 refuses to run when the cgroup v2 hierarchy of a hybrid layout (/sys/fs/cgroup/unified) has
 * controllers attached ("cgroups in hybrid mode not supported"). On such hosts the timed loop runs in a private
 * mount namespace where that hierarchy is unmounted, so crun sees the cgroup v1 layout; nothing outside the
 * namespace changes, and the loop itself is timed the same way.
 */
import { spawn, spawnSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runtimeUnusableReason } from '../src/host/linux/runtime/ociruntime.js';
import { buildBusyboxRootfs } from '../test/fixtures/busybox.js';
import { msSince } from './stats.js';

export type Runtime = 'crun' | 'runc';

const WORKER = path.join(path.dirname(fileURLToPath(import.meta.url)), 'reference-worker.js');

export interface Bundle {
  /** The bundle folder (config.json and rootfs/). */
  dir: string;
  /** The runtime's state root used for the reference containers. */
  stateRoot: string;
}

/**
 * Writes an OCI bundle under `dir`: the busybox image's root filesystem, and the runtime's default spec with
 * `args` as the process (no terminal, writable root like a container's).
 */
export async function prepareBundle(dir: string, args: string[] = ['/bin/true']): Promise<Bundle> {
  const rootfs = path.join(dir, 'rootfs');
  const stateRoot = path.join(dir, 'state');
  await fs.mkdir(rootfs, { recursive: true });
  await fs.mkdir(stateRoot, { recursive: true });
  const layer = path.join(dir, 'rootfs.tar');
  await buildBusyboxRootfs(layer);
  const untar = spawnSync('tar', ['-x', '-f', layer, '-C', rootfs], { encoding: 'utf8' });
  if (untar.status !== 0) throw new Error(`tar -x ${layer}: ${untar.stderr}`);
  await fs.rm(layer);
  const spec = spawnSync('crun', ['spec'], { cwd: dir, encoding: 'utf8' });
  if (spec.status !== 0) throw new Error(`crun spec: ${spec.stderr}`);
  const config = JSON.parse(await fs.readFile(path.join(dir, 'config.json'), 'utf8'));
  config.process.terminal = false;
  config.process.args = args;
  config.root = { path: 'rootfs', readonly: false };
  config.hostname = 'reference';
  await fs.writeFile(path.join(dir, 'config.json'), JSON.stringify(config, null, 2));
  return { dir, stateRoot };
}

/** Runs one container in the foreground; resolves with its wall time in ms, rejects when the runtime fails. */
export function runOnce(runtime: Runtime, bundle: Bundle, id: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const start = process.hrtime.bigint();
    const child = spawn(runtime, ['--root', bundle.stateRoot, 'run', '--bundle', bundle.dir, id], { stdio: ['ignore', 'ignore', 'pipe'] });
    const stderr: Buffer[] = [];
    child.stderr!.on('data', (c: Buffer) => stderr.push(c));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      const elapsed = msSince(start);
      if (code === 0) resolve(elapsed);
      else reject(new Error(`${runtime} run exited ${code ?? signal}: ${Buffer.concat(stderr).toString('utf8').trim()}`));
    });
  });
}

/** Times `iterations` foreground runs after `warmup` untimed ones; ids are unique per run. */
export async function timeRuns(runtime: Runtime, bundle: Bundle, iterations: number, warmup: number): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < warmup + iterations; i++) {
    const ms = await runOnce(runtime, bundle, `ref-${process.pid}-${i}`);
    if (i >= warmup) samples.push(ms);
  }
  return samples;
}

export interface ReferenceResult {
  samples: number[];
  /** How the runs were made, for the report. */
  note?: string;
}

/**
 * Times the runtime alone in a child process (the worker), inside a private mount namespace with the hybrid
 * cgroup v2 hierarchy hidden when crun needs it.
 */
export async function measureReference(
  runtime: Runtime,
  bundle: Bundle,
  iterations: number,
  warmup: number,
  opts: { hideUnifiedCgroup?: boolean } = {},
): Promise<ReferenceResult> {
  const hide = opts.hideUnifiedCgroup ?? runtimeUnusableReason(runtime) !== undefined;
  const worker = [process.execPath, WORKER, runtime, bundle.dir, bundle.stateRoot, String(iterations), String(warmup)];
  const argv = hide
    ? ['unshare', '--mount', '--propagation', 'private', '--', 'sh', '-c', 'umount /sys/fs/cgroup/unified && exec "$@"', 'sh', ...worker]
    : worker;
  const out = await new Promise<string>((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    child.stdout!.on('data', (c: Buffer) => stdout.push(c));
    child.stderr!.on('data', (c: Buffer) => stderr.push(c));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0) resolve(Buffer.concat(stdout).toString('utf8'));
      else reject(new Error(`${runtime} reference failed (exit ${code}): ${Buffer.concat(stderr).toString('utf8').trim()}`));
    });
  });
  const samples = JSON.parse(out) as number[];
  return { samples, note: hide ? `run in a private mount namespace without /sys/fs/cgroup/unified (${runtime} cannot use this host's hybrid cgroup layout)` : undefined };
}
