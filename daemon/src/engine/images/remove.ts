/** Remove (untag, then delete what nothing holds, parents of a build included) and prune. */
import { Conflict, InvalidParameter } from '../../errors.js';
import { familiarString, type Reference } from '../reference.js';
import { shortId } from '../../util/ids.js';
import type { ImageRecord } from './store.js';
import type { DeleteRecord, Filters, ImageContext } from './context.js';
import { createdNano, labelsMatch, parseUntil } from './list.js';

/** Removes a layer chain's layers that no remaining image uses; returns the removed chain ids. */
async function releaseLayers(ctx: ImageContext, chainIds: string[]): Promise<{ removed: string[]; bytes: number }> {
  const used = new Set(ctx.store.all().flatMap((i) => i.chainIds));
  const removed: string[] = [];
  let bytes = 0;
  for (const chainId of [...chainIds].reverse()) {
    if (used.has(chainId)) continue;
    bytes += ctx.layers.info(chainId)?.diskSize ?? 0;
    await ctx.layers.remove(chainId);
    removed.push(chainId);
  }
  return { removed, bytes };
}

async function deleteImage(ctx: ImageContext, image: ImageRecord, records: DeleteRecord[]): Promise<number> {
  await ctx.store.remove(image.id);
  records.push({ Deleted: image.id });
  const { removed, bytes } = await releaseLayers(ctx, image.chainIds);
  for (const chainId of removed) records.push({ Deleted: chainId });
  ctx.events.publish('image', 'delete', image.id, { name: image.id });
  return bytes;
}

/**
 * Deletes an image and then, unless `prune` is false (noprune), its parents that nothing else holds:
 * untagged, without other children, unused by containers (the intermediate images of a build).
 */
async function deleteWithParents(ctx: ImageContext, image: ImageRecord, records: DeleteRecord[], prune: boolean): Promise<void> {
  await deleteImage(ctx, image, records);
  let parentId = image.meta.parent;
  while (prune && parentId) {
    const parent = ctx.store.get(parentId);
    if (!parent || ctx.store.refsOf(parent.id).length > 0 || ctx.hasChildren(parent.id) || ctx.containersUsing(parent.id).length > 0) return;
    await deleteImage(ctx, parent, records);
    parentId = parent.meta.parent;
  }
}

async function untag(ctx: ImageContext, image: ImageRecord, ref: Reference, records: DeleteRecord[]): Promise<void> {
  if (await ctx.store.deleteRef(ref)) {
    records.push({ Untagged: familiarString(ref) });
    ctx.events.publish('image', 'untag', image.id, { name: familiarString(ref) });
  }
}

export async function remove(ctx: ImageContext, name: string, opts: { force?: boolean; noprune?: boolean } = {}): Promise<DeleteRecord[]> {
  return ctx.exclusive(async () => {
    const { image, ref } = ctx.find(name);
    const records: DeleteRecord[] = [];
    const users = ctx.containersUsing(image.id);
    const refs = ctx.store.refsOf(image.id);
    const children = ctx.hasChildren(image.id);
    if (ref) {
      // Removing the last tag of a repository also removes that repository's digest references (RepoDigests), as Docker does.
      const digestRefs = ref.digest === undefined && !refs.some((r) => r.name === ref.name && r.tag !== undefined && r.tag !== ref.tag)
        ? refs.filter((r) => r.name === ref.name && r.digest !== undefined && r.tag === undefined)
        : [];
      if (refs.length - digestRefs.length > 1) {
        await untag(ctx, image, ref, records);
        for (const d of digestRefs) await untag(ctx, image, d, records);
        return records;
      }
      if (users.length > 0 && !opts.force) {
        throw new Conflict(`conflict: unable to remove repository reference "${familiarString(ref)}" (must force) - container ${shortId(users[0])} is using its referenced image ${shortId(image.id)}`);
      }
      await untag(ctx, image, ref, records);
      for (const d of digestRefs) await untag(ctx, image, d, records);
      if (users.length > 0 || children) return records;
      await deleteWithParents(ctx, image, records, !opts.noprune);
      return records;
    }
    if (children) throw new Conflict(`conflict: unable to delete ${shortId(image.id)} (cannot be forced) - image has dependent child images`);
    if (users.length > 0) {
      if (!opts.force) throw new Conflict(`conflict: unable to delete ${shortId(image.id)} (must be forced) - image is being used by container ${shortId(users[0])}`);
      // Forced while containers use it: the references go, the image stays for those containers.
      for (const r of refs) await untag(ctx, image, r, records);
      return records;
    }
    if (refs.length > 1 && !opts.force) {
      const repos = new Set(refs.map((r) => r.name));
      if (repos.size > 1) throw new Conflict(`conflict: unable to delete ${shortId(image.id)} (must be forced) - image is referenced in multiple repositories`);
    }
    for (const r of refs) await untag(ctx, image, r, records);
    await deleteWithParents(ctx, image, records, !opts.noprune);
    return records;
  });
}

export async function prune(ctx: ImageContext, filters: Filters): Promise<{ ImagesDeleted: DeleteRecord[]; SpaceReclaimed: number }> {
  const dangling = filters.get('dangling');
  let danglingOnly = true;
  if (dangling && dangling.length > 0) {
    const v = dangling[dangling.length - 1];
    if (v === 'false' || v === '0') danglingOnly = false;
    else if (v !== 'true' && v !== '1') throw new InvalidParameter(`invalid filter 'dangling=${v}'`);
  }
  const until = filters.get('until')?.map(parseUntil);
  return ctx.exclusive(async () => {
    const records: DeleteRecord[] = [];
    let reclaimed = 0;
    for (const image of ctx.store.all()) {
      const refs = ctx.store.refsOf(image.id);
      if (danglingOnly && refs.length > 0) continue;
      if (ctx.containersUsing(image.id).length > 0 || ctx.hasChildren(image.id)) continue;
      if (until && !until.every((u) => createdNano(image) <= u)) continue;
      if (!labelsMatch(image.config.config?.Labels ?? {}, filters.get('label'), filters.get('label!'))) continue;
      for (const r of refs) await untag(ctx, image, r, records);
      reclaimed += await deleteImage(ctx, image, records);
    }
    if (records.length > 0) ctx.events.publish('image', 'prune', '', { reclaimed: String(reclaimed) });
    return { ImagesDeleted: records, SpaceReclaimed: reclaimed };
  });
}

