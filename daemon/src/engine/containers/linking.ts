/**
 * What legacy links (links.ts) do to containers: checked at create, their /etc/hosts lines and variables given
 * at start, followed when a container is renamed or starts again, and taken away with `docker rm --link`.
 */
import { log } from '../../util/log.js';
import { Conflict, errorMessage, InvalidParameter, NotFound } from '../../errors.js';
import type { ContainerContext } from './context.js';
import { replaceHostsEntry, type LinkEntry } from './files.js';
import { linkEntry, linkEnv, parseLink } from './links.js';
import type { ContainerRecord } from './model.js';

/**
 * HostConfig.Links at create, as Docker checks them: not with host or container networking; on a
 * user-defined network they are left to the endpoint's Links (the embedded DNS answers them); otherwise each
 * names an existing container (following `container:` networking to the namespace's owner) that is not on
 * the host's network, and is kept as `/child:/parent/alias`. An alias given twice keeps its first link.
 */
export function checkLinks(ctx: ContainerContext, hc: Record<string, any>, parentName: string): string[] | null {
  const given = (hc.Links as string[] | null | undefined) ?? [];
  if (given.length === 0) return null;
  const mode = (hc.NetworkMode as string | undefined) || 'default';
  if (mode === 'host') throw new InvalidParameter("conflicting options: host type networking can't be used with links. This would result in undefined behavior");
  if (mode.startsWith('container:')) throw new InvalidParameter("conflicting options: container type network can't be used with links. This would result in undefined behavior");
  if (!['default', 'bridge', 'none'].includes(mode)) return null;
  const lookup = (ref: string) => {
    try {
      return ctx.store.get(ref);
    } catch (err) {
      // Not a 404: the docker CLI would take it for a missing image and try to pull it.
      if (err instanceof NotFound) throw new InvalidParameter(`could not get container for ${ref}: No such container: ${ref}`, { cause: err });
      throw err;
    }
  };
  const out: string[] = [];
  const aliases = new Set<string>();
  for (const text of given) {
    const { name, alias } = parseLink(text);
    let child = lookup(name);
    for (let hops = 0; String(child.HostConfig.NetworkMode ?? '').startsWith('container:') && hops < 16; hops++) {
      child = lookup(String(child.HostConfig.NetworkMode).slice('container:'.length));
    }
    if (child.HostConfig.NetworkMode === 'host') throw new InvalidParameter("conflicting options: host type networking can't be used with links. This would result in undefined behavior");
    if (aliases.has(alias)) continue;
    aliases.add(alias);
    out.push(linkEntry(child.Name, parentName, alias));
  }
  return out;
}

/**
 * What HostConfig.Links give a container that joins the default bridge: for each linked container (which
 * must run, on the default bridge too) an /etc/hosts line (its address under the alias, its hostname and
 * its name) and the link's variables. Nothing for a container that is not on the default bridge.
 */
export function legacyLinks(ctx: ContainerContext, record: ContainerRecord, onBridge: boolean): { hosts: LinkEntry[]; env: string[] } {
  const hosts: LinkEntry[] = [];
  const env: string[] = [];
  const links = (record.HostConfig.Links as string[] | null) ?? [];
  if (links.length === 0 || !onBridge) return { hosts, env };
  for (const link of links) {
    const { name, alias } = parseLink(link);
    const linkName = `${record.Name}/${alias}`;
    const other = ctx.store.find(name);
    // A linked container removed since is no more running than a stopped one (and not this start's 404).
    if (!other?.State.Running) throw new Conflict(`Cannot link to a non running container: ${other?.Name ?? `/${name}`} AS ${linkName}`);
    const address = other.Networks.bridge?.IPAddress;
    if (!address) throw new InvalidParameter(`Cannot link to ${other.Name}, as it does not belong to the default network`);
    const names = [alias, other.Config.Hostname || other.Id.slice(0, 12)];
    if (alias !== other.Name.slice(1)) names.push(other.Name.slice(1));
    hosts.push({ address, names });
    const v6 = other.Networks.bridge?.GlobalIPv6Address;
    if (v6) hosts.push({ address: v6, names });
    env.push(...linkEnv({ linkName, address, env: other.Config.Env ?? [], exposedPorts: Object.keys(other.Config.ExposedPorts ?? {}) }));
  }
  return { hosts, env };
}

/**
 * The link variables of a running container, for its exec processes (as Docker gives them); none when a
 * linked container no longer runs.
 */
export function runningLinkEnv(ctx: ContainerContext, record: ContainerRecord): string[] {
  try {
    return legacyLinks(ctx, record, record.Networks.bridge !== undefined).env;
  } catch {
    return [];
  }
}

/**
 * The running containers that link to `child` see its new address on the default bridge in their
 * /etc/hosts (as Docker updates its parents' files when a linked container starts again).
 */
export async function updateLinkParents(ctx: ContainerContext, child: ContainerRecord): Promise<void> {
  const address = child.Networks.bridge?.IPAddress;
  if (!address) return;
  for (const parent of ctx.store.all()) {
    if (parent.Id === child.Id || !parent.State.Running) continue;
    for (const link of (parent.HostConfig.Links as string[] | null) ?? []) {
      const { name, alias } = parseLink(link);
      if (name !== child.Name.slice(1)) continue;
      await replaceHostsEntry(ctx.deps.etcFiles, parent.HostsPath, alias, address).catch((err) =>
        log.warn('cannot update the hosts file of a linked container', { id: parent.Id, error: errorMessage(err) }),
      );
    }
  }
}

/**
 * Legacy links follow a renamed container, as Docker's do: those to it (as the linked container) and its
 * own (as the parent) name it anew.
 */
export async function renameInLinks(ctx: ContainerContext, oldName: string, newName: string): Promise<void> {
  const bare = (n: string) => n.replace(/^\//, '');
  for (const c of ctx.store.all()) {
    const links = (c.HostConfig.Links as string[] | null) ?? [];
    let changed = false;
    const next = links.map((l) => {
      const { name, alias } = parseLink(l);
      const child = name === bare(oldName) ? newName : `/${name}`;
      const entry = linkEntry(child, c.Name, alias);
      if (entry !== l) changed = true;
      return entry;
    });
    if (!changed) continue;
    c.HostConfig.Links = next;
    await ctx.store.save(c).catch((err) => log.warn('cannot save the renamed links of a container', { id: c.Id, error: errorMessage(err) }));
  }
}

/**
 * Removes the legacy link `parent/alias` (DELETE /containers/parent/alias?link=1): the parent's
 * configuration forgets it, and a running parent's /etc/hosts loses its line.
 */
export async function removeLink(ctx: ContainerContext, ref: string): Promise<void> {
  const full = ref.replace(/^\/+/, '');
  const slash = full.lastIndexOf('/');
  if (slash < 0) {
    ctx.store.get(full);
    throw new Conflict('Conflict, cannot remove the default link name of the container');
  }
  const parentName = full.slice(0, slash);
  const alias = full.slice(slash + 1);
  const parent = ctx.store.all().find((c) => c.Name === `/${parentName}`);
  const has = (c: ContainerRecord) => ((c.HostConfig.Links as string[] | null) ?? []).some((l) => parseLink(l).alias === alias);
  if (!parent || !has(parent)) throw new NotFound(`No such container: ${full}`);
  await ctx.withLock(parent.Id, async () => {
    const kept = ((parent.HostConfig.Links as string[] | null) ?? []).filter((l) => parseLink(l).alias !== alias);
    parent.HostConfig.Links = kept.length > 0 ? kept : null;
    await ctx.store.save(parent);
    if (parent.State.Running) {
      await replaceHostsEntry(ctx.deps.etcFiles, parent.HostsPath, alias, undefined).catch((err) =>
        log.warn('cannot update the hosts file of a container', { id: parent.Id, error: errorMessage(err) }),
      );
    }
  });
}

