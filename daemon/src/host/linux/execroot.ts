/**
 * The exec root holds what lives only while the machine runs: the runtime's state, the OCI bundles, conmon's
 * files, exit files and attach sockets (runtime/layout.ts). As /run on most hosts, it is a tmpfs: files that a
 * start creates and a removal deletes cost no disk writes (and, on ext4 without a journal, no inode churn: see
 * nojournal.ts). When the folder is on another file system and empty, the daemon mounts a tmpfs on it. The mount
 * stays when the daemon stops (the containers still running use it) and goes with the next boot, as /run does.
 * A folder that already holds files (a running engine's, from before) is used as it is.
 */
import { execFile } from 'node:child_process';
import { promises as fs } from 'node:fs';
import { log } from '../../util/log.js';

const TMPFS_MAGIC = 0x01021994;
const RAMFS_MAGIC = 0x858458f6;

/** Makes sure `dir` (which exists) is on a tmpfs where it can be; the log says when it cannot. */
export async function ensureExecRootTmpfs(dir: string): Promise<void> {
  const { type } = await fs.statfs(dir);
  if (type === TMPFS_MAGIC || type === RAMFS_MAGIC) return;
  if ((await fs.readdir(dir)).length > 0) {
    log.info('the exec root is not on a tmpfs and holds files already: its files stay on disk', { execRoot: dir });
    return;
  }
  try {
    await new Promise<void>((resolve, reject) =>
      execFile('mount', ['-t', 'tmpfs', '-o', 'mode=0700,nosuid,nodev', 'tmpfs', dir], { timeout: 30_000 }, (err, _out, stderr) =>
        err ? reject(new Error((stderr || err.message).trim())) : resolve(),
      ),
    );
  } catch (err) {
    log.warn('cannot mount a tmpfs on the exec root: its files stay on disk', { execRoot: dir, error: (err as Error).message });
  }
}
