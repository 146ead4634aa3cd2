/**
 * Where the app's engine and its VM live on macOS and Windows (and on Linux under the test switch, with
 * QEMU): the VM driver, the folders of the VM, of the daemon's data and of its per-boot state, the address
 * the daemon serves and where external CLIs find it (the `berth` docker context), the host folders the guest
 * sees, and the guest's path of the daemon's data root.
 *
 * - macOS: vfkit; everything under ~/.berth (no space in its paths: the guest's kernel command line names
 *   them); the engine on a unix socket under the user's home (the settings' socket path); the home folder
 *   shared at its own path (bind mounts of the user's folders), and the daemon's containers folder (both
 *   sides write there; volumes are the guest's own, on its data disk).
 * - Windows: WSL2; the app's user data folder; the engine on the named pipe `\\.\pipe\berth`
 *   (`npipe:////./pipe/berth` for the docker CLI); WSL2 mounts the drives itself (`C:\` at /mnt/c): the
 *   data root is the distribution's own /var/lib/berth (overlayfs needs a Linux file system), but for its
 *   containers folder, which both sides write, reached at its drive path.
 * - Linux under BERTH_APP_VM=qemu (tests): as macOS, with QEMU.
 *
 * The daemon is told each of these folders and the guest's path of it (`--agent-path`, `--agent-wsl`): the
 * remote Host gives the guest only the guest's paths, and refuses bind mounts of folders the guest does not
 * see.
 */
import path from 'node:path';
import { APP_BRIDGE, type HostFacts, type VmResources } from './engine-args.js';

export type VmDriverKind = 'qemu' | 'vfkit' | 'wsl2';

/** The named pipe the engine serves on Windows, and the docker CLI's spelling of it. */
export const ENGINE_PIPE = '\\\\.\\pipe\\berth';
export const ENGINE_PIPE_ADDRESS = 'npipe:////./pipe/berth';
/** The VM's name: the WSL distribution's (vm-engine.ts names its VM so). */
export const VM_NAME = 'berth';
/** Where the guest agent in WSL2 keeps its data (the image's wsl-agent). */
export const WSL_GUEST_DATA_ROOT = '/var/lib/berth';

export interface VmEnginePlan {
  driver: VmDriverKind;
  /** The VM's own files: data disk, agent socket, console log. */
  stateDir: string;
  /** The daemon's data root on this machine, and the same folder's path in the guest. */
  dataRoot: string;
  guestDataRoot: string;
  execRoot: string;
  /** The daemon's `-H`. */
  listen: string;
  /** Where the app's bridge reaches the engine (a socket path, or the pipe's). */
  socketPath: string;
  /** The `berth` docker context's endpoint. */
  contextHost: string;
  shares: Array<{ hostPath: string; guestPath: string }>;
  resources: VmResources;
  /** The daemon's flags, but for `--agent` (the driver's agent endpoint, known once the VM runs). */
  args: string[];
}

/** The driver of this platform's VM, or undefined where the engine runs without one (Linux, unless the test switch names one). */
export function vmDriverFor(platform: NodeJS.Platform, testSwitch?: string): VmDriverKind | undefined {
  if (platform === 'darwin') return 'vfkit';
  if (platform === 'win32') return 'wsl2';
  if (platform === 'linux' && testSwitch === 'qemu') return 'qemu';
  return undefined;
}

/** `C:\Users\me\x` as WSL2 mounts it: `/mnt/c/Users/me/x` (the drive letter in lower case). */
export function windowsDrivePath(winPath: string): string {
  const drive = /^([A-Za-z]):(?:[\\/](.*))?$/.exec(winPath);
  if (!drive) throw new Error(`the engine's data folder must be on a drive (C:\\...) for the VM to see it, not ${winPath}`);
  return path.posix.join('/mnt', drive[1]!.toLowerCase(), ...(drive[2] ?? '').split(/[\\/]+/).filter(Boolean));
}

export function vmEnginePlan(driver: VmDriverKind, facts: HostFacts, socketPath: string, resources: VmResources): VmEnginePlan {
  const flags = (listen: string, dataRoot: string, execRoot: string, pidfile: string) => ['-H', listen, '--data-root', dataRoot, '--exec-root', execRoot, '--pidfile', pidfile, '--bridge', APP_BRIDGE];
  if (driver === 'wsl2') {
    const base = path.win32.join(facts.userData, 'engine');
    const dataRoot = path.win32.join(base, 'data');
    const execRoot = path.win32.join(base, 'run');
    const containers = path.win32.join(dataRoot, 'containers');
    const mappings = [
      ['--agent-path', `${dataRoot}=${WSL_GUEST_DATA_ROOT}`],
      ['--agent-path', `${containers}=${windowsDrivePath(containers)}`],
      ['--agent-path', `${execRoot}=/run/berth`],
    ].flat();
    return {
      driver,
      stateDir: path.win32.join(base, 'vm'),
      dataRoot,
      guestDataRoot: WSL_GUEST_DATA_ROOT,
      execRoot,
      listen: ENGINE_PIPE_ADDRESS,
      socketPath: ENGINE_PIPE,
      contextHost: ENGINE_PIPE_ADDRESS,
      shares: [],
      resources,
      args: [...flags(ENGINE_PIPE_ADDRESS, dataRoot, execRoot, path.win32.join(execRoot, 'berthd.pid')), '--agent-wsl', VM_NAME, ...mappings],
    };
  }
  const base = path.join(facts.home, '.berth');
  const dataRoot = path.join(base, 'data');
  const execRoot = path.join(base, 'run');
  const shares = [facts.home, path.join(dataRoot, 'containers')].map((dir) => ({ hostPath: dir, guestPath: dir }));
  return {
    driver,
    stateDir: path.join(base, 'vm'),
    dataRoot,
    // The same path: the remote Host names a container's and a volume's folders by the daemon's paths.
    guestDataRoot: dataRoot,
    execRoot,
    listen: `unix://${socketPath}`,
    socketPath,
    contextHost: `unix://${socketPath}`,
    shares,
    resources,
    args: [
      ...flags(`unix://${socketPath}`, dataRoot, execRoot, path.join(execRoot, 'berthd.pid')),
      ...[{ hostPath: dataRoot, guestPath: dataRoot }, ...shares].flatMap((s) => ['--agent-path', `${s.hostPath}=${s.guestPath}`]),
    ],
  };
}
