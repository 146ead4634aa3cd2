/**
 * The VM from a terminal: start the guest image with this platform's driver and keep it running in the
 * foreground (Ctrl-C stops it), or print the command line a driver would run.
 *
 *   node daemon/dist/src/vm/cli.js run|print [--driver qemu|vfkit|wsl2] [--image DIR] [--state DIR]
 *       [--cpus N] [--memory MiB] [--disk GiB] [--share HOST[:GUEST][:ro]]... [--accel kvm|hvf|whpx|tcg]
 *       [--engine-socket PATH]
 *
 * --image is a folder made by scripts/build-guest-image.sh (default: the newest image of the host's
 * architecture in the cache); --state holds the data disk and the sockets (default ~/.berth/vm). With `run`,
 * the daemon goes in another terminal: `berthd --agent <endpoint>` as printed; with --engine-socket (that
 * daemon's socket), the containers' published ports are forwarded from the host's loopback (vm/ports.ts).
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { DEFAULT_RESOURCES, type GuestArch, type GuestImage, type Share, type VmConfig, type VmDriver } from './driver.js';
import { defaultCacheDir } from './guest/image.js';
import { PublishedPorts } from './ports.js';
import { agentPathFlags } from './shares.js';
import { QemuDriver, qemuCommand, type QemuAccel } from './qemu.js';
import { VfkitDriver, vfkitCommand } from './vfkit.js';
import { Wsl2Driver, wslCommands } from './wsl.js';

type DriverKind = 'qemu' | 'vfkit' | 'wsl2';

export function defaultDriver(platform: NodeJS.Platform): DriverKind {
  return platform === 'darwin' ? 'vfkit' : platform === 'win32' ? 'wsl2' : 'qemu';
}

/** The newest image of arch in the cache folder. */
export function newestImage(cacheDir: string, arch: GuestArch): string | undefined {
  if (!existsSync(cacheDir)) return undefined;
  const dirs = readdirSync(cacheDir)
    .filter((n) => n.startsWith(`${arch}-`) && existsSync(path.join(cacheDir, n, 'manifest.json')))
    .map((n) => ({ dir: path.join(cacheDir, n), mtime: statSync(path.join(cacheDir, n, 'manifest.json')).mtimeMs }))
    .sort((a, b) => b.mtime - a.mtime);
  return dirs[0]?.dir;
}

/** `HOST[:GUEST][:ro]`: the guest path is the host path by default (so that bind mount sources read the same). */
export function parseShare(spec: string): Share {
  let rest = spec;
  let readOnly = false;
  if (rest.endsWith(':ro')) {
    readOnly = true;
    rest = rest.slice(0, -3);
  }
  // A Windows drive letter's colon is not a separator.
  const colon = rest.indexOf(':', /^[A-Za-z]:[\\/]/.test(rest) ? 2 : 0);
  const hostPath = colon > 0 ? rest.slice(0, colon) : rest;
  const guestPath = colon > 0 ? rest.slice(colon + 1) : hostPath;
  if (!hostPath || !guestPath.startsWith('/')) throw new RangeError(`--share ${spec}: HOST[:GUEST][:ro] with an absolute guest path`);
  return { hostPath, guestPath, readOnly };
}

export async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      driver: { type: 'string' },
      image: { type: 'string' },
      state: { type: 'string' },
      cpus: { type: 'string' },
      memory: { type: 'string' },
      disk: { type: 'string' },
      share: { type: 'string', multiple: true },
      accel: { type: 'string' },
      name: { type: 'string' },
      'engine-socket': { type: 'string' },
    },
  });
  const verb = positionals[0];
  if (verb !== 'run' && verb !== 'print') {
    process.stderr.write('usage: vm run|print [--driver qemu|vfkit|wsl2] [--image DIR] [--state DIR] [--cpus N] [--memory MiB] [--disk GiB] [--share HOST[:GUEST][:ro]]... [--accel ...]\n');
    return 2;
  }
  const kind = (values.driver ?? defaultDriver(process.platform)) as DriverKind;
  if (kind !== 'qemu' && kind !== 'vfkit' && kind !== 'wsl2') throw new RangeError(`--driver: qemu, vfkit or wsl2, not ${String(kind)}`);
  const arch: GuestArch = os.arch() === 'arm64' ? 'arm64' : 'amd64';
  const imageDir = values.image ?? newestImage(defaultCacheDir(), arch);
  if (!imageDir) throw new Error(`no guest image for ${arch} in ${defaultCacheDir()}: build one with scripts/build-guest-image.sh, or give --image`);
  const image: GuestImage = {
    arch: existsSync(path.join(imageDir, 'Image')) ? 'arm64' : arch,
    kernel: path.join(imageDir, 'vmlinuz'),
    initrd: path.join(imageDir, 'initrd.img'),
    rootfsTar: existsSync(path.join(imageDir, 'rootfs.tar')) ? path.join(imageDir, 'rootfs.tar') : undefined,
  };
  const config: VmConfig = {
    name: values.name ?? 'berth',
    stateDir: values.state ?? path.join(os.homedir(), '.berth', 'vm'),
    image,
    resources: {
      cpus: values.cpus ? Number(values.cpus) : DEFAULT_RESOURCES.cpus,
      memoryMiB: values.memory ? Number(values.memory) : DEFAULT_RESOURCES.memoryMiB,
      diskGiB: values.disk ? Number(values.disk) : DEFAULT_RESOURCES.diskGiB,
    },
    shares: (values.share ?? []).map(parseShare),
  };
  const accel = values.accel as QemuAccel | undefined;
  if (verb === 'print') {
    if (kind === 'qemu') {
      const c = qemuCommand(config, { accel });
      process.stdout.write([c.binary, ...c.args].map((a) => (/[\s"]/.test(a) ? JSON.stringify(a) : a)).join(' ') + '\n');
    } else if (kind === 'vfkit') {
      const c = vfkitCommand(config);
      process.stdout.write([c.binary, ...c.args].map((a) => (/[\s"]/.test(a) ? `'${a}'` : a)).join(' ') + '\n');
    } else {
      const c = wslCommands(config);
      for (const args of [c.import, c.resize, c.agent]) process.stdout.write(['wsl.exe', ...args].join(' ') + '\n');
    }
    return 0;
  }
  const driver: VmDriver = kind === 'qemu' ? new QemuDriver(config, { accel }) : kind === 'vfkit' ? new VfkitDriver(config) : new Wsl2Driver(config);
  const status = await driver.start();
  process.stdout.write(`VM running (${driver.kind}, pid ${status.pid ?? '?'}); console: ${status.consoleLog ?? '-'}\n`);
  process.stdout.write(`start the daemon with: berthd --agent ${status.agentEndpoint} ${agentPathFlags(kind, config).join(' ')}\n`.replace(/ \n$/, '\n'));
  let stopPorts = () => {};
  const engineSocket = values['engine-socket'];
  if (engineSocket) {
    if (!driver.forwardPort || !driver.unforwardPort) throw new Error(`the ${driver.kind} driver cannot forward ports (the agent's streams carry them)`);
    const ports = new PublishedPorts(engineSocket, { forwardPort: driver.forwardPort.bind(driver), unforwardPort: driver.unforwardPort.bind(driver) }, (err) =>
      process.stderr.write(`vm: published ports: ${err instanceof Error ? err.message : String(err)}\n`),
    );
    stopPorts = ports.watch();
  }
  await new Promise<void>((resolve) => {
    const watch = setInterval(() => {
      void driver.status().then((s) => {
        if (s.state === 'stopped') {
          clearInterval(watch);
          stopPorts();
          resolve();
        }
      });
    }, 2000);
    const stop = () => {
      clearInterval(watch);
      stopPorts();
      void driver.stop().finally(resolve);
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  return 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (code) => (process.exitCode = code),
    (err: unknown) => {
      process.stderr.write(`vm: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
