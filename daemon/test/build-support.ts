/**
 * Helpers of the build tests: build contexts as folders (for the docker CLI) and as tar streams (for the
 * API), compressed as a client may send them, and the JSON lines of a build answer.
 */
import { spawnSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import tar from 'tar-stream';

export type ContextFiles = Record<string, string | Buffer | { content: string | Buffer; mode: number } | { symlink: string } | { hardlink: string }>;

/** Writes `files` below `dir` (made as needed). */
export async function writeContext(dir: string, files: ContextFiles): Promise<string> {
  for (const [name, value] of Object.entries(files)) {
    const file = path.join(dir, name);
    await fs.mkdir(path.dirname(file), { recursive: true });
    if (typeof value === 'object' && ('symlink' in value || 'hardlink' in value)) throw new Error('links are written by contextTar only');
    const content = typeof value === 'string' || Buffer.isBuffer(value) ? value : value.content;
    await fs.writeFile(file, content);
    if (typeof value === 'object' && !Buffer.isBuffer(value)) await fs.chmod(file, value.mode);
  }
  return dir;
}

/** A tar of `files` (names used as given, so `../x` can be sent too). */
export async function contextTar(files: ContextFiles): Promise<Buffer> {
  const pack = tar.pack();
  const chunks: Buffer[] = [];
  pack.on('data', (c: unknown) => {
    chunks.push(c as Buffer);
  });
  const ended = new Promise<void>((resolve, reject) => {
    pack.on('end', () => resolve());
    pack.on('error', reject);
  });
  for (const [name, value] of Object.entries(files)) {
    const mtime = new Date('2024-01-01T00:00:00Z');
    if (typeof value === 'object' && 'symlink' in value) {
      pack.entry({ name, type: 'symlink', linkname: value.symlink, mode: 0o777, mtime });
      continue;
    }
    if (typeof value === 'object' && 'hardlink' in value) {
      pack.entry({ name, type: 'link', linkname: value.hardlink, mode: 0o644, mtime });
      continue;
    }
    const content = typeof value === 'string' || Buffer.isBuffer(value) ? Buffer.from(value) : Buffer.from(value.content);
    const mode = typeof value === 'object' && !Buffer.isBuffer(value) ? value.mode : 0o644;
    pack.entry({ name, mode, mtime }, content);
  }
  pack.finalize();
  await ended;
  return Buffer.concat(chunks);
}

export function compress(data: Buffer, how: 'identity' | 'gzip' | 'bzip2' | 'xz' | 'zstd'): Buffer {
  if (how === 'identity') return data;
  if (how === 'gzip') return zlib.gzipSync(data);
  const r = spawnSync(how, ['-c', '-q'], { input: data, maxBuffer: 1 << 30 });
  if (r.status !== 0) throw new Error(`${how} failed: ${r.stderr}`);
  return r.stdout;
}

/** The JSON lines of a build answer. */
export function buildLines(text: string): Array<Record<string, any>> {
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Record<string, any>);
}

/** The text of the `stream` lines of a build answer. */
export function streamText(lines: Array<Record<string, any>>): string {
  return lines.map((l) => (typeof l.stream === 'string' ? l.stream : '')).join('');
}
