/**
 * Connecting and disconnecting a running container to and from a network after it started
 * (POST /networks/{id}/connect and /disconnect). The container engine supplies the narrow lookup below.
 */
import { Conflict } from '../errors.js';
import type { ContainerNetworking, EndpointSettings } from './types.js';

/** What connect and disconnect need of the container engine. */
export interface ContainerLookup {
  /** The container by id, name or unique id prefix; throws NotFound. */
  get(ref: string): { Id: string; Name: string; State: { Running: boolean; Pid: number } };
  /** Records the container's endpoints after a change, so that inspect and list show them. */
  setNetworks(id: string, networks: Record<string, EndpointSettings>): Promise<void>;
}

export interface NetworkContainerBackend {
  connectContainer(networkRef: string, containerRef: string, endpointConfig: unknown): Promise<void>;
  disconnectContainer(networkRef: string, containerRef: string, force: boolean): Promise<void>;
}

export function containerConnector(
  networking: Pick<ContainerNetworking, 'connectRunning' | 'disconnectOne'> & { find(ref: string): unknown },
  containers: ContainerLookup,
): NetworkContainerBackend {
  return {
    async connectContainer(networkRef, containerRef, endpointConfig) {
      networking.find(networkRef);
      const c = containers.get(containerRef);
      if (!c.State.Running || c.State.Pid <= 0) {
        throw new Conflict(`container ${c.Name.replace(/^\//, '')} is not running: connecting a stopped container is not supported yet`);
      }
      const networks = await networking.connectRunning({ id: c.Id, name: c.Name }, networkRef, endpointConfig, c.State.Pid);
      await containers.setNetworks(c.Id, networks);
    },
    async disconnectContainer(networkRef, containerRef, _force) {
      networking.find(networkRef);
      const c = containers.get(containerRef);
      const networks = await networking.disconnectOne(c.Id, networkRef);
      await containers.setNetworks(c.Id, networks);
    },
  };
}
