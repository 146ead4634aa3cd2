/**
 * Helpers of the runtime integration tests: a temporary data root and exec root, a busybox layer folder, a
 * minimal OCI spec, and a cleanup that removes whatever a test left even when it failed.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, copyFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { unmountUnder } from './harness.js';

export const BUSYBOX = '/bin/busybox';
const APPLETS = ['sh', 'echo', 'cat', 'sleep', 'true', 'false', 'stty', 'ls', 'test', '['];

export interface RuntimeSandbox {
  root: string;
  dataRoot: string;
  execRoot: string;
  /** A layer folder with busybox and a few applets. */
  layer: string;
  cleanup(): void;
}

export function makeSandbox(): RuntimeSandbox {
  const root = mkdtempSync('/tmp/brt-');
  const dataRoot = path.join(root, 'd');
  const execRoot = path.join(root, 'x');
  const layer = path.join(root, 'layer');
  mkdirSync(path.join(layer, 'bin'), { recursive: true });
  for (const d of ['proc', 'sys', 'dev', 'etc', 'tmp']) mkdirSync(path.join(layer, d), { recursive: true });
  copyFileSync(BUSYBOX, path.join(layer, 'bin', 'busybox'));
  for (const applet of APPLETS) symlinkSync('busybox', path.join(layer, 'bin', applet));
  writeFileSync(path.join(layer, 'etc', 'passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
  return {
    root,
    dataRoot,
    execRoot,
    layer,
    cleanup() {
      killContainers(path.join(execRoot, 'runtime'));
      unmountUnder(root);
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** Kills and deletes every container in a runtime state root (whichever runtime made it). */
export function killContainers(stateRoot: string): void {
  if (!existsSync(stateRoot)) return;
  for (const id of readdirSync(stateRoot)) {
    for (const runtime of ['crun', 'runc']) {
      spawnSync(runtime, ['--root', stateRoot, 'kill', id, 'KILL']);
      spawnSync(runtime, ['--root', stateRoot, 'delete', '--force', id]);
    }
  }
}

const CAPS = ['CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_FSETID', 'CAP_FOWNER', 'CAP_MKNOD', 'CAP_NET_RAW', 'CAP_SETGID', 'CAP_SETUID', 'CAP_SETFCAP', 'CAP_SETPCAP', 'CAP_NET_BIND_SERVICE', 'CAP_SYS_CHROOT', 'CAP_KILL', 'CAP_AUDIT_WRITE'];

/** A minimal OCI spec running `args` (root.path is filled in by the runtime). */
export function minimalSpec(args: string[], opts: { tty?: boolean } = {}): object {
  return {
    ociVersion: '1.0.2',
    process: {
      terminal: opts.tty ?? false,
      user: { uid: 0, gid: 0 },
      args,
      env: ['PATH=/bin', 'TERM=xterm'],
      cwd: '/',
      capabilities: { bounding: CAPS, effective: CAPS, permitted: CAPS },
      noNewPrivileges: true,
    },
    root: { readonly: false },
    hostname: 'runtime-test',
    mounts: [
      { destination: '/proc', type: 'proc', source: 'proc' },
      { destination: '/dev', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'] },
      { destination: '/dev/pts', type: 'devpts', source: 'devpts', options: ['nosuid', 'noexec', 'newinstance', 'ptmxmode=0666', 'mode=0620'] },
      { destination: '/dev/shm', type: 'tmpfs', source: 'shm', options: ['nosuid', 'noexec', 'nodev', 'mode=1777', 'size=65536k'] },
      { destination: '/sys', type: 'sysfs', source: 'sysfs', options: ['nosuid', 'noexec', 'nodev', 'ro'] },
    ],
    linux: {
      namespaces: [{ type: 'pid' }, { type: 'network' }, { type: 'ipc' }, { type: 'uts' }, { type: 'mount' }],
      maskedPaths: ['/proc/kcore', '/sys/firmware'],
      readonlyPaths: ['/proc/sys', '/proc/sysrq-trigger'],
    },
  };
}

/** Collects a readable's objectMode attach output until `pred` holds for the text so far. */
export async function readUntil(
  output: NodeJS.ReadableStream,
  pred: (text: string) => boolean,
  timeoutMs = 10_000,
): Promise<string> {
  let text = '';
  return new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`timed out waiting for output; got ${JSON.stringify(text)}`));
    }, timeoutMs);
    const onData = (rec: { data: Buffer }) => {
      text += rec.data.toString('utf8');
      if (pred(text)) {
        cleanup();
        resolve(text);
      }
    };
    const onEnd = () => {
      cleanup();
      if (pred(text)) resolve(text);
      else reject(new Error(`output ended before the condition held; got ${JSON.stringify(text)}`));
    };
    const cleanup = () => {
      clearTimeout(timer);
      output.off('data', onData);
      output.off('end', onEnd);
    };
    output.on('data', onData);
    output.on('end', onEnd);
  });
}
