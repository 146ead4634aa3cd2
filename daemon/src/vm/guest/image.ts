/**
 * The guest image: Debian's kernel and an initramfs that holds the guest's whole root file system (Debian
 * packages unpacked with dpkg-deb, busybox for the small tools, Node and the daemon's build for the agent,
 * daemon/vm/guest/init as PID 1). Built from Debian's archive with apt's own resolver and signature checks,
 * into a folder of the cache named by the digest of every input (the resolved package files, the kernel
 * package, the Node binary, the daemon's files, the init script, this recipe's format): a second build with
 * the same inputs finds it and does nothing. The files are written reproducibly (cpio.ts; every mtime is
 * SOURCE_DATE_EPOCH).
 *
 *   node daemon/dist/src/vm/guest/image.js [--arch amd64|arm64] [--cache DIR] [--node FILE] [--resolve-only]
 *
 * Output folder (printed on stdout): vmlinuz (and Image, uncompressed, on arm64 for vfkit), initrd.img,
 * rootfs.tar with --rootfs-tar (for `wsl --import`), manifest.json.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createGunzip } from 'node:zlib';
import type { GuestArch, GuestImage } from '../driver.js';
import { Apt, run } from './apt.js';
import { cpioStream } from './cpio.js';
import {
  ALTERNATIVES,
  ETC_FILES,
  MODULE_DIRS,
  MODULE_DIRS_SKIPPED,
  PRUNED,
  UDHCPC_SCRIPT,
  WSL_AGENT,
  copyFile,
  daemonPayload,
  mergeUsr,
  sha256File,
  writeCaBundle,
  writeFile,
} from './rootfs.js';

export { kernelPackageOf, parsePrintUris, type ResolvedDeb } from './apt.js';

/** Bumped when the recipe changes what it makes from the same inputs. */
export const IMAGE_FORMAT = 1;

/**
 * Debian packages of the guest's user land (their dependencies come with them). busybox-static gives the
 * shell and the small tools; the rest is what the Linux Host spawns (crun, conmon, iptables/nftables,
 * iproute2, mount, tar...) and what init uses (kmod for modules, e2fsprogs for the data disk, socat for a
 * vsock channel). libstdc++6 and libgcc-s1 are Node's libraries.
 */
export const GUEST_PACKAGES = [
  'base-files', 'netbase', 'busybox-static', 'ca-certificates',
  'crun', 'conmon', 'tini',
  'iptables', 'nftables', 'iproute2', 'kmod', 'e2fsprogs', 'mount', 'util-linux', 'tar', 'xz-utils', 'zstd', 'socat',
  'libstdc++6', 'libgcc-s1',
];

export const KERNEL_META: Record<GuestArch, string> = { amd64: 'linux-image-amd64', arm64: 'linux-image-arm64' };

const here = path.dirname(fileURLToPath(import.meta.url));
/** daemon/ (this file runs from daemon/dist/src/vm/guest). */
export const DAEMON_DIR = path.resolve(here, '..', '..', '..', '..');

export interface BuildOptions {
  arch: GuestArch;
  cacheDir: string;
  /** Debian mirror (default deb.debian.org; a snapshot.debian.org URL pins the archive in time). */
  mirror?: string;
  securityMirror?: string;
  suite?: string;
  /**
   * The Node binary for the guest (default: this one, when the guest has the host's architecture), or
   * `debian` for Debian's own nodejs package (Node 18 in bookworm) and its libraries.
   */
  nodeBinary?: string;
  daemonDir?: string;
  /** Only resolve the packages and print the inputs (no download of the package files, no image). */
  resolveOnly?: boolean;
  rootfsTar?: boolean;
  /** Build again even when the cache holds an image of the same inputs (to check that the bytes match). */
  force?: boolean;
  sourceDateEpoch?: number;
  log?: (line: string) => void;
}

export interface BuildResult extends GuestImage {
  dir: string;
  cached: boolean;
  digest: string;
  manifest: Record<string, unknown>;
}

export function defaultCacheDir(): string {
  if (process.env.BERTH_GUEST_CACHE) return process.env.BERTH_GUEST_CACHE;
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(base, 'berth', 'guest');
}

/** Keeps the cache from growing with every change of the daemon: of older images of arch, the newest one stays. */
async function pruneOlder(cacheDir: string, arch: GuestArch, keep: string): Promise<void> {
  const older: Array<{ dir: string; mtime: number }> = [];
  for (const name of await fs.readdir(cacheDir)) {
    const dir = path.join(cacheDir, name);
    if (dir === keep || !/^(amd64|arm64)-[0-9a-f]{16}$/.test(name) || !name.startsWith(`${arch}-`)) continue;
    const st = await fs.stat(path.join(dir, 'manifest.json')).catch(() => undefined);
    if (st) older.push({ dir, mtime: st.mtimeMs });
  }
  older.sort((a, b) => b.mtime - a.mtime);
  for (const o of older.slice(1)) await fs.rm(o.dir, { recursive: true, force: true });
}

/**
 * One build per architecture and cache at a time (apt's folders and the image's are shared): a lock file
 * holding the builder's PID, taken over when that process is gone.
 */
async function withBuildLock<T>(cacheDir: string, arch: GuestArch, log: (line: string) => void, body: () => Promise<T>): Promise<T> {
  await fs.mkdir(cacheDir, { recursive: true });
  const lock = path.join(cacheDir, `.build-${arch}.lock`);
  let waited = false;
  for (;;) {
    try {
      await fs.writeFile(lock, String(process.pid), { flag: 'wx' });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = Number(await fs.readFile(lock, 'utf8').catch(() => ''));
      let alive = false;
      try {
        alive = holder > 0 && (process.kill(holder, 0), true);
      } catch {
        alive = false;
      }
      if (!alive) {
        await fs.rm(lock, { force: true });
        continue;
      }
      if (!waited) log(`waiting for the build of process ${holder}`);
      waited = true;
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
  try {
    return await body();
  } finally {
    await fs.rm(lock, { force: true });
  }
}

export async function buildGuestImage(opts: BuildOptions): Promise<BuildResult> {
  const log = opts.log ?? ((line: string) => process.stderr.write(`[guest-image] ${line}\n`));
  return await withBuildLock(opts.cacheDir, opts.arch, log, () => build(opts, log));
}

async function build(opts: BuildOptions, log: (line: string) => void): Promise<BuildResult> {
  const arch = opts.arch;
  const suite = opts.suite ?? 'bookworm';
  const mirror = (opts.mirror ?? process.env.BERTH_GUEST_MIRROR ?? 'http://deb.debian.org/debian').replace(/\/$/, '');
  const securityMirror = (opts.securityMirror ?? process.env.BERTH_GUEST_SECURITY_MIRROR ?? 'http://deb.debian.org/debian-security').replace(/\/$/, '');
  const daemonDir = opts.daemonDir ?? DAEMON_DIR;
  const epoch = opts.sourceDateEpoch ?? Number(process.env.SOURCE_DATE_EPOCH ?? 0);
  const keyring = '/usr/share/keyrings/debian-archive-keyring.gpg';
  if (!existsSync(keyring)) throw new Error(`${keyring} is missing (apt-get install debian-archive-keyring)`);
  const sources = [
    `deb [signed-by=${keyring}] ${mirror} ${suite} main`,
    `deb [signed-by=${keyring}] ${mirror} ${suite}-updates main`,
    `deb [signed-by=${keyring}] ${securityMirror} ${suite}-security main`,
    '',
  ].join('\n');
  await fs.mkdir(opts.cacheDir, { recursive: true });
  const apt = new Apt(opts.cacheDir, arch, sources);
  log(`resolving ${suite} ${arch} packages`);
  await apt.update();
  const hostArch = os.arch() === 'x64' ? 'amd64' : os.arch() === 'arm64' ? 'arm64' : os.arch();
  const nodeBinary = opts.nodeBinary ?? process.env.BERTH_GUEST_NODE ?? (hostArch === arch ? process.execPath : undefined);
  const debianNode = nodeBinary === 'debian';
  const packages = debianNode ? [...GUEST_PACKAGES, 'nodejs'] : GUEST_PACKAGES;
  const debs = await apt.resolve(packages);
  const kernelDeb = await apt.kernel(KERNEL_META[arch]);
  const kernelPkg = kernelDeb.file.split('_')[0]!;

  const initScript = path.join(daemonDir, 'vm', 'guest', 'init');
  const inputs = {
    format: IMAGE_FORMAT,
    arch,
    suite,
    epoch,
    packages: debs.map((d) => `${d.file} ${d.size} ${d.hash}`.trim()).sort(),
    kernel: `${kernelDeb.file} ${kernelDeb.hash}`,
    node: nodeBinary && !debianNode && !opts.resolveOnly ? await sha256File(nodeBinary) : (nodeBinary ?? null),
    // The daemon's native addons are built for the host: an image of another architecture goes without them.
    nativeAddons: arch === hostArch,
    init: await sha256File(initScript),
    daemon: opts.resolveOnly ? null : await (async () => {
      const h = createHash('sha256');
      for (const f of await daemonPayload(daemonDir, arch === hostArch)) h.update(`${f.to}\0${await sha256File(f.from)}\n`);
      return h.digest('hex');
    })(),
    extra: createHash('sha256').update(JSON.stringify([ETC_FILES, UDHCPC_SCRIPT, WSL_AGENT, MODULE_DIRS, MODULE_DIRS_SKIPPED, PRUNED, ALTERNATIVES])).digest('hex'),
  };
  const digest = createHash('sha256').update(JSON.stringify(inputs)).digest('hex');
  const dir = path.join(opts.cacheDir, `${arch}-${digest.slice(0, 16)}`);
  const image = (manifest: Record<string, unknown>, cached: boolean): BuildResult => ({
    arch,
    kernel: path.join(dir, 'vmlinuz'),
    initrd: path.join(dir, 'initrd.img'),
    rootfsTar: existsSync(path.join(dir, 'rootfs.tar')) ? path.join(dir, 'rootfs.tar') : undefined,
    dir,
    cached,
    digest,
    manifest,
  });
  if (opts.resolveOnly) {
    const manifest = { ...inputs, kernelPackage: kernelPkg, downloadBytes: debs.reduce((n, d) => n + d.size, kernelDeb.size) };
    return image(manifest, false);
  }
  if (!nodeBinary) throw new Error(`no Node binary for ${arch}: give one built for ${arch} with --node (or BERTH_GUEST_NODE)`);
  const manifestFile = path.join(dir, 'manifest.json');
  if (!opts.force && existsSync(manifestFile) && (!opts.rootfsTar || existsSync(path.join(dir, 'rootfs.tar')))) {
    log(`cached: ${dir}`);
    return image(JSON.parse(await fs.readFile(manifestFile, 'utf8')) as Record<string, unknown>, true);
  }

  const started = Date.now();
  log(`downloading ${debs.length + 1} packages (${((debs.reduce((n, d) => n + d.size, 0) + kernelDeb.size) / 1e6).toFixed(0)} MB, cached in ${apt.archives})`);
  await apt.download(packages, kernelPkg);
  const work = `${dir}.tmp-${process.pid}`;
  await fs.rm(work, { recursive: true, force: true });
  const rootfs = path.join(work, 'rootfs');
  const kernelTree = path.join(work, 'kernel');
  await fs.mkdir(rootfs, { recursive: true });
  try {
    log('unpacking');
    for (const d of debs) await run('dpkg-deb', ['-x', path.join(apt.archives, d.file), rootfs]);
    await run('dpkg-deb', ['-x', path.join(apt.archives, kernelDeb.file), kernelTree]);
    await mergeUsr(rootfs);

    // The kernel, and the modules the guest may load.
    const modulesRoot = path.join(kernelTree, 'lib', 'modules');
    const [kver] = await fs.readdir(modulesRoot);
    if (!kver) throw new Error('no modules in the kernel package');
    const kernelFile = path.join(kernelTree, 'boot', `vmlinuz-${kver}`);
    const destModules = path.join(rootfs, 'usr', 'lib', 'modules', kver);
    for (const f of ['modules.builtin', 'modules.builtin.modinfo', 'modules.order']) {
      if (existsSync(path.join(modulesRoot, kver, f))) await copyFile(path.join(modulesRoot, kver, f), path.join(destModules, f));
    }
    for (const rel of MODULE_DIRS) {
      const from = path.join(modulesRoot, kver, 'kernel', rel);
      if (!existsSync(from)) continue;
      await fs.cp(from, path.join(destModules, 'kernel', rel), { recursive: true, filter: (src) => !MODULE_DIRS_SKIPPED.some((s) => src === path.join(modulesRoot, kver, 'kernel', s)) });
    }
    await run('depmod', ['-b', rootfs, kver]);

    log('adding Node, the daemon and init');
    for (const rel of PRUNED) await fs.rm(path.join(rootfs, rel), { recursive: true, force: true });
    for (const [link, target] of ALTERNATIVES) {
      if (existsSync(path.join(rootfs, path.dirname(link), target))) await fs.symlink(target, path.join(rootfs, link)).catch(() => undefined);
    }
    for (const [rel, text] of Object.entries(ETC_FILES)) await writeFile(path.join(rootfs, rel), text);
    await writeCaBundle(rootfs);
    await writeFile(path.join(rootfs, 'usr/lib/berth/udhcpc.script'), UDHCPC_SCRIPT, 0o755);
    await writeFile(path.join(rootfs, 'usr/lib/berth/wsl-agent'), WSL_AGENT, 0o755);
    if (!debianNode) await copyFile(nodeBinary, path.join(rootfs, 'usr/bin/node'), 0o755);
    else if (!existsSync(path.join(rootfs, 'usr/bin/node'))) await fs.symlink('nodejs', path.join(rootfs, 'usr/bin/node'));
    const daemonRoot = path.join(rootfs, 'usr/lib/berth/daemon');
    for (const f of await daemonPayload(daemonDir, arch === hostArch)) await copyFile(f.from, path.join(daemonRoot, f.to));
    await writeFile(path.join(rootfs, 'usr/bin/berthd'), '#!/bin/sh\nexec /usr/bin/node /usr/lib/berth/daemon/bin/berthd "$@"\n', 0o755);
    await copyFile(initScript, path.join(rootfs, 'init'), 0o755);
    for (const d of ['proc', 'sys', 'dev', 'run', 'tmp', 'root', 'mnt', 'var/lib/berth', 'etc/berth']) await fs.mkdir(path.join(rootfs, d), { recursive: true });
    await fs.chmod(path.join(rootfs, 'tmp'), 0o1777);
    // The kernel needs a console before devtmpfs is mounted (the init's first messages).
    spawnSync('mknod', ['-m', '600', path.join(rootfs, 'dev', 'console'), 'c', '5', '1']);

    log('writing the initramfs');
    const out = path.join(work, 'out');
    await fs.mkdir(out);
    await pipeline(cpioStream(rootfs, epoch), createWriteStream(path.join(out, 'initrd.img')));
    await copyFile(kernelFile, path.join(out, 'vmlinuz'));
    if (arch === 'arm64') {
      // vfkit's Linux boot loader takes only an uncompressed arm64 Image (bookworm's vmlinuz is one already;
      // a gzip one is unpacked).
      const head = Buffer.alloc(2);
      const fh = await fs.open(kernelFile, 'r');
      await fh.read(head, 0, 2, 0);
      await fh.close();
      if (head[0] === 0x1f && head[1] === 0x8b) await pipeline(createReadStream(kernelFile), createGunzip(), createWriteStream(path.join(out, 'Image')));
      else await fs.link(path.join(out, 'vmlinuz'), path.join(out, 'Image'));
    }
    if (opts.rootfsTar) {
      log('writing the root file system tar (WSL2)');
      await run('tar', ['--sort=name', `--mtime=@${epoch}`, '--owner=0', '--group=0', '--numeric-owner', '--exclude=./init', '-C', rootfs, '-cf', path.join(out, 'rootfs.tar'), '.']);
    }
    const sizes: Record<string, number> = {};
    for (const f of await fs.readdir(out)) sizes[f] = (await fs.stat(path.join(out, f))).size;
    const manifest = {
      ...inputs,
      digest,
      kernelVersion: kver,
      kernelPackage: kernelPkg,
      nodeVersion: debianNode ? debs.find((d) => d.file.startsWith('nodejs_'))?.file : arch === hostArch ? spawnSync(path.join(rootfs, 'usr/bin/node'), ['--version'], { encoding: 'utf8' }).stdout.trim() : undefined,
      sizes,
      initrdSha256: await sha256File(path.join(out, 'initrd.img')),
      buildSeconds: Math.round((Date.now() - started) / 1000),
    };
    await fs.writeFile(path.join(out, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
    await fs.rm(dir, { recursive: true, force: true });
    await fs.rename(out, dir);
    log(`built ${dir} in ${manifest.buildSeconds} s`);
    await pruneOlder(opts.cacheDir, arch, dir);
    return image(manifest, false);
  } finally {
    await fs.rm(work, { recursive: true, force: true });
  }
}

export async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      arch: { type: 'string' },
      cache: { type: 'string' },
      node: { type: 'string' },
      mirror: { type: 'string' },
      'resolve-only': { type: 'boolean' },
      'rootfs-tar': { type: 'boolean' },
      rebuild: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write('Usage: build-guest-image [--arch amd64|arm64] [--cache DIR] [--node FILE] [--mirror URL] [--resolve-only] [--rootfs-tar] [--rebuild]\n');
    return 0;
  }
  const hostArch = os.arch() === 'arm64' ? 'arm64' : 'amd64';
  const arch = (values.arch ?? hostArch) as GuestArch;
  if (arch !== 'amd64' && arch !== 'arm64') throw new Error(`--arch: amd64 or arm64, not ${String(arch)}`);
  const result = await buildGuestImage({
    arch,
    cacheDir: values.cache ?? defaultCacheDir(),
    nodeBinary: values.node,
    mirror: values.mirror,
    resolveOnly: values['resolve-only'],
    rootfsTar: values['rootfs-tar'],
    force: values.rebuild,
  });
  if (values['resolve-only']) process.stdout.write(JSON.stringify(result.manifest, null, 2) + '\n');
  else process.stdout.write(result.dir + '\n');
  return 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (code) => (process.exitCode = code),
    (err: unknown) => {
      process.stderr.write(`build-guest-image: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
