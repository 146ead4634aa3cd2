/**
 * The VM drivers' one interface. On macOS and Windows the daemon's Linux Host lives in a small VM: a driver
 * starts that VM from the guest image (daemon/src/vm/guest), gives it the resources asked for, shares host
 * folders with it, and hands back the endpoint of the guest agent's byte stream (`berthd --agent <endpoint>`).
 *
 * Drivers: QEMU (Linux with KVM or TCG, macOS with HVF, Windows with WHPX; vm/qemu.ts), vfkit (macOS
 * Virtualization.framework; vm/vfkit.ts), WSL2 (Windows; vm/wsl.ts).
 */

/** Architectures of the guest image, in Debian's names. */
export type GuestArch = 'amd64' | 'arm64';

export interface VmResources {
  cpus: number;
  memoryMiB: number;
  /** Size of the guest's data disk (images, layers, volumes), created sparse. */
  diskGiB: number;
}

export const DEFAULT_RESOURCES: VmResources = { cpus: 2, memoryMiB: 2048, diskGiB: 64 };

/** What the guest image build produced (vm/guest/image.ts writes these files and a manifest beside them). */
export interface GuestImage {
  arch: GuestArch;
  /** The kernel (bzImage on amd64; for vfkit on arm64 the uncompressed Image). */
  kernel: string;
  /** The initramfs: the whole guest root file system, as a newc cpio. */
  initrd: string;
  /** The same root file system as a tar, for `wsl --import` (no kernel, no initramfs). */
  rootfsTar?: string;
}

/** A host folder shown to the guest (virtiofs where the platform has it, 9p otherwise, WSL's own /mnt). */
export interface Share {
  /** Absolute path on the host. */
  hostPath: string;
  /** Where the guest mounts it. */
  guestPath: string;
  /** The device's tag (virtiofs/9p); derived from the index when absent. */
  tag?: string;
  readOnly?: boolean;
}

export interface VmConfig {
  /** A short name (the WSL distribution's, the state folder's). */
  name: string;
  /** Folder of the VM's own files: data disk, sockets, console log, pid file. */
  stateDir: string;
  image: GuestImage;
  resources: VmResources;
  shares: Share[];
  /**
   * Where the guest mounts its data disk and the agent keeps its state (default /var/lib/berth). Given the
   * daemon's own data root, the folders the remote Host names by the daemon's paths (a container's, a
   * volume's) are the guest's, on its disk, under the same names.
   */
  guestDataRoot?: string;
  /** Extra kernel command line words. */
  kernelArgs?: string[];
}

export type VmState = 'stopped' | 'starting' | 'running' | 'stopping';

export interface VmStatus {
  state: VmState;
  /** PID of the VM's process on the host (QEMU, vfkit, the WSL relay), while it runs. */
  pid?: number;
  resources: VmResources;
  /** Where the daemon reaches the guest agent: `unix:///path` (QEMU, vfkit) or `stdio:` (WSL2). */
  agentEndpoint?: string;
  /** The guest's console output, for a user to read when the VM does not come up. */
  consoleLog?: string;
}

export interface VmDriver {
  readonly kind: 'qemu' | 'vfkit' | 'wsl2';
  start(): Promise<VmStatus>;
  /** Stops the guest: gracefully within timeoutMs (default 10 s), then by force. */
  stop(opts?: { timeoutMs?: number }): Promise<void>;
  status(): Promise<VmStatus>;
  /** Resources apply at the next start (none of these drivers hot-plugs CPUs or memory). */
  setResources(resources: Partial<VmResources>): void;
  /**
   * Forwards a port of the host's loopback to a port of the guest while the VM runs (a container's published
   * port), where the VM's network can: QEMU's user-mode network adds the forward at once; WSL2 forwards the
   * guest's listening ports to Windows' localhost by itself. Absent where it cannot (vfkit's NAT): the
   * agent's streams carry such ports.
   */
  forwardPort?(fwd: PortForward): Promise<void>;
  unforwardPort?(fwd: PortForward): Promise<void>;
}

export interface PortForward {
  protocol: 'tcp' | 'udp';
  /** Port on the host's loopback (127.0.0.1). */
  hostPort: number;
  guestPort: number;
}

/** The guest's name of the agent's port: QEMU's virtserialport name, /dev/virtio-ports/<name> in the guest. */
export const AGENT_PORT_NAME = 'org.berth.agent';
/** The vsock port the guest agent listens on where the channel is vsock (vfkit). */
export const AGENT_VSOCK_PORT = 1024;

/** Tags given to shares without one: `berth0`, `berth1`... (9p tags are at most 31 bytes). */
export function shareTags(shares: Share[]): Array<Share & { tag: string }> {
  return shares.map((s, i) => ({ ...s, tag: s.tag ?? `berth${i}` }));
}

export function validateResources(r: VmResources): void {
  if (!Number.isInteger(r.cpus) || r.cpus < 1) throw new RangeError(`cpus must be a positive integer, not ${r.cpus}`);
  if (!Number.isInteger(r.memoryMiB) || r.memoryMiB < 256) throw new RangeError(`memory must be at least 256 MiB, not ${r.memoryMiB}`);
  if (!Number.isInteger(r.diskGiB) || r.diskGiB < 1) throw new RangeError(`disk size must be at least 1 GiB, not ${r.diskGiB}`);
}

/**
 * The kernel command line words the guest's init reads (daemon/vm/guest/init): the shares to mount, the
 * agent's channel, the host's clock at start (the guest has no battery-backed clock under vfkit; under QEMU
 * its RTC is the host's at start, and after a host sleep the agent's handshake sets it again).
 */
export function guestKernelArgs(opts: {
  console: string;
  shares: Array<Share & { tag: string }>;
  shareFs: '9p' | 'virtiofs';
  agent: string;
  net?: 'qemu-user' | 'dhcp';
  dataRoot?: string;
  /** A guest TCP port where init serves the guest's own engine (for tests and benchmarks; no agent needed). */
  enginePort?: number;
  now?: Date;
  extra?: string[];
}): string[] {
  const words = [`console=${opts.console}`, 'panic=-1', 'quiet', `berth.agent=${opts.agent}`];
  for (const s of opts.shares) {
    if (/[\s:,]/.test(s.guestPath) || /[\s:,]/.test(s.tag)) throw new RangeError(`share path or tag with a space, colon or comma: ${s.guestPath}`);
    words.push(`berth.share=${s.tag}:${opts.shareFs}:${s.guestPath}${s.readOnly ? ':ro' : ''}`);
  }
  if (opts.net) words.push(`berth.net=${opts.net}`);
  if (opts.enginePort) words.push(`berth.engine=${opts.enginePort}`);
  if (opts.dataRoot) {
    if (!opts.dataRoot.startsWith('/') || /[\s:,]/.test(opts.dataRoot)) throw new RangeError(`guest data root must be an absolute path without spaces, colons or commas: ${opts.dataRoot}`);
    words.push(`berth.dataroot=${opts.dataRoot}`);
  }
  words.push(`berth.time=${Math.floor((opts.now ?? new Date()).getTime() / 1000)}`);
  return [...words, ...(opts.extra ?? [])];
}
