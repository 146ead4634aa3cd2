/**
 * apt on folders of its own under the guest image cache: its own sources (Debian's archive, checked against
 * debian-archive-keyring), an empty dpkg status, the guest's architecture. It resolves the guest's packages
 * with their dependencies and downloads them; the kernel package alone, without its boot tooling.
 */
import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { GuestArch } from '../driver.js';

export interface ResolvedDeb {
  url: string;
  file: string;
  size: number;
  hash: string;
}

export function run(cmd: string, args: string[], opts: { cwd?: string } = {}): Promise<string> {
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
export class Apt {
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
