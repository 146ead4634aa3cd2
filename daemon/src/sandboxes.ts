/**
 * The composition of sandboxes and of the interfaces served beside the engine API: the sandbox service
 * (policies the Host enforces, fed by the embedded DNS server's answers, following network connects), and the
 * routes of the sandbox policies, the SCIM user lookup and the users and tokens.
 */
import { registerAuthRoutes } from './api/auth.js';
import type { Router } from './api/router.js';
import { registerSandboxRoutes } from './api/sandbox.js';
import { registerScimRoutes } from './api/scim.js';
import { AuthStoreWriter, type AuthStoreReader } from './engine/auth/store.js';
import type { ContainerRecord } from './engine/containers/model.js';
import type { ContainerService } from './engine/containers/service.js';
import type { EventBus } from './engine/events.js';
import type { NetworkService } from './engine/networks/service.js';
import { SandboxService } from './engine/sandbox/service.js';
import type { Host } from './host/host.js';
import { errorMessage } from './errors.js';
import { log } from './util/log.js';

/** The sandbox service; `containers` is asked for lazily (the container engine is built with the service). */
export function composeSandboxes(host: Pick<Host, 'sandbox' | 'network'>, networks: NetworkService, events: EventBus, containers: () => ContainerService): SandboxService {
  const sandboxes = new SandboxService(
    {
      find: (ref): ContainerRecord | undefined => containers().store.find(ref),
      dir: (id) => containers().store.dir(id),
      all: () => containers().store.all(),
      useEmbeddedDns: (id) => containers().useEmbeddedDns(id),
    },
    networks,
    host.sandbox,
  );
  host.network.observeDns?.((id, name, records) => sandboxes.dnsAnswer(id, name, records));
  events.subscribe((event) => {
    const container = event.Actor.Attributes.container;
    if (event.Type === 'network' && event.Action === 'connect' && container) {
      void sandboxes.networkChanged(container).catch((err: unknown) => log.warn('a sandbox policy could not follow a network connect', { id: container, error: errorMessage(err) }));
    }
    // A container that came or went on a bridge: the sandboxes hand their frames to the ones there now.
    if (event.Type === 'network' && (event.Action === 'connect' || event.Action === 'disconnect')) {
      void sandboxes.peersChanged().catch((err: unknown) => log.warn('the sandboxes could not follow a network change', { error: errorMessage(err) }));
    }
  });
  return sandboxes;
}

/** The sandbox policies, the SCIM lookup of the users `berthd user` made, and the users and tokens over the unix socket. */
export function registerControlRoutes(
  router: Router,
  parts: { sandboxes: SandboxService; authStore: Pick<AuthStoreReader, 'user'>; state: ConstructorParameters<typeof AuthStoreWriter>[0] },
): void {
  registerScimRoutes(router, { user: (id) => parts.authStore.user(id) });
  registerSandboxRoutes(router, parts.sandboxes);
  registerAuthRoutes(router, new AuthStoreWriter(parts.state));
}
