/**
 * The container object: what is stored, what inspect shows, and the state machine.
 *
 * Formats: `<data-root>/containers/<id>/container.json` holds one ContainerRecord as JSON with
 * `FormatVersion: 1`. It is rewritten atomically on every change of state (util/atomic). Beside it:
 * `container.log` (conmon's k8s-file log), `hosts`, `hostname`, `resolv.conf` (bind-mounted into the
 * container), and what the host keeps for the container (bundle, rootfs upper layer).
 */
import type { ImageRunConfig } from '../images/types.js';
import type { EndpointSettings } from '../networks/types.js';

export const CONTAINER_FORMAT_VERSION = 1;

export type ContainerStatus = 'created' | 'restarting' | 'running' | 'paused' | 'removing' | 'exited' | 'dead';

export interface HealthLogEntry {
  Start: string;
  End: string;
  ExitCode: number;
  Output: string;
}

export interface ContainerState {
  Status: ContainerStatus;
  Running: boolean;
  Paused: boolean;
  Restarting: boolean;
  OOMKilled: boolean;
  Dead: boolean;
  Pid: number;
  ExitCode: number;
  Error: string;
  StartedAt: string;
  FinishedAt: string;
  Health?: { Status: string; FailingStreak: number; Log: HealthLogEntry[] };
}

/** Config as the API shows it: the create body's config merged with the image's. */
export interface ContainerConfig extends ImageRunConfig {
  Hostname: string;
  Domainname: string;
  User: string;
  AttachStdin: boolean;
  AttachStdout: boolean;
  AttachStderr: boolean;
  Tty: boolean;
  OpenStdin: boolean;
  StdinOnce: boolean;
  Env: string[];
  Cmd: string[] | null;
  Entrypoint: string[] | null;
  Image: string;
  Labels: Record<string, string>;
  WorkingDir: string;
  NetworkDisabled?: boolean;
  MacAddress?: string;
  StopSignal?: string;
  StopTimeout?: number;
}

export type HostConfig = Record<string, unknown> & {
  NetworkMode: string;
  RestartPolicy: { Name: string; MaximumRetryCount: number };
  AutoRemove: boolean;
  Binds: string[] | null;
  ReadonlyRootfs: boolean;
  Privileged: boolean;
  ShmSize: number;
};

export interface MountPoint {
  Type: 'bind' | 'volume' | 'tmpfs';
  Name?: string;
  Source: string;
  Destination: string;
  Driver?: string;
  Mode: string;
  RW: boolean;
  Propagation: string;
}

/** A container's endpoint in a network, as the network service gives it. */
export type { EndpointSettings };

export interface ContainerRecord {
  FormatVersion: number;
  Id: string;
  /** With the leading slash, as the API shows it. */
  Name: string;
  Created: string;
  /** Creation time in nanoseconds, kept as a decimal string (ordering, since/before filters). */
  CreatedNano: string;
  Path: string;
  Args: string[];
  Config: ContainerConfig;
  HostConfig: HostConfig;
  /** The image id (sha256:...). */
  Image: string;
  /** The image's layer chain ids, bottom first. */
  ImageChainIds: string[];
  /** Endpoint configs asked for at create, by network name. */
  EndpointsConfig: Record<string, Partial<EndpointSettings>>;
  State: ContainerState;
  RestartCount: number;
  Networks: Record<string, EndpointSettings>;
  /** Published ports as inspect shows them (`80/tcp` -> bindings or null). */
  Ports: Record<string, Array<{ HostIp: string; HostPort: string }> | null>;
  Mounts: MountPoint[];
  LogPath: string;
  ResolvConfPath: string;
  HostnamePath: string;
  HostsPath: string;
  ExecIDs: string[] | null;
  /** True once the user stopped it (restart policy unless-stopped keeps it down across daemon restarts). */
  ManuallyStopped: boolean;
}

export function initialState(): ContainerState {
  return {
    Status: 'created',
    Running: false,
    Paused: false,
    Restarting: false,
    OOMKilled: false,
    Dead: false,
    Pid: 0,
    ExitCode: 0,
    Error: '',
    StartedAt: '0001-01-01T00:00:00Z',
    FinishedAt: '0001-01-01T00:00:00Z',
  };
}

/** The human-readable Status column of `docker ps`. */
export function humanStatus(state: ContainerState, now = Date.now()): string {
  const since = (stamp: string) => humanDuration(now - Date.parse(stamp));
  switch (state.Status) {
    case 'running': {
      const health = state.Health && state.Health.Status !== 'none' ? ` (${state.Health.Status === 'starting' ? 'health: starting' : state.Health.Status})` : '';
      return `Up ${since(state.StartedAt)}${health}`;
    }
    case 'paused':
      return `Up ${since(state.StartedAt)} (Paused)`;
    case 'restarting':
      return `Restarting (${state.ExitCode}) ${since(state.FinishedAt)} ago`;
    case 'removing':
      return 'Removal In Progress';
    case 'dead':
      return 'Dead';
    case 'exited':
      return state.FinishedAt.startsWith('0001') ? 'Created' : `Exited (${state.ExitCode}) ${since(state.FinishedAt)} ago`;
    default:
      return 'Created';
  }
}

/** Durations as Docker prints them (units.HumanDuration). */
export function humanDuration(ms: number): string {
  const seconds = Math.max(0, Math.floor(ms / 1000));
  if (seconds < 1) return 'Less than a second';
  if (seconds === 1) return '1 second';
  if (seconds < 60) return `${seconds} seconds`;
  const minutes = Math.floor(seconds / 60);
  if (minutes === 1) return 'About a minute';
  if (minutes < 60) return `${minutes} minutes`;
  const hours = Math.round(seconds / 3600);
  if (hours === 1) return 'About an hour';
  if (hours < 48) return `${hours} hours`;
  if (hours < 24 * 7 * 2) return `${Math.floor(hours / 24)} days`;
  if (hours < 24 * 30 * 2) return `${Math.floor(hours / 24 / 7)} weeks`;
  if (hours < 24 * 365 * 2) return `${Math.floor(hours / 24 / 30)} months`;
  return `${Math.floor(hours / 24 / 365)} years`;
}
