/**
 * What a request of the renderer would grant beyond a default container's isolation, in words for the user:
 * the bridge lets such requests through only after the user allowed them in the app's own dialog.
 */
import { BridgeError } from './bridge-error.js';

/** Values of a JSON object's key, its spelling's case aside (a Go engine decodes `privileged` as Privileged). */
export function valuesOf(obj: unknown, key: string): unknown[] {
  if (!obj || typeof obj !== 'object' || Array.isArray(obj)) return [];
  const lower = key.toLowerCase();
  return Object.entries(obj as Record<string, unknown>)
    .filter(([k]) => k.toLowerCase() === lower)
    .map(([, v]) => v);
}
const objectsOf = (obj: unknown, key: string) => valuesOf(obj, key).filter((v) => v && typeof v === 'object');
const listsOf = (obj: unknown, key: string) => valuesOf(obj, key).flatMap((v) => (Array.isArray(v) ? (v as unknown[]) : []));
const stringsOf = (obj: unknown, key: string) => valuesOf(obj, key).filter((v): v is string => typeof v === 'string');
const isTrue = (obj: unknown, key: string) => valuesOf(obj, key).some((v) => v === true);

const HOST_NAMESPACES: Array<[string, string]> = [
  ['PidMode', 'process'],
  ['IpcMode', 'IPC'],
  ['UTSMode', 'UTS (host name)'],
  ['NetworkMode', 'network'],
  ['UsernsMode', 'user'],
  ['CgroupnsMode', 'cgroup'],
];

/** What a container's HostConfig grants beyond a default container: privileges, host namespaces, host files. */
function hostConfigAccess(hostConfig: unknown): string[] {
  const out: string[] = [];
  if (isTrue(hostConfig, 'Privileged')) out.push('runs privileged: every capability and every device of the host');
  for (const bind of listsOf(hostConfig, 'Binds')) {
    if (typeof bind !== 'string') continue;
    const [source, target, mode] = bind.split(':');
    if (source?.startsWith('/')) out.push(`mounts the host's ${source} at ${target ?? '?'}${/\bro\b/.test(mode ?? '') ? ' (read-only)' : ' (read-write)'}`);
  }
  for (const mount of listsOf(hostConfig, 'Mounts')) {
    const type = stringsOf(mount, 'Type')[0] ?? '';
    const source = stringsOf(mount, 'Source')[0] ?? '';
    const target = stringsOf(mount, 'Target')[0] ?? '?';
    if (type.toLowerCase() === 'bind') out.push(`mounts the host's ${source || '?'} at ${target}${isTrue(mount, 'ReadOnly') ? ' (read-only)' : ' (read-write)'}`);
    for (const options of objectsOf(objectsOf(objectsOf(mount, 'VolumeOptions')[0], 'DriverConfig')[0], 'Options')) {
      const device = stringsOf(options, 'device').find((d) => d.startsWith('/'));
      if (device) out.push(`mounts the host's ${device} at ${target} (through a volume's options)`);
    }
  }
  for (const cap of listsOf(hostConfig, 'CapAdd')) if (typeof cap === 'string') out.push(`adds the capability ${cap}`);
  if (listsOf(hostConfig, 'Devices').length || listsOf(hostConfig, 'DeviceRequests').length || listsOf(hostConfig, 'DeviceCgroupRules').length) out.push("uses the host's devices");
  for (const [key, what] of HOST_NAMESPACES) if (stringsOf(hostConfig, key).some((m) => m.toLowerCase() === 'host')) out.push(`shares the host's ${what} namespace`);
  // Another container's volumes come with its binds: what they are is not known here.
  for (const from of listsOf(hostConfig, 'VolumesFrom')) if (typeof from === 'string') out.push(`takes the volumes and host mounts of ${from}`);
  for (const opt of listsOf(hostConfig, 'SecurityOpt')) {
    if (typeof opt !== 'string') continue;
    if (/unconfined/i.test(opt) || /^label[=:]disable$/i.test(opt)) out.push(`turns off a confinement (${opt})`);
    // A profile of its own may allow every system call: as good as none.
    else if (/^seccomp[=:]/i.test(opt)) out.push('replaces the default seccomp profile with its own');
  }
  return out;
}

/**
 * What a service's tasks would get beyond a default container's isolation (the ContainerSpec of a service
 * create or update: the app's scale sends the spec back whole, and page script could put anything in it).
 */
function containerSpecAccess(spec: unknown): string[] {
  const out = hostConfigAccess({ Mounts: listsOf(spec, 'Mounts') });
  for (const cap of listsOf(spec, 'CapabilityAdd')) if (typeof cap === 'string') out.push(`adds the capability ${cap}`);
  for (const privileges of objectsOf(spec, 'Privileges')) {
    const seccomp = stringsOf(objectsOf(privileges, 'Seccomp')[0], 'Mode')[0]?.toLowerCase();
    if (seccomp === 'unconfined' || seccomp === 'custom') out.push(`turns off or replaces the seccomp profile (${seccomp})`);
    if (stringsOf(objectsOf(privileges, 'AppArmor')[0], 'Mode')[0]?.toLowerCase() === 'disabled') out.push('turns off AppArmor');
  }
  return out;
}

/**
 * What a request would give a container beyond a default one's isolation, in words for the user; empty
 * when nothing. Creates of containers (their HostConfig), privileged execs, local volumes bound to a host
 * folder and plugin installs (their privileges) are looked at; a body that is not JSON where one is looked at
 * is refused (400).
 */
export function hostAccessOf(method: string, path: string, body: string | undefined): string[] {
  const route = path.split('?')[0]!.replace(/^\/v1\.\d+/, '');
  // Without a body too: the engine's defaults listen on every interface.
  if (method === 'POST' && route === '/swarm/init') return swarmInitAccess(method, route, body?.trim() ? body : '{}');
  if (method !== 'POST' || body === undefined || body.trim() === '') return [];
  if (route === '/plugins/pull') return pluginPrivileges(method, route, body);
  const looked = /^\/containers\/create$/.test(route)
    ? 'container'
    : /^\/containers\/[^/]+\/exec$/.test(route)
      ? 'exec'
      : route === '/volumes/create'
        ? 'volume'
        : /^\/services\/(create|[^/]+\/update)$/.test(route)
          ? 'service'
          : undefined;
  if (!looked) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    throw new BridgeError(400, `the body of ${method} ${route} is not JSON`);
  }
  if (looked === 'container') return objectsOf(parsed, 'HostConfig').flatMap(hostConfigAccess);
  if (looked === 'service') return objectsOf(objectsOf(parsed, 'TaskTemplate')[0], 'ContainerSpec').flatMap(containerSpecAccess);
  if (looked === 'exec') return isTrue(parsed, 'Privileged') ? ['runs a privileged command in the container'] : [];
  return objectsOf(parsed, 'DriverOpts').flatMap((opts) => stringsOf(opts, 'device').filter((d) => d.startsWith('/')).map((d) => `makes a volume of the host's ${d}`));
}

/**
 * The privileges a plugin install grants (the body of POST /plugins/pull: `[{Name, Description, Value}]`): a
 * plugin runs as root with what it was granted, so every privilege but an isolated network counts.
 */
function pluginPrivileges(method: string, route: string, body: string): string[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    throw new BridgeError(400, `the body of ${method} ${route} is not JSON`);
  }
  if (!Array.isArray(parsed)) throw new BridgeError(400, `the body of ${method} ${route} must be the list of privileges granted`);
  const out: string[] = [];
  for (const privilege of parsed) {
    const name = stringsOf(privilege, 'Name')[0] ?? '?';
    const values = listsOf(privilege, 'Value').filter((v): v is string => typeof v === 'string');
    if (name === 'network' && values.every((v) => v === 'none')) continue;
    out.push(`installs a plugin granted ${name}${values.length ? `: ${values.join(', ')}` : ''}`);
  }
  return out;
}


/**
 * `swarm init` makes this engine a manager that other machines may join: its swarm port listens on the
 * address asked (every interface by default, as `docker swarm init` does).
 */
function swarmInitAccess(method: string, route: string, body: string): string[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    throw new BridgeError(400, `the body of ${method} ${route} is not JSON`);
  }
  const listen = stringsOf(parsed, 'ListenAddr')[0] || '0.0.0.0:2377';
  return [`makes this engine a swarm manager, its swarm port listening on ${listen} for other machines to join`];
}
