/**
 * The guest's root file system as the unpacked packages leave it, finished: merged /usr, the links and files
 * that maintainer scripts would have written (alternatives, /etc files, the CA bundle), the kernel modules
 * kept, and the daemon's files for the agent.
 */
import { createHash } from 'node:crypto';
import { createReadStream, existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';

/** Module folders of the kernel kept in the image (relative to lib/modules/<version>/kernel). */
export const MODULE_DIRS = [
  'net', 'fs/9p', 'fs/overlayfs', 'fs/ext4', 'fs/jbd2', 'fs/fuse', 'fs/mbcache.ko', 'fs/netfs', 'fs/fscache', 'fs/nls',
  'lib', 'crypto', 'arch',
  'drivers/virtio', 'drivers/block/virtio_blk.ko', 'drivers/net/virtio_net.ko', 'drivers/net/net_failover.ko',
  'drivers/net/veth.ko', 'drivers/net/vxlan', 'drivers/net/vxlan.ko', 'drivers/net/macvlan.ko', 'drivers/net/ipvlan',
  'drivers/net/dummy.ko', 'drivers/net/tun.ko', 'drivers/net/wireguard', 'drivers/char/virtio_console.ko',
  'drivers/char/hw_random', 'drivers/vhost', 'drivers/md', 'drivers/net/geneve.ko',
];
export const MODULE_DIRS_SKIPPED = ['net/wireless', 'net/mac80211', 'net/bluetooth', 'net/nfc', 'net/ceph', 'net/rxrpc', 'net/sunrpc', 'net/ieee802154', 'net/mac802154', 'net/rds', 'net/sctp', 'net/tipc', 'net/can', 'net/batman-adv', 'net/atm', 'net/6lowpan', 'net/9p/9pnet_rdma.ko', 'net/smc'];

/** Files of the unpacked packages that the guest never reads. */
export const PRUNED = ['usr/share/doc', 'usr/share/man', 'usr/share/info', 'usr/share/locale', 'usr/share/lintian', 'usr/share/bug', 'usr/share/bash-completion', 'usr/share/zsh', 'usr/share/common-licenses', 'usr/share/gcc', 'usr/share/gdb', 'boot', 'var/cache', 'var/log', 'var/lib/dpkg'];

/** Links that Debian's maintainer scripts would make (update-alternatives), which dpkg-deb -x does not run. */
export const ALTERNATIVES: Array<[string, string]> = [
  // No dash: busybox is the shell of scripts and of Node's child_process.
  ['usr/bin/sh', 'busybox'],
  ['usr/sbin/iptables', 'xtables-nft-multi'],
  ['usr/sbin/iptables-save', 'xtables-nft-multi'],
  ['usr/sbin/iptables-restore', 'xtables-nft-multi'],
  ['usr/sbin/ip6tables', 'xtables-nft-multi'],
  ['usr/sbin/ip6tables-save', 'xtables-nft-multi'],
  ['usr/sbin/ip6tables-restore', 'xtables-nft-multi'],
];

export async function sha256File(file: string): Promise<string> {
  const h = createHash('sha256');
  await pipeline(createReadStream(file), h);
  return h.digest('hex');
}

/** Files of the daemon the agent runs: its launcher, its compiled sources, native addons, runtime deps. */
export async function daemonPayload(daemonDir: string, nativeAddons: boolean): Promise<Array<{ from: string; to: string }>> {
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
export async function mergeUsr(rootfs: string): Promise<void> {
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

export async function copyFile(from: string, to: string, mode?: number): Promise<void> {
  await fs.mkdir(path.dirname(to), { recursive: true });
  await fs.copyFile(from, to);
  if (mode !== undefined) await fs.chmod(to, mode);
}

export async function writeFile(to: string, text: string, mode = 0o644): Promise<void> {
  await fs.mkdir(path.dirname(to), { recursive: true });
  await fs.writeFile(to, text, { mode });
  await fs.chmod(to, mode);
}

/** Files of the guest that no package writes (maintainer scripts would, or a real install would). */
export const ETC_FILES: Record<string, string> = {
  'etc/passwd': 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n',
  'etc/group': 'root:x:0:\ntty:x:5:\nnogroup:x:65534:\n',
  'etc/hosts': '127.0.0.1\tlocalhost berth\n::1\tlocalhost ip6-localhost ip6-loopback\n',
  'etc/hostname': 'berth\n',
  'etc/resolv.conf': '',
  'etc/fstab': '',
  'etc/nsswitch.conf': 'passwd: files\ngroup: files\nhosts: files dns\n',
};

export const UDHCPC_SCRIPT = `#!/bin/sh
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
export const WSL_AGENT = `#!/bin/sh
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
export async function writeCaBundle(rootfs: string): Promise<void> {
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
