/**
 * The sizes `docker ps --size` and inspect with size=1 show: the bytes of the container's own files
 * (SizeRw, its writable layer as the Host measures it) and those plus its image's (SizeRootFs).
 */
import type { ContainerRuntimeHost } from '../../host/host.js';
import type { ContainerRecord } from './model.js';

export interface SizeDeps {
  host: Pick<ContainerRuntimeHost, 'writableLayerSize'>;
  /** The image's inspect view (its Size); throws when the image is gone. */
  images: { inspect(ref: string): { Size?: unknown } };
}

export interface ContainerSizes {
  rw: number;
  rootFs: number;
}

export async function containerSizes(deps: SizeDeps, record: ContainerRecord): Promise<ContainerSizes> {
  const rw = await deps.host.writableLayerSize(record.Id);
  let imageSize = 0;
  try {
    imageSize = Number(deps.images.inspect(record.Image).Size) || 0;
  } catch {
    // The image was removed by force: only the container's own files count.
  }
  return { rw, rootFs: rw + imageSize };
}
