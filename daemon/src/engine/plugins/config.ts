/** A managed plugin's config (its config.json, checked) and record, and the names plugins go by. */
import { InvalidParameter } from '../../errors.js';

export interface PluginEnv {
  Name: string;
  Description?: string;
  Settable?: string[] | null;
  Value?: string | null;
}

/** The plugin's configuration, as `config.json` of its tar and the v1 config blob of a registry give it. */
export interface PluginConfig {
  Description?: string;
  Documentation?: string;
  Interface: { Types: string[]; Socket: string; ProtocolScheme?: string };
  Entrypoint?: string[] | null;
  WorkDir?: string;
  User?: { UID?: number; GID?: number };
  Network?: { Type?: string };
  Linux?: { Capabilities?: string[] | null; AllowAllDevices?: boolean; Devices?: Array<{ Name?: string; Description?: string; Settable?: string[] | null; Path: string }> | null };
  PropagatedMount?: string;
  IpcHost?: boolean;
  PidHost?: boolean;
  Mounts?: Array<{ Name?: string; Description?: string; Settable?: string[] | null; Source?: string | null; Destination: string; Type?: string; Options?: string[] | null }> | null;
  Env?: PluginEnv[] | null;
  Args?: { Name?: string; Description?: string; Settable?: string[] | null; Value?: string[] | null };
  [key: string]: unknown;
}

/** The stored plugin object (the API's Plugin from 1.25). */
export interface PluginRecord {
  Id: string;
  Name: string;
  Enabled: boolean;
  Settings: { Mounts: unknown[]; Env: string[]; Args: string[]; Devices: unknown[] };
  PluginReference: string;
  Config: PluginConfig;
}

/** `name[:tag]` with `latest` when no tag is given; a name that is a familiar Docker Hub one stays short. */
export function normalizePluginName(name: string): string {
  const trimmed = name.replace(/^docker\.io\/(library\/)?/, '');
  const lastSlash = trimmed.lastIndexOf('/');
  if (trimmed.includes('@')) return trimmed;
  return trimmed.slice(lastSlash + 1).includes(':') ? trimmed : `${trimmed}:latest`;
}

export const NAME = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?::[0-9]+)?(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[\w][\w.-]{0,127})?$/;

export function settingsFrom(config: PluginConfig): PluginRecord['Settings'] {
  return {
    Mounts: (config.Mounts ?? []).map((m) => ({ ...m })),
    Env: (config.Env ?? []).filter((e) => e.Value !== null && e.Value !== undefined && e.Value !== '').map((e) => `${e.Name}=${e.Value}`),
    Args: [...(config.Args?.Value ?? [])],
    Devices: (config.Linux?.Devices ?? []).map((d) => ({ ...d })),
  };
}

export function checkConfig(raw: unknown): PluginConfig {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new InvalidParameter('invalid plugin config: config.json must hold a JSON object');
  const config = raw as PluginConfig;
  const iface = config.Interface;
  if (!iface || !Array.isArray(iface.Types) || !iface.Types.every((t) => typeof t === 'string')) throw new InvalidParameter('invalid plugin config: Interface.Types must be a list of strings');
  if (typeof iface.Socket !== 'string' || iface.Socket === '' || iface.Socket.includes('/')) throw new InvalidParameter('invalid plugin config: Interface.Socket must name a socket file');
  if (config.Entrypoint !== undefined && config.Entrypoint !== null && (!Array.isArray(config.Entrypoint) || !config.Entrypoint.every((a) => typeof a === 'string'))) {
    throw new InvalidParameter('invalid plugin config: Entrypoint must be a list of strings');
  }
  // Every field of the API's PluginConfig, with its zero value where the file leaves it out (as dockerd
  // decodes it into its struct).
  return {
    ...config,
    Description: config.Description ?? '',
    Documentation: config.Documentation ?? '',
    Interface: { ...iface, ProtocolScheme: iface.ProtocolScheme ?? '' },
    Entrypoint: config.Entrypoint ?? [],
    WorkDir: config.WorkDir ?? '',
    User: config.User ?? {},
    Network: { Type: config.Network?.Type ?? '' },
    Linux: { Capabilities: config.Linux?.Capabilities ?? [], AllowAllDevices: config.Linux?.AllowAllDevices ?? false, Devices: config.Linux?.Devices ?? [] },
    PropagatedMount: config.PropagatedMount ?? '',
    IpcHost: config.IpcHost ?? false,
    PidHost: config.PidHost ?? false,
    Mounts: config.Mounts ?? [],
    Env: (config.Env ?? []).map((e) => ({ ...e, Description: e.Description ?? '', Settable: e.Settable ?? [], Value: e.Value ?? '' })),
    Args: { Name: config.Args?.Name ?? '', Description: config.Args?.Description ?? '', Settable: config.Args?.Settable ?? [], Value: config.Args?.Value ?? [] },
  };
}

/** Whether an interface type (`docker.volumedriver/1.0`) provides a capability (`volumedriver`). */
export function typeImplements(type: string, capability: string): boolean {
  const m = /^(?:([a-z0-9.]+)\.)?([a-z0-9]+)\/([0-9.]+)$/i.exec(type);
  return !!m && m[2].toLowerCase() === capability.toLowerCase();
}
