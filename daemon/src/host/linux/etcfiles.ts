/**
 * The files the engine makes for a container's /etc (hosts, hostname, resolv.conf), written on this machine
 * at the paths of the container's record, where the runtime binds them (ContainerFilesHost.writeEtcFiles).
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { InvalidParameter } from '../../errors.js';
import { writeFreshFiles } from '../../util/atomic.js';
import type { EtcFileWrite, EtcFileWriteMode } from '../host.js';

const NAMES = new Set(['hosts', 'hostname', 'resolv.conf']);

/** Only files of those names, in a container's folder, are written or read here (an agent serves this to a daemon). */
function checked(file: string): string {
  if (typeof file !== 'string' || !path.isAbsolute(file) || path.normalize(file) !== file || !NAMES.has(path.basename(file)) || path.dirname(file) === '/etc') {
    throw new InvalidParameter(`refusing ${JSON.stringify(file)}: not one of a container's /etc files`);
  }
  return file;
}

export async function writeEtcFiles(files: EtcFileWrite[], mode: EtcFileWriteMode): Promise<void> {
  for (const { file } of files) checked(file);
  if (mode === 'fresh') {
    // Unlinked first: ext4 flushes a file truncated and rewritten in place when it is closed, milliseconds on
    // the start path; the files go as one task of the pool.
    await writeFreshFiles(files.map(({ file, data }) => ({ file, data })));
    return;
  }
  if (mode === 'inPlace') {
    await Promise.all(files.map(({ file, data }) => fs.writeFile(file, data)));
    return;
  }
  await Promise.all(
    files.map(async ({ file }) => {
      try {
        await fs.writeFile(file, '', { flag: 'wx', mode: 0o755 });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EEXIST') return;
        throw err;
      }
      // The mode of a new file is masked by the umask.
      await fs.chmod(file, 0o755);
    }),
  );
}

export async function readEtcFile(file: string): Promise<string | undefined> {
  return fs.readFile(checked(file), 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined;
    throw err;
  });
}
