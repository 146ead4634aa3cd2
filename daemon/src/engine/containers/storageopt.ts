/**
 * HostConfig.StorageOpt, as Docker's overlay2 driver answers it: `size` needs project quotas (overlay on xfs
 * mounted with `pquota`), which this engine does not set up, and any other key is unknown to the driver.
 * Docker refuses these when it makes the container's layer, as a server-side error: so does this.
 */
import { EngineError } from '../errors.js';

export function checkStorageOptions(options: Record<string, unknown> | null | undefined): void {
  const keys = Object.keys(options ?? {});
  if (keys.length === 0) return;
  if (keys.some((k) => k.toLowerCase() === 'size')) throw new EngineError("--storage-opt is supported only for overlay over xfs with 'pquota' mount option");
  throw new EngineError(`Unknown option ${keys[0]!.toLowerCase()}`);
}
