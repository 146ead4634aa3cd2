/**
 * The tools of this machine as stream stages: each decompressor is a child process (`<tool> -dc`) between
 * a writable and a readable side.
 */
import { spawn } from 'node:child_process';
import { Duplex, PassThrough, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ToolFailure } from '../../errors.js';
import type { ToolCompression, ToolsHost } from '../host.js';

const TOOLS: Record<ToolCompression, string> = { bzip2: 'bzip2', xz: 'xz', zstd: 'zstd' };

export class LinuxTools implements ToolsHost {
  decompressor(format: ToolCompression, signal?: AbortSignal): Duplex {
    const tool = TOOLS[format];
    if (!tool) throw new Error(`no decompressor for ${String(format)}`);
    const child = spawn(tool, ['-dc'], { stdio: ['pipe', 'pipe', 'pipe'], signal });
    let stderr = '';
    let failed = false;
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.stdin.on('error', () => undefined);
    const out = new PassThrough();
    child.stdout.pipe(out, { end: false });
    child.on('close', (code) => {
      if (failed) return;
      if (code === 0) out.end();
      else out.destroy(new ToolFailure(tool, { exitCode: code, detail: stderr.trim() }));
    });
    child.on('error', (err: NodeJS.ErrnoException) => {
      failed = true;
      // An abort is the caller's: it goes through as it is.
      out.destroy(err.name === 'AbortError' ? err : new ToolFailure(tool, { missing: err.code === 'ENOENT', detail: err.message }, { cause: err }));
    });
    const duplex = Duplex.from({ writable: child.stdin, readable: out });
    duplex.on('close', () => {
      if (child.exitCode === null) child.kill('SIGKILL');
    });
    return duplex;
  }

  packFolder(dir: string, signal?: AbortSignal): Readable {
    const child = spawn('tar', ['-c', '-C', dir, '--numeric-owner', '.'], { stdio: ['ignore', 'pipe', 'pipe'], signal });
    let stderr = '';
    let failed = false;
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const out = new PassThrough();
    child.stdout.pipe(out, { end: false });
    child.on('close', (code) => {
      if (failed) return;
      if (code === 0) out.end();
      else out.destroy(new ToolFailure('tar', { exitCode: code, detail: stderr.trim() }));
    });
    child.on('error', (err: NodeJS.ErrnoException) => {
      failed = true;
      out.destroy(err.name === 'AbortError' ? err : new ToolFailure('tar', { missing: err.code === 'ENOENT', detail: err.message }, { cause: err }));
    });
    out.on('close', () => {
      if (child.exitCode === null) child.kill('SIGKILL');
    });
    return out;
  }

  async unpackInto(dir: string, tar: Readable, signal?: AbortSignal): Promise<void> {
    const child = spawn('tar', ['-x', '-C', dir, '-f', '-'], { stdio: ['pipe', 'ignore', 'pipe'], signal });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.stdin.on('error', () => undefined);
    const exited = new Promise<number | null>((resolve, reject) => {
      child.once('error', (err: NodeJS.ErrnoException) =>
        reject(err.name === 'AbortError' ? err : new ToolFailure('tar', { missing: err.code === 'ENOENT', detail: err.message }, { cause: err })),
      );
      child.once('close', (code) => resolve(code));
    });
    // How the input went is told by tar's exit: a cut stream is an archive tar finds truncated.
    const feeding = pipeline(tar, child.stdin).catch(() => undefined);
    const code = await exited;
    await feeding;
    if (code !== 0) throw new ToolFailure('tar', { exitCode: code, detail: stderr.trim() });
  }
}
