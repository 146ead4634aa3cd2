/**
 * Volumes: the stored record and what the API shows (the Host interface the volume service uses is
 * host/volumes.ts).
 */

/** One volume as stored in `<data-root>/volumes/<name>/volume.json` (see store.ts). */
export interface VolumeRecord {
  Name: string;
  /** `local`, or the name of the plugin whose volume driver holds it. */
  Driver: string;
  /** RFC 3339, seconds. */
  CreatedAt: string;
  Labels: Record<string, string>;
  Options: Record<string, string>;
}

/** The API's Volume object. */
export interface VolumeView {
  Name: string;
  Driver: string;
  Mountpoint: string;
  CreatedAt: string;
  Labels: Record<string, string>;
  Scope: 'local' | 'global';
  Options: Record<string, string>;
  /** What a plugin's driver says of the volume (inspect only, when it says something). */
  Status?: Record<string, unknown>;
  UsageData: { Size: number; RefCount: number } | null;
}

/** The label Docker puts on volumes created for a container's anonymous mount points. */
export const ANONYMOUS_LABEL = 'com.docker.volume.anonymous';

/** Names of the local driver's volumes, as Docker checks them. */
export const VOLUME_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{1,254}$/;
/** The longest volume name (a folder's name: NAME_MAX). */
export const VOLUME_NAME_MAX = 255;

/** Who uses volumes: the container engine answers from its records (so refcounts survive restarts). */
export interface VolumeUsers {
  /** Ids of the containers (in any state) whose mounts name the volume. */
  containersUsingVolume(name: string): string[];
  /** Ids of the running containers whose mounts name the volume. */
  runningContainersUsingVolume(name: string): string[];
}

