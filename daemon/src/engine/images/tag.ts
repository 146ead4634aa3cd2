/** Tag: a reference given to an image (`latest` unless the tag says otherwise). */
import { InvalidParameter } from '../../errors.js';
import { familiarString, parseReference, validateTag } from '../reference.js';
import { nowNano, rfc3339Nano } from '../../util/json.js';
import type { ImageContext } from './context.js';

export async function tag(ctx: ImageContext, name: string, repo: string, tag: string | undefined): Promise<void> {
  if (!repo) throw new InvalidParameter('repository name is required to tag an image');
  const { image } = ctx.find(name);
  let ref = parseReference(repo);
  if (ref.digest) throw new InvalidParameter('refusing to create a tag with a digest reference');
  if (tag) {
    if (ref.tag !== undefined) throw new InvalidParameter(`cannot give a tag both in repo (${repo}) and in tag (${tag})`);
    validateTag(tag);
    ref = { ...ref, tag };
  }
  if (ref.tag === undefined) ref = { ...ref, tag: 'latest' };
  await ctx.exclusive(async () => {
    await ctx.store.setRef(ref, image.id);
    await ctx.store.setLastTagTime(image.id, rfc3339Nano(nowNano()));
  });
  ctx.events.publish('image', 'tag', image.id, { name: familiarString(ref) });
}

