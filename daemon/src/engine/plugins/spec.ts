/** The OCI runtime spec a managed plugin runs with (see manager.ts). */
import path from 'node:path';
import { InvalidParameter } from '../../errors.js';
import type { ProbeHost } from '../../host/host.js';
import type { PluginConfig, PluginRecord } from './config.js';

/** Where plugins listen inside their root: their binaries expect this path. */
export const PLUGIN_SOCKET_DIR_IN_PLUGIN = '/run/docker/plugins';
const DEFAULT_CAPS = ['CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_FSETID', 'CAP_FOWNER', 'CAP_MKNOD', 'CAP_NET_RAW', 'CAP_SETGID', 'CAP_SETUID', 'CAP_SETFCAP', 'CAP_SETPCAP', 'CAP_NET_BIND_SERVICE', 'CAP_SYS_CHROOT', 'CAP_KILL', 'CAP_AUDIT_WRITE'];

/** What a plugin's spec needs of the Host's probe: the machine's device nodes. */
export type PluginDevices = Pick<ProbeHost, 'devices'>;

/** The OCI device entries and cgroup rules of the plugin's devices (the machine's nodes, as they are). */
async function devicesOf(paths: string[], probe: PluginDevices): Promise<{ devices: object[]; rules: object[] }> {
  const devices: object[] = [];
  const rules: object[] = [];
  for (const p of paths) {
    const found = await probe.devices(p, p).catch(() => []);
    // One node at the path itself (a folder of nodes is no device).
    const node = found.length === 1 && found[0].path === p ? found[0] : undefined;
    if (!node) throw new InvalidParameter(`plugin device ${p}: not a device node on this host`);
    const { type, major, minor } = node;
    devices.push({ path: p, type, major, minor, fileMode: node.fileMode & 0o777, uid: node.uid, gid: node.gid });
    rules.push({ allow: true, type, major, minor, access: 'rwm' });
  }
  return { devices, rules };
}

/** The spec of plugin `p`, whose folder is `dirs.plugin` and whose sockets go to `dirs.sockets` on the host. */
export async function pluginSpec(p: PluginRecord, dirs: { plugin: string; sockets: string }, probe: PluginDevices): Promise<object> {
  const config = p.Config;
  const caps = [...new Set([...DEFAULT_CAPS, ...(config.Linux?.Capabilities ?? [])])];
  const env = ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', ...p.Settings.Env];
  const args = [...(config.Entrypoint ?? []), ...p.Settings.Args];
  if (args.length === 0) throw new InvalidParameter(`plugin ${p.Name} has no Entrypoint`);
  const namespaces: Array<{ type: string }> = [{ type: 'mount' }, { type: 'uts' }];
  if (!config.PidHost) namespaces.push({ type: 'pid' });
  if (!config.IpcHost) namespaces.push({ type: 'ipc' });
  if (config.Network?.Type !== 'host') namespaces.push({ type: 'network' });
  const mounts: object[] = [
    { destination: '/proc', type: 'proc', source: 'proc', options: ['nosuid', 'noexec', 'nodev'] },
    { destination: '/dev', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'] },
    { destination: '/dev/pts', type: 'devpts', source: 'devpts', options: ['nosuid', 'noexec', 'newinstance', 'ptmxmode=0666', 'mode=0620'] },
    { destination: '/sys', type: 'sysfs', source: 'sysfs', options: ['nosuid', 'noexec', 'nodev', 'ro'] },
    { destination: PLUGIN_SOCKET_DIR_IN_PLUGIN, type: 'bind', source: dirs.sockets, options: ['rbind', 'rshared'] },
  ];
  for (const m of (p.Settings.Mounts as PluginConfig['Mounts']) ?? []) {
    if (!m?.Destination || ((!m.Type || m.Type === 'bind') && !m.Source)) continue;
    const options = m.Options ?? ['rbind'];
    mounts.push({ destination: m.Destination, type: m.Type || 'bind', source: m.Source || (m.Type && m.Type !== 'bind' ? m.Type : ''), options });
  }
  if (config.PropagatedMount) {
    mounts.push({ destination: config.PropagatedMount, type: 'bind', source: path.join(dirs.plugin, 'propagated-mount'), options: ['rbind', 'rshared'] });
  }
  const devices = await devicesOf(((p.Settings.Devices as Array<{ Path?: string }>) ?? []).map((d) => d.Path).filter((d): d is string => !!d), probe);
  return {
    ociVersion: '1.0.2',
    process: {
      terminal: false,
      user: { uid: config.User?.UID ?? 0, gid: config.User?.GID ?? 0 },
      args,
      env,
      cwd: config.WorkDir || '/',
      capabilities: { bounding: caps, effective: caps, permitted: caps },
      noNewPrivileges: false,
    },
    root: { path: path.join(dirs.plugin, 'rootfs'), readonly: false },
    hostname: 'plugin',
    mounts,
    linux: {
      namespaces,
      rootfsPropagation: config.PropagatedMount ? 'rshared' : undefined,
      cgroupsPath: `/berth-plugins/${p.Id}`,
      resources: { devices: [{ allow: config.Linux?.AllowAllDevices === true, access: 'rwm' }, ...devices.rules] },
      devices: devices.devices.length > 0 ? devices.devices : undefined,
      maskedPaths: ['/proc/kcore', '/proc/keys', '/proc/timer_list', '/sys/firmware'],
    },
  };
}
