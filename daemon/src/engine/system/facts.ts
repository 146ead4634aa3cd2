/**
 * The facts of the machine that /info and /version show (kernel, OS, resources, runtimes and their
 * versions, the storage driver's status), asked of the Host's probe: the machine containers run on, which
 * need not be the one the engine runs on.
 */
import type { ComponentVersion, HostInfo, ProbeHost } from '../../host/host.js';

export type { ComponentVersion, HostInfo };

/** What the facts need of the Host. */
export type FactsHost = Pick<ProbeHost, 'info' | 'componentVersions' | 'driverStatus'>;

export class SystemFacts {
  constructor(private readonly probe: FactsHost) {}

  hostInfo(): Promise<HostInfo> {
    return this.probe.info();
  }

  /** The runtimes, conmon and the init binary, with their versions. */
  components(): Promise<ComponentVersion[]> {
    return this.probe.componentVersions();
  }

  driverStatus(): Promise<Array<[string, string]>> {
    return this.probe.driverStatus();
  }
}
