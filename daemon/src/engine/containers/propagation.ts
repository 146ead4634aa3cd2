/**
 * Bind propagation at start, as Docker checks it: a mount asked to be shared (`shared`, `rshared`) needs its
 * source on a shared mount of the host, and one asked to be a slave (`slave`, `rslave`) a shared or slave one;
 * otherwise the runtime would mount it and the propagation asked for would silently not happen.
 */
import type { ContainerRuntimeHost } from '../../host/host.js';
import { InvalidParameter } from '../../errors.js';
import type { MountPoint } from './model.js';

const SHARED = new Set(['shared', 'rshared']);
const SLAVE = new Set(['slave', 'rslave']);

/** Throws (400, with Docker's words; Docker answers 500) naming the first mount whose source's propagation does not allow it. */
export async function checkPropagation(mounts: MountPoint[], host: Pick<ContainerRuntimeHost, 'sourceMount'>): Promise<void> {
  if (!host.sourceMount) return;
  for (const m of mounts) {
    const wantsShared = SHARED.has(m.Propagation);
    if ((!wantsShared && !SLAVE.has(m.Propagation)) || !m.Source) continue;
    const source = await host.sourceMount(m.Source);
    if (wantsShared && !source.shared) {
      throw new InvalidParameter(`path ${m.Source} is mounted on ${source.mountPoint} but it is not a shared mount`);
    }
    if (!wantsShared && !source.shared && !source.slave) {
      throw new InvalidParameter(`path ${m.Source} is mounted on ${source.mountPoint} but it is not a shared or slave mount`);
    }
  }
}
