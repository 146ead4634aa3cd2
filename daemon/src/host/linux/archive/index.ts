/**
 * The file verbs of the Linux host (ContainerFilesHost): path stats, tar out and in, export and changes of
 * containers whose root filesystems the runtime mounts.
 */
import type { Stats } from 'node:fs';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { Forbidden, InvalidParameter, NotFound } from '../../../errors.js';
import type { LinuxContainerRuntime } from '../runtime/runtime.js';
import { upperChanges } from './changes.js';
import { upperDiffTar } from './diff.js';
import { packFiles } from './pack.js';
import { ContainerFilesystem, components } from './resolve.js';
import { withSubpaths } from './subpath.js';
import { extractArchive } from './unpack.js';
import { readEtcFile, writeEtcFiles } from '../etcfiles.js';
import type { ContainerFilesHost, EtcFileWrite, EtcFileWriteMode, ExtractRequest, FilesystemChange, FilesystemView, PathStat } from '../../host.js';

// Go's os.FileMode bits, which clients decode from the path stat.
const GO_MODE_DIR = 2 ** 31;
const GO_MODE_SYMLINK = 2 ** 27;
const GO_MODE_DEVICE = 2 ** 26;
const GO_MODE_NAMED_PIPE = 2 ** 25;
const GO_MODE_SOCKET = 2 ** 24;
const GO_MODE_SETUID = 2 ** 23;
const GO_MODE_SETGID = 2 ** 22;
const GO_MODE_CHAR_DEVICE = 2 ** 21;
const GO_MODE_STICKY = 2 ** 20;

/** A stat's mode as Go's os.FileMode (type bits high, permissions low). */
export function goFileMode(st: Stats): number {
  let mode = st.mode & 0o777;
  if (st.mode & 0o4000) mode += GO_MODE_SETUID;
  if (st.mode & 0o2000) mode += GO_MODE_SETGID;
  if (st.mode & 0o1000) mode += GO_MODE_STICKY;
  if (st.isDirectory()) mode += GO_MODE_DIR;
  else if (st.isSymbolicLink()) mode += GO_MODE_SYMLINK;
  else if (st.isFIFO()) mode += GO_MODE_NAMED_PIPE;
  else if (st.isSocket()) mode += GO_MODE_SOCKET;
  else if (st.isCharacterDevice()) mode += GO_MODE_DEVICE + GO_MODE_CHAR_DEVICE;
  else if (st.isBlockDevice()) mode += GO_MODE_DEVICE;
  return mode;
}

/** The parts of an archive path: `/x/` and `/x/.` assert a folder; `/x/.` means its contents only. */
export function parsePathRequest(p: string): { clean: string; assertDir: boolean; contentsOnly: boolean; baseName: string } {
  const assertDir = p.endsWith('/') || p.endsWith('/.') || p === '.';
  const contentsOnly = p.endsWith('/.') || p === '.';
  const parts = components(p);
  // `..` is resolved by the walk itself; the name shown is the last component of the path as given.
  const clean = '/' + parts.join('/');
  const baseName = parts.length === 0 ? '/' : path.posix.basename(path.posix.resolve(clean)) || '/';
  return { clean, assertDir, contentsOnly, baseName };
}

export class LinuxContainerFiles implements ContainerFilesHost {
  writeEtcFiles(files: EtcFileWrite[], mode: EtcFileWriteMode): Promise<void> {
    return writeEtcFiles(files, mode);
  }

  readEtcFile(file: string): Promise<string | undefined> {
    return readEtcFile(file);
  }

  constructor(private readonly runtime: LinuxContainerRuntime) {}

  mountRootfs(id: string, lowerDirs: string[]): Promise<string> {
    return this.runtime.mountRootfs(id, lowerDirs);
  }

  unmountRootfs(id: string): Promise<void> {
    return this.runtime.unmountRootfs(id);
  }

  readFileFromLayers(lowerDirs: string[], file: string): Promise<Buffer | undefined> {
    return this.runtime.readFileFromLayers(lowerDirs, file);
  }

  private async locateForRead(view: FilesystemView, p: string) {
    const req = parsePathRequest(p);
    const fsys = await ContainerFilesystem.open(await withSubpaths(view));
    const loc = await fsys.resolve(req.clean, req.assertDir);
    let st: Stats;
    try {
      st = await fs.lstat(loc.hostPath);
    } catch {
      throw new NotFound(`Could not find the file ${p} in container`);
    }
    if (req.assertDir && !st.isDirectory()) throw new InvalidParameter(`not a directory: ${p}`);
    let linkTarget = '';
    if (st.isSymbolicLink()) {
      linkTarget = await fsys.resolveContainerPath(req.clean, true, true).catch(async () => fs.readlink(loc.hostPath));
    }
    const name = req.baseName === '..' || req.baseName === '' ? path.posix.basename(loc.containerPath) || '/' : req.baseName;
    const stat: PathStat = { name, size: st.size, mode: goFileMode(st), mtime: st.mtime.toISOString(), linkTarget };
    return { req, fsys, loc, st, stat };
  }

  async statPath(view: FilesystemView, p: string): Promise<PathStat> {
    return (await this.locateForRead(view, p)).stat;
  }

  async archivePath(view: FilesystemView, p: string, signal?: AbortSignal): Promise<{ stat: PathStat; tar: Readable }> {
    const { req, fsys, loc, st, stat } = await this.locateForRead(view, p);
    const name = st.isDirectory() && (req.contentsOnly || loc.containerPath === '/') ? '' : stat.name;
    const tar = packFiles([{ containerPath: loc.containerPath, hostPath: loc.hostPath, boundary: loc.boundary, name }], { fs: fsys, signal });
    return { stat, tar };
  }

  async extractArchive(view: FilesystemView, p: string, tar: Readable, opts: ExtractRequest): Promise<void> {
    const req = parsePathRequest(p);
    const fsys = await ContainerFilesystem.open(await withSubpaths(view));
    const loc = await fsys.resolve(req.clean, true);
    const st = await fs.lstat(loc.hostPath).catch(() => undefined);
    if (!st) throw new NotFound(`Could not find the file ${p} in container`);
    if (!st.isDirectory()) throw new InvalidParameter(`extraction point is not a directory: ${p}`);
    if (loc.readOnly) {
      throw new Forbidden(loc.mount ? `mounted volume is marked read-only: ${loc.containerPath}` : 'container rootfs is marked read-only');
    }
    await extractArchive(fsys, loc, tar, opts);
  }

  exportRootfs(root: string, signal?: AbortSignal): Readable {
    const resolved = path.resolve(root);
    return packFiles([{ containerPath: '/', hostPath: resolved, boundary: resolved, name: '' }], { signal });
  }

  changes(id: string, lowerDirs: string[], ignoreAdded: ReadonlySet<string>): Promise<FilesystemChange[]> {
    return upperChanges(path.join(this.runtime.layout.containerDir(id), 'upper'), lowerDirs, ignoreAdded);
  }

  diffTar(id: string, lowerDirs: string[], ignoreAdded: ReadonlySet<string>, signal?: AbortSignal): Readable {
    return upperDiffTar(path.join(this.runtime.layout.containerDir(id), 'upper'), lowerDirs, ignoreAdded, signal);
  }
}
