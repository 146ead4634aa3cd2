/**
 * Controls of a running container through the OCI runtime's command line (crun and runc share it):
 * freezing and thawing (`pause`/`resume`: the cgroup v1 freezer or cgroup v2 `cgroup.freeze`, whichever the
 * container's cgroup uses), new resource limits on the live cgroup (`update --resources`), and the pids of
 * the container's processes (`ps --format json`) with the host's `ps` table for `top`.
 *
 * Files: `update --resources` reads a JSON file: written as `<exec root>/exec/update-<id>-<n>.json` and
 * removed at once.
 */
import { execFile } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { Conflict, InvalidParameter, NotFound } from '../../../errors.js';
import { isUnknownContainer } from './ociruntime.js';

export interface RuntimeCommand {
  name: string;
  path: string;
  stateRoot: string;
}

function run(file: string, args: string[], timeoutMs = 30_000): Promise<{ ok: true; stdout: string } | { ok: false; stderr: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { timeout: timeoutMs, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      if (err) resolve({ ok: false, stderr: (stderr || err.message).trim() });
      else resolve({ ok: true, stdout });
    });
  });
}

let updateCounter = 0;

export class RuntimeControl {
  constructor(
    private readonly runtime: RuntimeCommand,
    /** A folder of the exec root for the short-lived resource files of `update`. */
    private readonly scratchDir: string,
  ) {}

  private async oci(id: string, args: string[]): Promise<string> {
    const r = await run(this.runtime.path, [`--root=${this.runtime.stateRoot}`, ...args]);
    if (r.ok) return r.stdout;
    if (isUnknownContainer(r.stderr)) throw new NotFound(`no such container in the runtime: ${id}`);
    if (/not running|is stopped|container not running|paused|not paused|frozen/i.test(r.stderr)) {
      throw new Conflict(`${this.runtime.name} ${args[0]}: ${r.stderr}`);
    }
    throw new Error(`${this.runtime.name} ${args[0]}: ${r.stderr}`);
  }

  async pause(id: string): Promise<void> {
    await this.oci(id, ['pause', id]);
  }

  async resume(id: string): Promise<void> {
    await this.oci(id, ['resume', id]);
  }

  /** Applies OCI `linux.resources` to the live cgroup. A value the kernel refuses is an InvalidParameter. */
  async update(id: string, resources: object): Promise<void> {
    const { pids, ...rest } = resources as { pids?: { limit?: number } };
    // crun writes a lifted pids limit as "-1", which the kernel refuses: "max" is written here instead.
    const liftPids = pids !== undefined && (pids.limit ?? 0) <= 0;
    await this.runUpdate(id, liftPids ? rest : resources);
    if (liftPids) await this.liftPidsLimit(id);
  }

  private async liftPidsLimit(id: string): Promise<void> {
    const [pid] = await this.pids(id);
    if (!pid) throw new Conflict(`container ${id} has no processes`);
    const lines = (await fs.readFile(`/proc/${pid}/cgroup`, 'utf8')).split('\n');
    const v1 = lines.map((l) => l.split(':')).find((f) => f.length >= 3 && f[1].split(',').includes('pids'));
    const v2 = lines.map((l) => l.split(':')).find((f) => f.length >= 3 && f[0] === '0' && f[1] === '');
    const file = v1 ? path.join('/sys/fs/cgroup/pids', v1[2], 'pids.max') : v2 ? path.join('/sys/fs/cgroup', v2[2], 'pids.max') : undefined;
    if (!file) throw new Error(`cannot find the pids cgroup of container ${id}`);
    await fs.writeFile(file, 'max');
  }

  private async runUpdate(id: string, resources: object): Promise<void> {
    await fs.mkdir(this.scratchDir, { recursive: true, mode: 0o700 });
    const file = path.join(this.scratchDir, `update-${id.slice(0, 12)}-${process.pid}-${++updateCounter}.json`);
    await fs.writeFile(file, JSON.stringify(resources), { mode: 0o600 });
    try {
      const r = await run(this.runtime.path, [`--root=${this.runtime.stateRoot}`, 'update', '--resources', file, id]);
      if (!r.ok) {
        if (isUnknownContainer(r.stderr)) throw new NotFound(`no such container in the runtime: ${id}`);
        // The kernel's refusals (EINVAL, EBUSY: a memory limit under current usage...) are the caller's values.
        throw new InvalidParameter(`cannot update container ${id}: ${r.stderr}`);
      }
    } finally {
      await fs.rm(file, { force: true });
    }
  }

  /** The host pids of the container's processes. */
  async pids(id: string): Promise<number[]> {
    let out: string;
    try {
      out = await this.oci(id, ['ps', '--format', 'json', id]);
    } catch (err) {
      if (err instanceof Conflict) throw err;
      // The engine asks for the processes of a container it has as running. The runtime may have lost it
      // since (it stopped and was deleted), or crun 1.8 crashes (SIGSEGV, nothing on stderr) on `ps` of a
      // container that has stopped, one whose exit the engine has not heard of yet; by now it may also have
      // been made again by a restart. Unless it runs (again), that is a container not running, not a failure.
      const status = await this.status(id);
      if (status !== 'running' && status !== 'paused') throw new Conflict(`Container ${id} is not running`, { cause: err });
      out = await this.oci(id, ['ps', '--format', 'json', id]);
    }
    const parsed = JSON.parse(out.trim() || '[]') as unknown;
    if (!Array.isArray(parsed)) throw new Error(`${this.runtime.name} ps: unexpected output ${out.slice(0, 200)}`);
    return parsed.filter((p): p is number => typeof p === 'number');
  }

  /** The runtime's status of the container (created, running, paused, stopped); undefined when it has none. */
  private async status(id: string): Promise<string | undefined> {
    const r = await run(this.runtime.path, [`--root=${this.runtime.stateRoot}`, 'state', id]);
    if (!r.ok) return undefined;
    try {
      return (JSON.parse(r.stdout) as { status?: string }).status;
    } catch {
      return undefined;
    }
  }

  /** The host's `ps` table with the given arguments (the engine keeps the container's rows). */
  async processTable(psArgs: string[]): Promise<string> {
    const r = await run('ps', psArgs, 30_000);
    if (!r.ok) throw new InvalidParameter(`ps ${psArgs.join(' ')} failed: ${r.stderr}`);
    return r.stdout;
  }
}
