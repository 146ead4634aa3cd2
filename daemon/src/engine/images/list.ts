/** List, inspect and history of images, with the filters of list and prune. */
import { matchLabels, matchNotLabels } from '../filters.js';
import { InvalidParameter } from '../../errors.js';
import { familiarString, matchReferencePattern } from '../reference.js';
import { nowNano, parseTimestamp, ZERO_TIME } from '../../util/json.js';
import type { ImageRecord } from './store.js';
import type { ImageRunConfig } from './types.js';
import { ARCH, type Filters, type ImageContext } from './context.js';

/** Seconds since the epoch of an RFC 3339 time (0 when absent or unreadable). */
function unixSeconds(time: string | undefined): number {
  if (!time) return 0;
  const nano = parseTimestamp(time);
  return nano === undefined ? 0 : Number(nano / 1_000_000_000n);
}

export function createdNano(image: ImageRecord): bigint {
  return (image.config.created && parseTimestamp(image.config.created)) || 0n;
}

const DURATION_UNITS: Record<string, number> = { ns: 1e-9, us: 1e-6, 'µs': 1e-6, ms: 1e-3, s: 1, m: 60, h: 3600 };

/** `until` values: a timestamp (Unix or RFC 3339), a date, or a Go duration before now ("10m", "1h30m"). */
export function parseUntil(value: string): bigint {
  const ts = parseTimestamp(value);
  if (ts !== undefined) return ts;
  const date = /^(\d{4}-\d{2}-\d{2})(?:T(\d{2}:\d{2}(?::\d{2})?))?$/.exec(value);
  if (date) {
    const ms = Date.parse(`${date[1]}T${date[2] ?? '00:00:00'}`);
    if (!Number.isNaN(ms)) return BigInt(ms) * 1_000_000n;
  }
  if (/^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/.test(value)) {
    let seconds = 0;
    for (const m of value.matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g)) seconds += Number(m[1]) * DURATION_UNITS[m[2]];
    return nowNano() - BigInt(Math.round(seconds * 1e9));
  }
  throw new InvalidParameter(`invalid filter 'until=${value}': expected a timestamp, a date or a duration such as 10m`);
}

/**
 * label filters: `key`, `key=value` (every one must match, as Docker's key-value lists); negated (`label!`)
 * as the prune endpoints accept. Only the image's own labels count (never an object's inherited keys).
 */
export function labelsMatch(labels: Readonly<Record<string, string>>, wanted: string[] | undefined, negated: string[] | undefined): boolean {
  return matchLabels(wanted, labels) && matchNotLabels(negated, labels);
}

/** The full container-config shape that image inspect shows (api/compat trims it per version). */
function fullRunConfig(c: (ImageRunConfig & Record<string, unknown>) | undefined | null): Record<string, unknown> {
  const config = c ?? {};
  const out: Record<string, unknown> = {
    Hostname: (config.Hostname as string | undefined) ?? '',
    Domainname: (config.Domainname as string | undefined) ?? '',
    User: config.User ?? '',
    AttachStdin: false,
    AttachStdout: false,
    AttachStderr: false,
  };
  if (config.ExposedPorts && Object.keys(config.ExposedPorts).length > 0) out.ExposedPorts = config.ExposedPorts;
  Object.assign(out, {
    Tty: false,
    OpenStdin: false,
    StdinOnce: false,
    Env: config.Env ?? null,
    Cmd: config.Cmd ?? null,
  });
  if (config.Healthcheck) out.Healthcheck = config.Healthcheck;
  if (config.ArgsEscaped) out.ArgsEscaped = true;
  Object.assign(out, {
    Image: (config.Image as string | undefined) ?? '',
    Volumes: config.Volumes ?? null,
    WorkingDir: config.WorkingDir ?? '',
    Entrypoint: config.Entrypoint ?? null,
    OnBuild: config.OnBuild ?? null,
    Labels: config.Labels ?? null,
  });
  if (config.StopSignal) out.StopSignal = config.StopSignal;
  if (config.Shell) out.Shell = config.Shell;
  // Unset lists and maps are left out rather than null: the published schemas type them as array/object.
  for (const [key, value] of Object.entries(out)) if (value === null) delete out[key];
  return out;
}


export function list(ctx: ImageContext, opts: { all?: boolean; filters: Filters; sharedSize?: boolean }): Record<string, unknown>[] {
  const f = opts.filters;
  const dangling = f.get('dangling');
  let danglingOnly: boolean | undefined;
  if (dangling && dangling.length > 0) {
    const v = dangling[dangling.length - 1];
    if (v === 'true' || v === '1') danglingOnly = true;
    else if (v === 'false' || v === '0') danglingOnly = false;
    else throw new InvalidParameter(`invalid filter 'dangling=${v}'`);
  }
  const before = f.get('before')?.map((r) => createdNano(ctx.find(r).image));
  const since = f.get('since')?.map((r) => createdNano(ctx.find(r).image));
  const until = f.get('until')?.map(parseUntil);
  const patterns = f.get('reference');
  const labels = f.get('label');
  const out: Array<{ created: bigint; summary: Record<string, unknown> }> = [];
  for (const image of ctx.store.all()) {
    const refs = ctx.store.refsOf(image.id);
    // Intermediate images (untagged parents of others) show only with all=1, and are never dangling.
    const intermediate = refs.length === 0 && ctx.hasChildren(image.id);
    if (intermediate && (!opts.all || danglingOnly === true)) continue;
    if (danglingOnly === true && refs.length > 0) continue;
    if (danglingOnly === false && refs.length === 0) continue;
    const created = createdNano(image);
    if (before && !before.every((b) => created < b)) continue;
    if (since && !since.every((s) => created > s)) continue;
    if (until && !until.every((u) => created <= u)) continue;
    if (labels && !labelsMatch(image.config.config?.Labels ?? {}, labels, undefined)) continue;
    let tags = ctx.tagsOf(image.id);
    if (patterns) {
      const matching = refs.filter((r) => patterns.some((p) => matchReferencePattern(p, r)));
      if (matching.length === 0) continue;
      // Docker shows only the tags that matched the pattern.
      tags = matching.filter((r) => r.tag !== undefined).map((r) => familiarString(r)).sort();
    }
    const size = ctx.sizeOf(image);
    const users = ctx.users ? ctx.containersUsing(image.id).length : -1;
    out.push({
      created,
      summary: {
        Id: image.id,
        ParentId: image.meta.parent ?? '',
        RepoTags: tags,
        RepoDigests: ctx.digestsOf(image.id),
        Created: unixSeconds(image.config.created),
        Size: size,
        SharedSize: -1,
        VirtualSize: size,
        Labels: image.config.config?.Labels ?? {},
        Containers: users,
      },
    });
  }
  out.sort((a, b) => (a.created === b.created ? 0 : a.created > b.created ? -1 : 1));
  return out.map((o) => o.summary);
}

export function inspect(ctx: ImageContext, name: string): Record<string, unknown> {
  const { image } = ctx.find(name);
  const c = image.config;
  const size = ctx.sizeOf(image);
  const dirs = ctx.layers.diffDir ? image.chainIds.map((id) => ctx.layers.diffDir!(id)) : [];
  const graphData: Record<string, string> = {};
  if (dirs.length > 0) {
    const top = dirs[dirs.length - 1];
    if (dirs.length > 1) graphData.LowerDir = dirs.slice(0, -1).reverse().join(':');
    graphData.MergedDir = top.replace(/\/diff$/, '/merged');
    graphData.UpperDir = top;
    graphData.WorkDir = top.replace(/\/diff$/, '/work');
  }
  const out: Record<string, unknown> = {
    Id: image.id,
    RepoTags: ctx.tagsOf(image.id),
    RepoDigests: ctx.digestsOf(image.id),
    Parent: image.meta.parent ?? '',
    Comment: c.comment ?? '',
  };
  if (c.created) out.Created = c.created;
  Object.assign(out, {
    Container: c.container ?? '',
    ContainerConfig: fullRunConfig(c.container_config as ImageRunConfig & Record<string, unknown>),
    DockerVersion: c.docker_version ?? '',
    Author: c.author ?? '',
    Config: fullRunConfig(c.config),
    Architecture: c.architecture ?? ARCH,
  });
  if (c.variant) out.Variant = c.variant;
  out.Os = c.os ?? 'linux';
  if (c['os.version']) out.OsVersion = c['os.version'];
  Object.assign(out, {
    Size: size,
    VirtualSize: size,
    GraphDriver: { Name: 'overlay2', Data: graphData },
    RootFS: { Type: 'layers', Layers: [...image.diffIds] },
    Metadata: { LastTagTime: image.meta.lastTagTime ?? ZERO_TIME },
  });
  return out;
}

export function history(ctx: ImageContext, name: string): Record<string, unknown>[] {
  const { image } = ctx.find(name);
  const entries: Record<string, unknown>[] = [];
  const history = image.config.history && image.config.history.length > 0
    ? image.config.history
    : image.chainIds.map(() => ({ created: image.config.created, created_by: '', comment: '' }));
  let layerIndex = 0;
  for (const h of history) {
    let size = 0;
    if (!('empty_layer' in h && h.empty_layer)) {
      const chainId = image.chainIds[layerIndex++];
      size = chainId ? ctx.layers.info(chainId)?.diskSize ?? 0 : 0;
    }
    entries.push({
      Id: '<missing>',
      Created: unixSeconds(h.created),
      CreatedBy: h.created_by ?? '',
      Tags: [],
      Size: size,
      Comment: h.comment ?? '',
    });
  }
  entries.reverse();
  if (entries.length > 0) {
    entries[0].Id = image.id;
    const tags = ctx.tagsOf(image.id);
    entries[0].Tags = tags;
  }
  return entries;
}


/** Disk use of images for /system/df: each layer counted once; reclaimable is what no image in use holds. */
export function diskUsage(ctx: ImageContext): { layersSize: number; reclaimable: number; items: Array<Record<string, unknown> & { Size: number; Containers: number }> } {
  const items = list(ctx, { all: true, filters: new Map() }) as Array<Record<string, unknown> & { Size: number; Containers: number }>;
  const inUse = new Set(items.filter((i) => i.Containers > 0).map((i) => i.Id as string));
  const all = new Set<string>();
  const held = new Set<string>();
  for (const image of ctx.store.all()) {
    for (const chainId of image.chainIds) {
      all.add(chainId);
      if (inUse.has(image.id)) held.add(chainId);
    }
  }
  const size = (ids: Set<string>) => [...ids].reduce((sum, id) => sum + (ctx.layers.info(id)?.diskSize ?? 0), 0);
  return { layersSize: size(all), reclaimable: size(all) - size(held), items };
}
