/**
 * Where the Linux runtime keeps each container's files.
 *
 * Formats (layout version 1):
 * - data root `runtime/<id>/`: the container's overlay (`upper/`, `work/`, `merged/`, `lower/<n>` symlinks to
 *   the image's layer folders, n = 0 for the bottom layer) and conmon's persist folder `persist/` (`exit`,
 *   `oom`), which outlive a reboot.
 * - exec root `bundles/<id>/`: the OCI bundle (`config.json`, written at every start) and the FIFOs and attach
 *   socket conmon creates in it (`ctl`, `winsz`, `attach`): what only a running container needs is kept beside
 *   the runtime's state, on the exec root's tmpfs (see host/linux/execroot.ts), and not created and deleted on
 *   disk at every start and removal.
 * - exec root `runtime/`: the OCI runtime's state root (`--root`), so that daemons with different exec roots
 *   never see each other's containers.
 * - exec root `exits/<id>`: conmon's exit file, the exit code as decimal text, written when the container ended;
 *   its mtime is the time of the exit.
 * - exec root `conmon/<id>/`: `conmon.pid` (conmon's pid), `pid` (the container's init pid), `conmon.err`
 *   (conmon's own stderr until it detaches).
 * - exec root `execs/<key>/`: one exec session (see exec.ts); `<key>` is the first 16 characters of its id.
 * - exec root `sock/<key>`: conmon's symlink to the bundle, so the attach socket's path `sock/<key>/attach`
 *   fits the 108 bytes of a unix socket address; `<key>` is the first 16 hex digits of the id.
 */
import path from 'node:path';

/** Longest path a unix socket address can hold (sun_path, including its terminating NUL). */
export const UNIX_PATH_MAX = 108;

export class RuntimeLayout {
  readonly runtimeState: string;
  readonly exitDir: string;
  readonly socketDir: string;
  readonly conmonDir: string;
  readonly containersDir: string;
  readonly execDir: string;
  readonly bundlesDir: string;

  constructor(
    readonly dataRoot: string,
    readonly execRoot: string,
  ) {
    this.containersDir = path.join(dataRoot, 'runtime');
    this.runtimeState = path.join(execRoot, 'runtime');
    this.exitDir = path.join(execRoot, 'exits');
    this.socketDir = path.join(execRoot, 'sock');
    this.conmonDir = path.join(execRoot, 'conmon');
    this.execDir = path.join(execRoot, 'execs');
    this.bundlesDir = path.join(execRoot, 'bundles');
  }

  /** The container's own folder in the data root: overlay dirs and conmon's persist folder. */
  containerDir(id: string): string {
    return path.join(this.containersDir, checkId(id));
  }
  bundle(id: string): string {
    return path.join(this.bundlesDir, checkId(id));
  }
  merged(id: string): string {
    return path.join(this.containerDir(id), 'merged');
  }
  persistDir(id: string): string {
    return path.join(this.containerDir(id), 'persist');
  }
  exitFile(id: string): string {
    return path.join(this.exitDir, checkId(id));
  }
  conmonFiles(id: string): string {
    return path.join(this.conmonDir, checkId(id));
  }
  /** The key conmon names the socket symlink by (its --cuuid). */
  socketKey(id: string): string {
    return checkId(id).slice(0, 16);
  }
  attachSocket(id: string): string {
    return path.join(this.socketDir, this.socketKey(id), 'attach');
  }
  ctlFifo(id: string): string {
    return path.join(this.bundle(id), 'ctl');
  }
}

/**
 * Container ids name folders and runtime state: only [A-Za-z0-9_.-] and no leading dot, so an id can never
 * climb out of the folder it names.
 */
export function checkId(id: string): string {
  if (!/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/.test(id)) throw new Error(`invalid container id ${JSON.stringify(id)}`);
  return id;
}
