/**
 * HostConfig.StorageOpt, as Docker's overlay2 driver answers it: `size` needs project quotas (overlay on xfs
 * mounted with `pquota`), which this engine does not set up, and any other key is unknown to the driver.
 * Docker refuses these with the same words when it makes the container's layer, as a server-side error; here
 * they are the client's request that the storage cannot honour, so a 400 at create.
 */
import { InvalidParameter } from '../../errors.js';

export function checkStorageOptions(options: Record<string, unknown> | null | undefined): void {
  const keys = Object.keys(options ?? {});
  if (keys.length === 0) return;
  if (keys.some((k) => k.toLowerCase() === 'size')) throw new InvalidParameter("--storage-opt is supported only for overlay over xfs with 'pquota' mount option");
  throw new InvalidParameter(`Unknown option ${keys[0]!.toLowerCase()}`);
}
