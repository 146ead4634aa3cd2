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
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createGunzip } from 'node:zlib';
import type { GuestArch, GuestImage } from '../driver.js';
import { cpioStream } from './cpio.js';

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

/** Module folders of the kernel kept in the image (relative to lib/modules/<version>/kernel). */
const MODULE_DIRS = [
  'net', 'fs/9p', 'fs/overlayfs', 'fs/ext4', 'fs/jbd2', 'fs/fuse', 'fs/mbcache.ko', 'fs/netfs', 'fs/fscache', 'fs/nls',
  'lib', 'crypto', 'arch',
  'drivers/virtio', 'drivers/block/virtio_blk.ko', 'drivers/net/virtio_net.ko', 'drivers/net/net_failover.ko',
  'drivers/net/veth.ko', 'drivers/net/vxlan', 'drivers/net/vxlan.ko', 'drivers/net/macvlan.ko', 'drivers/net/ipvlan',
  'drivers/net/dummy.ko', 'drivers/net/tun.ko', 'drivers/net/wireguard', 'drivers/char/virtio_console.ko',
  'drivers/char/hw_random', 'drivers/vhost', 'drivers/md', 'drivers/net/geneve.ko',
];
const MODULE_DIRS_SKIPPED = ['net/wireless', 'net/mac80211', 'net/bluetooth', 'net/nfc', 'net/ceph', 'net/rxrpc', 'net/sunrpc', 'net/ieee802154', 'net/mac802154', 'net/rds', 'net/sctp', 'net/tipc', 'net/can', 'net/batman-adv', 'net/atm', 'net/6lowpan', 'net/9p/9pnet_rdma.ko', 'net/smc'];

/** Files of the unpacked packages that the guest never reads. */
const PRUNED = ['usr/share/doc', 'usr/share/man', 'usr/share/info', 'usr/share/locale', 'usr/share/lintian', 'usr/share/bug', 'usr/share/bash-completion', 'usr/share/zsh', 'usr/share/common-licenses', 'usr/share/gcc', 'usr/share/gdb', 'boot', 'var/cache', 'var/log', 'var/lib/dpkg'];

/** Links that Debian's maintainer scripts would make (update-alternatives), which dpkg-deb -x does not run. */
const ALTERNATIVES: Array<[string, string]> = [
  // No dash: busybox is the shell of scripts and of Node's child_process.
  ['usr/bin/sh', 'busybox'],
  ['usr/sbin/iptables', 'xtables-nft-multi'],
  ['usr/sbin/iptables-save', 'xtables-nft-multi'],
  ['usr/sbin/iptables-restore', 'xtables-nft-multi'],
  ['usr/sbin/ip6tables', 'xtables-nft-multi'],
  ['usr/sbin/ip6tables-save', 'xtables-nft-multi'],
  ['usr/sbin/ip6tables-restore', 'xtables-nft-multi'],
];

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

export interface ResolvedDeb {
  url: string;
  file: string;
  size: number;
  hash: string;
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

function run(cmd: string, args: string[], opts: { cwd?: string } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => err.push(c));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0) resolve(Buffer.concat(out).toString('utf8'));
      else reject(new Error(`${cmd} ${args.join(' ')} exited ${code}: ${Buffer.concat(err).toString('utf8').trim().slice(-2000)}`));
    });
  });
}

/** `apt-get --print-uris` lines: 'URL' FILE SIZE HASH (the hash is empty for some: the file name has the version). */
export function parsePrintUris(text: string): ResolvedDeb[] {
  const debs: ResolvedDeb[] = [];
  for (const line of text.split('\n')) {
    const m = /^'([^']+)'\s+(\S+)\s+(\d+)(?:\s+(\S+))?/.exec(line.trim());
    if (m) debs.push({ url: m[1]!, file: m[2]!, size: Number(m[3]), hash: m[4] ?? '' });
  }
  return debs;
}

/** The versioned kernel package a linux-image-<arch> meta package depends on. */
export function kernelPackageOf(aptCacheShow: string): string {
  const m = /^Depends:\s*(linux-image-[^\s,(]+)/m.exec(aptCacheShow);
  if (!m) throw new Error('no linux-image dependency in the meta package');
  return m[1]!;
}

/** apt, on its own folders under the cache: its own sources, an empty dpkg status, the given architecture. */
class Apt {
  readonly dir: string;
  readonly archives: string;
  constructor(
    cacheDir: string,
    private readonly arch: GuestArch,
    private readonly sources: string,
  ) {
    this.dir = path.join(cacheDir, `apt-${arch}`);
    this.archives = path.join(cacheDir, `debs-${arch}`);
  }
  private opts(archives = this.archives): string[] {
    return [
      '-o', `Dir::Etc=${path.join(this.dir, 'etc')}`,
      '-o', `Dir::State=${path.join(this.dir, 'state')}`,
      '-o', `Dir::State::status=${path.join(this.dir, 'state', 'status')}`,
      '-o', `Dir::Cache=${path.join(this.dir, 'cache')}`,
      '-o', `Dir::Cache::archives=${archives}`,
      '-o', `APT::Architecture=${this.arch}`,
      '-o', `APT::Architectures::=${this.arch}`,
      '-o', 'APT::Install-Recommends=false',
      '-o', 'Debug::NoLocking=1',
      // The files are fetched as root into the cache; apt's _apt user may not be able to write there.
      '-o', 'APT::Sandbox::User=root',
    ];
  }
  async update(): Promise<void> {
    for (const d of ['etc/apt.conf.d', 'etc/preferences.d', 'etc/trusted.gpg.d', 'state/lists/partial', 'cache']) await fs.mkdir(path.join(this.dir, d), { recursive: true });
    await fs.mkdir(path.join(this.archives, 'partial'), { recursive: true });
    await fs.writeFile(path.join(this.dir, 'etc', 'sources.list'), this.sources);
    await fs.writeFile(path.join(this.dir, 'state', 'status'), '');
    await run('apt-get', [...this.opts(), '-q', 'update']);
  }
  async resolve(packages: string[]): Promise<ResolvedDeb[]> {
    // --print-uris lists only the files not yet downloaded: resolve against an empty folder, so that the
    // answer is the whole set whatever the cache holds.
    const empty = path.join(this.dir, 'resolve');
    await fs.rm(empty, { recursive: true, force: true });
    await fs.mkdir(path.join(empty, 'partial'), { recursive: true });
    const debs = parsePrintUris(await run('apt-get', [...this.opts(empty), '-y', '-qq', '--print-uris', 'install', ...packages]));
    if (debs.length === 0) throw new Error(`apt resolved no packages for ${packages.join(' ')}`);
    return debs;
  }
  async kernel(meta: string): Promise<ResolvedDeb> {
    const pkg = kernelPackageOf(await run('apt-cache', [...this.opts(), 'show', meta]));
    const debs = parsePrintUris(await run('apt-get', [...this.opts(), '-qq', '--print-uris', 'download', pkg]));
    if (debs.length !== 1) throw new Error(`could not resolve ${pkg}`);
    return debs[0]!;
  }
  async download(packages: string[], kernelPkg: string): Promise<void> {
    await run('apt-get', [...this.opts(), '-y', '-q', '--download-only', 'install', ...packages]);
    await run('apt-get', [...this.opts(), '-q', 'download', kernelPkg], { cwd: this.archives });
  }
}

async function sha256File(file: string): Promise<string> {
  const h = createHash('sha256');
  await pipeline(createReadStream(file), h);
  return h.digest('hex');
}

/** Files of the daemon the agent runs: its launcher, its compiled sources, native addons, runtime deps. */
async function daemonPayload(daemonDir: string, nativeAddons: boolean): Promise<Array<{ from: string; to: string }>> {
  const files: Array<{ from: string; to: string }> = [];
  const add = async (from: string, to: string, filter: (rel: string) => boolean = () => true): Promise<void> => {
    const st = await fs.stat(from);
    if (st.isDirectory()) {
      for (const name of (await fs.readdir(from)).sort()) await add(path.join(from, name), path.join(to, name), filter);
    } else if (filter(from)) {
      files.push({ from, to });
    }
  };
  if (!existsSync(path.join(daemonDir, 'dist', 'src', 'cli.js'))) throw new Error(`the daemon is not built (${daemonDir}/dist): npm run build -w daemon`);
  await add(path.join(daemonDir, 'bin'), 'bin');
  await add(path.join(daemonDir, 'package.json'), 'package.json');
  await add(path.join(daemonDir, 'dist', 'src'), 'dist/src', (f) => f.endsWith('.js') && !f.endsWith('.test.js'));
  for (const addon of nativeAddons ? (await fs.readdir(path.join(daemonDir, 'native'))).sort() : []) {
    const rel = path.join('native', addon, 'build', 'Release');
    const dir = path.join(daemonDir, rel);
    if (!existsSync(dir)) continue;
    for (const f of (await fs.readdir(dir)).sort()) if (f.endsWith('.node')) files.push({ from: path.join(dir, f), to: path.join(rel, f) });
  }
  // Runtime dependencies (and theirs), found where Node would find them from the daemon's folder.
  const seen = new Set<string>();
  const visit = async (name: string, fromDir: string, optional: boolean): Promise<void> => {
    let dir = fromDir;
    let found: string | undefined;
    for (;;) {
      const candidate = path.join(dir, 'node_modules', name);
      if (existsSync(path.join(candidate, 'package.json'))) {
        found = candidate;
        break;
      }
      const up = path.dirname(dir);
      if (up === dir) break;
      dir = up;
    }
    if (!found) {
      if (optional) return;
      throw new Error(`runtime dependency ${name} not found from ${fromDir}`);
    }
    if (seen.has(found)) return;
    seen.add(found);
    const pkg = JSON.parse(await fs.readFile(path.join(found, 'package.json'), 'utf8')) as { dependencies?: Record<string, string>; optionalDependencies?: Record<string, string> };
    await add(found, path.join('node_modules', name), (f) => !/\.(md|map|ts)$/.test(f));
    for (const dep of Object.keys(pkg.dependencies ?? {})) await visit(dep, found, false);
    for (const dep of Object.keys(pkg.optionalDependencies ?? {})) await visit(dep, found, true);
  };
  const own = JSON.parse(await fs.readFile(path.join(daemonDir, 'package.json'), 'utf8')) as { dependencies?: Record<string, string>; optionalDependencies?: Record<string, string> };
  for (const dep of Object.keys(own.dependencies ?? {})) await visit(dep, daemonDir, false);
  for (const dep of Object.keys(own.optionalDependencies ?? {})) await visit(dep, daemonDir, true);
  return files;
}

/** Moves a/b/... of a top-level folder into usr/<folder> and leaves a link (Debian's merged /usr). */
async function mergeUsr(rootfs: string): Promise<void> {
  const moveInto = async (from: string, to: string): Promise<void> => {
    const st = await fs.lstat(to).catch(() => undefined);
    if (!st) {
      await fs.mkdir(path.dirname(to), { recursive: true });
      await fs.rename(from, to);
      return;
    }
    const fromSt = await fs.lstat(from);
    if (st.isDirectory() && fromSt.isDirectory()) {
      for (const name of await fs.readdir(from)) await moveInto(path.join(from, name), path.join(to, name));
      await fs.rmdir(from);
    } else {
      await fs.rm(to, { recursive: true, force: true });
      await fs.rename(from, to);
    }
  };
  for (const top of ['bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32']) {
    const p = path.join(rootfs, top);
    const st = await fs.lstat(p).catch(() => undefined);
    if (st?.isDirectory()) await moveInto(p, path.join(rootfs, 'usr', top));
    if (st?.isDirectory() || (top !== 'lib32' && top !== 'libx32' && !st)) {
      await fs.mkdir(path.join(rootfs, 'usr', top), { recursive: true });
      await fs.symlink(`usr/${top}`, p);
    }
  }
}

async function copyFile(from: string, to: string, mode?: number): Promise<void> {
  await fs.mkdir(path.dirname(to), { recursive: true });
  await fs.copyFile(from, to);
  if (mode !== undefined) await fs.chmod(to, mode);
}

async function writeFile(to: string, text: string, mode = 0o644): Promise<void> {
  await fs.mkdir(path.dirname(to), { recursive: true });
  await fs.writeFile(to, text, { mode });
  await fs.chmod(to, mode);
}

/** Files of the guest that no package writes (maintainer scripts would, or a real install would). */
const ETC_FILES: Record<string, string> = {
  'etc/passwd': 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n',
  'etc/group': 'root:x:0:\ntty:x:5:\nnogroup:x:65534:\n',
  'etc/hosts': '127.0.0.1\tlocalhost berth\n::1\tlocalhost ip6-localhost ip6-loopback\n',
  'etc/hostname': 'berth\n',
  'etc/resolv.conf': '',
  'etc/fstab': '',
  'etc/nsswitch.conf': 'passwd: files\ngroup: files\nhosts: files dns\n',
};

const UDHCPC_SCRIPT = `#!/bin/sh
# udhcpc's hook: the lease's address, router and name servers on the interface.
case "$1" in
  bound|renew)
    ip addr flush dev "$interface"
    ip addr add "$ip/\${mask:-24}" dev "$interface"
    [ -n "$router" ] && ip route replace default via "\${router%% *}" dev "$interface"
    : >/etc/resolv.conf
    for d in $dns; do echo "nameserver $d" >>/etc/resolv.conf; done
    ;;
esac
`;

/** The init, in WSL2: its init is Microsoft's; this prepares what ours would and runs the agent on stdio. */
const WSL_AGENT = `#!/bin/sh
# Started by \`wsl.exe -d <distro> --exec /usr/lib/berth/wsl-agent\`: the agent's channel is this process's
# stdio, relayed by socat to a pty that the agent opens as its device (as the vsock port is under vfkit).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mountpoint -q /sys/fs/cgroup || mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
mkdir -p /var/lib/berth /run
sysctl -q -w net.ipv4.ip_forward=1 >/dev/null 2>&1
(
  while [ ! -e /run/berth-agent.pty ]; do sleep 0.1; done
  exec berthd agent --device /run/berth-agent.pty --data-root /var/lib/berth --exec-root /run/berth-agent >>/run/berth-agent.log 2>&1
) &
exec socat -t 3600 STDIO "PTY,link=/run/berth-agent.pty,raw,echo=0"
`;

/** The CA bundle that ca-certificates' maintainer script (update-ca-certificates) would write. */
async function writeCaBundle(rootfs: string): Promise<void> {
  const base = path.join(rootfs, 'usr/share/ca-certificates');
  const certs: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const name of (await fs.readdir(dir).catch(() => [] as string[])).sort()) {
      const p = path.join(dir, name);
      if ((await fs.stat(p)).isDirectory()) await walk(p);
      else if (name.endsWith('.crt')) certs.push((await fs.readFile(p, 'utf8')).trimEnd() + '\n');
    }
  };
  await walk(base);
  await writeFile(path.join(rootfs, 'etc/ssl/certs/ca-certificates.crt'), certs.join(''));
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

export async function buildGuestImage(opts: BuildOptions): Promise<BuildResult> {
  const log = opts.log ?? ((line: string) => process.stderr.write(`[guest-image] ${line}\n`));
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
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write('Usage: build-guest-image [--arch amd64|arm64] [--cache DIR] [--node FILE] [--mirror URL] [--resolve-only] [--rootfs-tar]\n');
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
