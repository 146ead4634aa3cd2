/**
 * Compiled seccomp filters, kept for reuse by crun. Compiling a profile of a few hundred calls with
 * libseccomp takes crun tens of milliseconds at every `crun create`; crun also accepts the compiled program
 * in the annotation `run.oci.seccomp_bpf_data` (base64) and then loads it as given, and it leaves the program
 * it compiled in `<state root>/<id>/seccomp.bpf` (which `crun exec` loads for exec'd processes). So the first
 * container with a profile compiles it, and later containers with the same `linux.seccomp` reuse its program.
 *
 * The key is the SHA-256 of the JSON of `linux.seccomp`: the compiled program depends only on it (and on crun
 * and libseccomp, which do not change under a running daemon). Specs that carry their own `run.oci.seccomp*`
 * annotations (a program of their own, crun's unknown-syscall policy) or a notify listener are left alone.
 * Held in memory only: a few entries, least recently used first.
 */
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';

export const SECCOMP_BPF_ANNOTATION = 'run.oci.seccomp_bpf_data';
const MAX_ENTRIES = 8;
/** A seccomp program has at most 4096 instructions of 8 bytes. */
const MAX_PROGRAM_BYTES = 4096 * 8;

interface SeccompSpec {
  annotations?: Record<string, string>;
  linux?: { seccomp?: { listenerPath?: string; syscalls?: Array<{ action?: string }> } };
}

export class SeccompProgramCache {
  private readonly programs = new Map<string, string>();

  /** The cache key of a spec's filter, or undefined when the spec has none or must compile its own. */
  keyOf(spec: object): string | undefined {
    const s = spec as SeccompSpec;
    const seccomp = s.linux?.seccomp;
    if (!seccomp) return undefined;
    if (seccomp.listenerPath || seccomp.syscalls?.some((c) => c.action === 'SCMP_ACT_NOTIFY')) return undefined;
    if (Object.keys(s.annotations ?? {}).some((k) => k.startsWith('run.oci.seccomp'))) return undefined;
    return createHash('sha256').update(JSON.stringify(seccomp)).digest('hex');
  }

  /** The spec with the compiled program of its filter when one is known; the spec itself otherwise. */
  withProgram(spec: object, key: string | undefined): object {
    const program = key === undefined ? undefined : this.programs.get(key);
    if (program === undefined) return spec;
    this.programs.delete(key!);
    this.programs.set(key!, program);
    const s = spec as SeccompSpec;
    return { ...s, annotations: { ...(s.annotations ?? {}), [SECCOMP_BPF_ANNOTATION]: program } };
  }

  has(key: string): boolean {
    return this.programs.has(key);
  }

  /** Remembers the program crun compiled for a container just created (its `seccomp.bpf`). */
  async learn(key: string, containerState: string): Promise<void> {
    if (this.programs.has(key)) return;
    let program: Buffer;
    try {
      program = await fs.readFile(path.join(containerState, 'seccomp.bpf'));
    } catch {
      return; // the container is gone already; the next one will do
    }
    if (program.length === 0 || program.length % 8 !== 0 || program.length > MAX_PROGRAM_BYTES) return;
    this.programs.set(key, program.toString('base64'));
    if (this.programs.size > MAX_ENTRIES) this.programs.delete(this.programs.keys().next().value!);
  }

  get size(): number {
    return this.programs.size;
  }
}
