/**
 * Legacy links (`--link name:alias`, HostConfig.Links) of containers on the default bridge, as Docker has
 * them: checked at create and kept as `/child:/parent/alias`; at start the linking container gets the linked
 * one's variables (ALIAS_NAME, ALIAS_ENV_*, ALIAS_PORT_*) and an /etc/hosts line; `DELETE
 * /containers/parent/alias?link=1` takes one away. On user-defined networks links are the endpoint's
 * (EndpointSettings.Links) and the embedded DNS answers them (networks/service.ts).
 */
import { InvalidParameter } from '../../errors.js';

/** A link as Docker reads it: `name`, `name:alias`, or `/name:/parent/alias` as inspect shows it. */
export function parseLink(text: string, field = 'HostConfig.Links'): { name: string; alias: string } {
  if (typeof text !== 'string' || text === '') throw new InvalidParameter(`invalid ${field}: empty string specified for links`);
  const parts = text.split(':');
  if (parts.length > 2) throw new InvalidParameter(`invalid ${field}: bad format for links: ${text}`);
  if (parts.length === 1) return { name: text.replace(/^\//, ''), alias: text.replace(/^\//, '') };
  const [name, alias] = parts;
  if (name === '' || alias === '') throw new InvalidParameter(`invalid ${field}: bad format for links: ${text}`);
  return { name: name.replace(/^\//, ''), alias: alias.split('/').pop() || alias };
}

/** The stored (and shown) form of a legacy link: `/child:/parent/alias`. */
export function linkEntry(childName: string, parentName: string, alias: string): string {
  return `/${childName.replace(/^\//, '')}:/${parentName.replace(/^\//, '')}/${alias}`;
}

/** What the linking container learns of a linked one. */
export interface LinkedContainer {
  /** `/parent/alias`. */
  linkName: string;
  /** The linked container's address on the default bridge. */
  address: string;
  env: readonly string[];
  exposedPorts: readonly string[];
}

/**
 * The variables a link gives (Docker's links.ToEnv): `ALIAS_PORT` for the first port, for each exposed port
 * `ALIAS_PORT_<n>_<PROTO>` with `_ADDR`, `_PORT`, `_PROTO`, and `_START`/`_END` over runs of consecutive
 * ports; `ALIAS_NAME`; `ALIAS_ENV_<VAR>` for the linked container's variables but HOME and PATH.
 */
export function linkEnv(link: LinkedContainer): string[] {
  const alias = link.linkName.split('/').pop()!.toUpperCase().replace(/-/g, '_');
  const ports = link.exposedPorts
    .map((p) => {
      const [num, proto = 'tcp'] = p.split('/');
      return { num: Number(num), proto: proto.toLowerCase() };
    })
    .filter((p) => Number.isInteger(p.num) && p.num > 0)
    // TCP first, then by protocol, then by number: runs of ports come together.
    .sort((a, b) => (a.proto === b.proto ? a.num - b.num : a.proto === 'tcp' ? -1 : b.proto === 'tcp' ? 1 : a.proto.localeCompare(b.proto)));
  const env: string[] = [];
  const ip = link.address;
  let start = ports[0];
  let end = ports[0];
  ports.forEach((p, i) => {
    if (i === 0) env.push(`${alias}_PORT=${p.proto}://${ip}:${p.num}`);
    const prefix = `${alias}_PORT_${p.num}_${p.proto.toUpperCase()}`;
    env.push(`${prefix}=${p.proto}://${ip}:${p.num}`, `${prefix}_ADDR=${ip}`, `${prefix}_PORT=${p.num}`, `${prefix}_PROTO=${p.proto}`);
    if (i > 0 && p.num === end.num + 1 && p.proto === end.proto) {
      end = p;
      if (i < ports.length - 1) return;
    }
    if (end !== start) {
      const rangePrefix = `${alias}_PORT_${start.num}_${start.proto.toUpperCase()}`;
      env.push(
        `${rangePrefix}_START=${start.proto}://${ip}:${start.num}`,
        `${rangePrefix}_PORT_START=${start.num}`,
        `${rangePrefix}_END=${end.proto}://${ip}:${end.num}`,
        `${rangePrefix}_PORT_END=${end.num}`,
      );
    }
    start = p;
    end = p;
  });
  env.push(`${alias}_NAME=${link.linkName}`);
  for (const variable of link.env) {
    const eq = variable.indexOf('=');
    if (eq < 0) continue;
    const name = variable.slice(0, eq);
    if (name === 'HOME' || name === 'PATH') continue;
    env.push(`${alias}_ENV_${name}=${variable.slice(eq + 1)}`);
  }
  return env;
}
