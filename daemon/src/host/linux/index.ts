/**
 * LinuxHost: the Host on the machine the daemon runs on, composed of its parts. Each part implements one
 * of the narrow interfaces of host/host.ts; this class only builds them from the daemon's options.
 */
import { LinuxContainerRuntime } from './runtime/runtime.js';
import type { RuntimeName } from './runtime/ociruntime.js';

export interface LinuxHostOptions {
  dataRoot: string;
  execRoot: string;
  /** The preferred OCI runtime (crun or runc). */
  runtime: RuntimeName;
}

export class LinuxHost {
  /** Containers: root filesystems, conmon + the OCI runtime, logs, attach (ContainerRuntimeHost). */
  readonly containers: LinuxContainerRuntime;

  constructor(opts: LinuxHostOptions) {
    this.containers = new LinuxContainerRuntime({ dataRoot: opts.dataRoot, execRoot: opts.execRoot, runtime: opts.runtime });
  }

  /** Warnings about the host to log at start (e.g. the preferred runtime cannot work here). */
  get warnings(): string[] {
    return this.containers.runtimeWarning ? [this.containers.runtimeWarning] : [];
  }

  /** Releases watchers and handles; containers keep running under conmon. */
  close(): void {
    this.containers.close();
  }
}
