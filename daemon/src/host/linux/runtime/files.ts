/**
 * The files of the containers of the Linux runtime: their folders, their overlay root filesystems and their
 * removal, and small files read from image layers.
 */
import { promises as fs, readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Conflict } from '../../../errors.js';
import { removeLater } from '../../../util/later.js';
import { log } from '../../../util/log.js';
import { fsStepResults, removeTree, type FsStep } from '../sys.js';
import { checkId, type RuntimeLayout } from './layout.js';
import { diskUsage, mountOverlay, readFileFromLayers, unmountOverlay } from './rootfs.js';

const LAYER_FILE_CACHE_ENTRIES = 64;
const LAYER_FILE_CACHE_MAX_BYTES = 64 * 1024;

/** Names of container folders being deleted in the background (never a container id: ids start with [A-Za-z0-9_]). */
const REMOVING_PREFIX = '.removing-';

const ENOENT = os.constants.errno.ENOENT;

export class ContainerFiles {
  /** Small files read from image layers, least recently used first. */
  private readonly layerFiles = new Map<string, { data: Buffer | undefined }>();
  /** Containers whose root filesystem this daemon unmounted and has not mounted since (spares a second unmount). */
  private readonly unmounted = new Set<string>();
  private dirsReady: Promise<void> | undefined;

  constructor(private readonly layout: RuntimeLayout) {}

  /** Makes the runtime's folders (once), and deletes the folders of removed containers a stop left aside. */
  ensureDirs(): Promise<void> {
    this.dirsReady ??= (async () => {
      const l = this.layout;
      await fs.mkdir(l.containersDir, { recursive: true, mode: 0o710 });
      for (const dir of [l.runtimeState, l.exitDir, l.socketDir, l.conmonDir, l.execDir, l.bundlesDir]) await fs.mkdir(dir, { recursive: true, mode: 0o700 });
      // Folders of removed containers whose deletion a stop of the daemon interrupted.
      for (const dir of [l.containersDir, l.conmonDir, l.bundlesDir]) {
        for (const name of readdirSync(dir)) {
          if (name.startsWith(REMOVING_PREFIX)) void removeTree(path.join(dir, name)).catch(() => undefined);
        }
      }
    })().catch((err) => {
      this.dirsReady = undefined;
      throw err;
    });
    return this.dirsReady;
  }

  async mountRootfs(id: string, lowerDirs: string[]): Promise<string> {
    this.unmounted.delete(id);
    await this.ensureDirs();
    return mountOverlay(this.layout.containerDir(id), lowerDirs);
  }

  async writableLayerSize(id: string): Promise<number> {
    return diskUsage(path.join(this.layout.containerDir(checkId(id)), 'upper'));
  }

  async unmountRootfs(id: string): Promise<void> {
    await unmountOverlay(this.layout.containerDir(id));
    this.unmounted.add(id);
  }

  /** The first step of a removal: the root filesystem unmounted (unless it is already). */
  async unmountForRemoval(id: string): Promise<void> {
    const dir = this.layout.containerDir(id);
    if (!this.unmounted.has(id)) {
      try {
        await unmountOverlay(dir);
      } catch (err) {
        throw new Conflict(`the root filesystem of container ${id} is still mounted: ${(err as Error).message}`);
      }
    }
    this.unmounted.delete(id);
  }

  /**
   * Removes the container's files, once unmountForRemoval unmounted its root. Its folders are renamed aside at once and deleted later, in a
   * batch (util/later.ts): a writable layer can hold many files, and the removal need not wait for them.
   */
  async remove(id: string): Promise<void> {
    const dir = this.layout.containerDir(id);
    const asides = [
      [dir, path.join(this.layout.containersDir, `${REMOVING_PREFIX}${id}`)],
      [this.layout.conmonFiles(id), path.join(this.layout.conmonDir, `${REMOVING_PREFIX}${id}`)],
      [this.layout.bundle(id), path.join(this.layout.bundlesDir, `${REMOVING_PREFIX}${id}`)],
    ] as const;
    // One task of the pool for the unlink and the renames; a folder that cannot be renamed is removed in place.
    const results = await fsStepResults([['unlink', this.layout.exitFile(id)], ...asides.map(([from, aside]): FsStep => ['rename', from, aside])]);
    for (const [i, [from, aside]] of asides.entries()) {
      const moved = results[i + 1];
      if (moved === 0) removeLater(aside, removeTree, (err) => log.warn('cannot delete the files of a removed container', { id, error: (err as Error).message }));
      else if (moved !== ENOENT) await removeTree(from);
    }
  }

  /**
   * A file as the image's layers show it. Layer folders never change once unpacked (they are named by their
   * content's chain id), so small files (/etc/passwd and /etc/group, read at every start) are kept, a few.
   */
  async readFileFromLayers(lowerDirs: string[], file: string): Promise<Buffer | undefined> {
    const key = `${file}\0${lowerDirs.join('\0')}`;
    const known = this.layerFiles.get(key);
    if (known) {
      this.layerFiles.delete(key);
      this.layerFiles.set(key, known);
      return known.data;
    }
    const data = await readFileFromLayers(lowerDirs, file);
    if (data === undefined || data.length <= LAYER_FILE_CACHE_MAX_BYTES) {
      this.layerFiles.set(key, { data });
      if (this.layerFiles.size > LAYER_FILE_CACHE_ENTRIES) this.layerFiles.delete(this.layerFiles.keys().next().value!);
    }
    return data;
  }
}
