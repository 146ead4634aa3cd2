/**
 * The WSL2 driver (Windows): the guest image's root file system (rootfs.tar, built with --rootfs-tar) is
 * imported as a WSL distribution, and the guest agent runs in it as a child of wsl.exe whose stdin and stdout
 * are the agent's channel (no hvsock from Node, no administrator rights). The driver serves that channel on
 * a named pipe for the daemon (`berthd --agent npipe://./pipe/berth-agent-<name>`), one connection at a time.
 * WSL has its own kernel and init: the image's kernel and initramfs are not used, and /usr/lib/berth/wsl-agent
 * does what the image's init would (cgroup2, forwarding) before it runs the agent. Windows drives are under
 * /mnt/<letter> (shares.ts windowsToWslPath). CPUs and memory are WSL's, for all its distributions
 * (%UserProfile%\.wslconfig, applied after `wsl --shutdown`); the disk grows with `wsl --manage --resize`.
 *
 * Whether the distribution exists and runs is read from `wsl --list --quiet` and `--list --running --quiet`
 * (names only): the states `--list --verbose` prints are in the user's language.
 *
 * Not run on these Linux machines: unit-tested on its commands (checked against wsl.exe's usage text), its
 * .wslconfig and its reading of wsl.exe's output.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { validateResources, type VmConfig, type VmDriver, type VmResources, type VmStatus } from './driver.js';

export interface WslCommands {
  import: string[];
  agent: string[];
  terminate: string[];
  unregister: string[];
  /** Names of the distributions, one a line. */
  list: string[];
  /** Names of the running ones. */
  listRunning: string[];
  resize: string[];
}

export function wslCommands(config: VmConfig): WslCommands {
  if (!config.image.rootfsTar) throw new RangeError('the WSL2 driver needs the guest root file system as a tar (build the image with --rootfs-tar)');
  const name = config.name;
  return {
    import: ['--import', name, path.win32.join(config.stateDir, 'distro'), config.image.rootfsTar, '--version', '2'],
    agent: ['--distribution', name, '--user', 'root', '--exec', '/usr/lib/berth/wsl-agent'],
    terminate: ['--terminate', name],
    unregister: ['--unregister', name],
    list: ['--list', '--quiet'],
    listRunning: ['--list', '--running', '--quiet'],
    resize: ['--manage', name, '--resize', `${config.resources.diskGiB}GB`],
  };
}

/** The [wsl2] section of .wslconfig for these resources (WSL reads it for every distribution). */
export function wslConfig(resources: VmResources, existing = ''): string {
  validateResources(resources);
  const keys: Record<string, string> = { processors: String(resources.cpus), memory: `${resources.memoryMiB}MB` };
  const lines = existing.split(/\r?\n/);
  const out: string[] = [];
  let section = '';
  let done = false;
  const flush = () => {
    for (const [k, v] of Object.entries(keys)) out.push(`${k}=${v}`);
    done = true;
  };
  for (const line of lines) {
    const head = /^\s*\[(.+)\]\s*$/.exec(line);
    if (head) {
      if (section === 'wsl2' && !done) flush();
      section = head[1]!.trim().toLowerCase();
      out.push(line);
      continue;
    }
    const kv = /^\s*([A-Za-z]+)\s*=/.exec(line);
    if (section === 'wsl2' && kv && kv[1]!.toLowerCase() in keys) continue;
    out.push(line);
  }
  if (section === 'wsl2' && !done) flush();
  if (!done) {
    while (out.length && out[out.length - 1] === '') out.pop();
    if (out.length) out.push('');
    out.push('[wsl2]');
    flush();
  }
  return out.join('\r\n').replace(/(\r\n)*$/, '\r\n');
}

/** wsl.exe's own output: UTF-16LE on a pipe, unless WSL_UTF8 is set (which this driver sets). */
function wslText(output: Buffer | string): string {
  const text = typeof output === 'string' ? output : output.includes(0) ? output.toString('utf16le') : output.toString('utf8');
  return text.replace(/^\uFEFF/, '').replace(/\0/g, '');
}

/** `wsl --list --quiet`: a distribution's name a line. */
export function parseWslNames(output: Buffer | string): string[] {
  return wslText(output).split(/\r?\n/).map((l) => l.trim()).filter(Boolean);
}

/** `wsl --list --verbose`: NAME STATE VERSION rows, the default one starred (STATE in the user's language). */
export function parseWslList(output: Buffer | string): Array<{ name: string; state: string; version: number; isDefault: boolean }> {
  const rows = wslText(output).split(/\r?\n/).filter((l) => l.trim());
  const out: Array<{ name: string; state: string; version: number; isDefault: boolean }> = [];
  for (const row of rows.slice(1)) {
    const m = /^\s*(\*)?\s*(\S+)\s+(\S+)\s+(\d+)\s*$/.exec(row);
    if (m) out.push({ name: m[2]!, state: m[3]!, version: Number(m[4]), isDefault: !!m[1] });
  }
  return out;
}

function wsl(args: string[], binary: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'], windowsHide: true, env: { ...process.env, WSL_UTF8: '1' } });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => err.push(c));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0) resolve(Buffer.concat(out));
      else reject(new Error(`wsl ${args.join(' ')} exited ${code}: ${wslText(Buffer.concat(err.length ? err : out)).trim()}`));
    });
  });
}

export function agentPipePath(name: string): string {
  return `\\\\.\\pipe\\berth-agent-${name}`;
}

export class Wsl2Driver implements VmDriver {
  readonly kind = 'wsl2' as const;
  private agent?: ChildProcess;
  private server?: net.Server;
  private resources: VmResources;

  constructor(
    private readonly config: VmConfig,
    private readonly opts: { binary?: string; pipePath?: string } = {},
  ) {
    this.resources = { ...config.resources };
  }

  private get binary(): string {
    return this.opts.binary ?? 'wsl.exe';
  }

  commands(): WslCommands {
    return wslCommands({ ...this.config, resources: this.resources });
  }

  setResources(resources: Partial<VmResources>): void {
    const next = { ...this.resources, ...resources };
    validateResources(next);
    this.resources = next;
  }

  /** Whether the distribution is imported, and whether it runs (names only: no state word to translate). */
  private async distro(): Promise<{ running: boolean } | undefined> {
    const names = async (args: string[]) => parseWslNames(await wsl(args, this.binary).catch(() => Buffer.alloc(0))).map((n) => n.toLowerCase());
    const name = this.config.name.toLowerCase();
    if (!(await names(this.commands().list)).includes(name)) return undefined;
    // With none running, wsl.exe answers with a message and a failure: no name.
    return { running: (await names(this.commands().listRunning)).includes(name) };
  }

  async status(): Promise<VmStatus> {
    const d = await this.distro();
    const running = !!d?.running && !!this.agent && this.agent.exitCode === null;
    return {
      state: running ? 'running' : d?.running ? 'starting' : 'stopped',
      pid: running ? this.agent!.pid : undefined,
      resources: { ...this.resources },
      agentEndpoint: running ? `npipe://${(this.opts.pipePath ?? agentPipePath(this.config.name)).replace(/\\/g, '/')}` : undefined,
    };
  }

  async start(): Promise<VmStatus> {
    const cmds = this.commands();
    if (!(await this.distro())) await wsl(cmds.import, this.binary);
    await wsl(cmds.resize, this.binary).catch(() => undefined); // WSL before 2.5 has no --manage --resize
    if (!this.agent || this.agent.exitCode !== null) {
      const agent = spawn(this.binary, cmds.agent, { stdio: ['pipe', 'pipe', 'inherit'], windowsHide: true });
      this.agent = agent;
      this.server?.close();
      // One client at a time: the agent's stream is one session; a second client waits for the first to go.
      let busy = false;
      this.server = net.createServer((conn) => {
        if (busy) return conn.destroy();
        busy = true;
        conn.pipe(agent.stdin!, { end: false });
        agent.stdout!.pipe(conn);
        conn.on('close', () => {
          agent.stdout!.unpipe(conn);
          conn.unpipe(agent.stdin!);
          busy = false;
        });
      });
      await new Promise<void>((resolve, reject) => {
        this.server!.once('error', reject);
        this.server!.listen(this.opts.pipePath ?? agentPipePath(this.config.name), resolve);
      });
    }
    return await this.status();
  }

  /** WSL2 forwards the guest's listening ports to Windows' localhost itself (localhostForwarding, on by default). */
  async forwardPort(): Promise<void> {}
  async unforwardPort(): Promise<void> {}

  async stop(): Promise<void> {
    this.server?.close();
    this.server = undefined;
    await wsl(this.commands().terminate, this.binary).catch(() => undefined);
    if (this.agent && this.agent.exitCode === null) this.agent.kill();
    this.agent = undefined;
  }
}
