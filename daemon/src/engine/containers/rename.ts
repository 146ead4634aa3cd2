/** Rename: the record, the names its endpoints answer to, and the legacy links that name it. */
import { Conflict, InvalidParameter } from '../../errors.js';
import type { ContainerContext } from './context.js';
import { renameInLinks } from './linking.js';
import { validateName } from './validate.js';

export async function rename(ctx: ContainerContext, ref: string, newNameParam: string): Promise<void> {
  if (!newNameParam) throw new InvalidParameter('query parameter name is required: give the new name');
  const newName = validateName(newNameParam);
  const record = ctx.store.get(ref);
  const oldName = record.Name;
  if (oldName === newName) throw new Conflict(`Renaming a container with the same name as its current name`);
  await ctx.withLock(record.Id, async () => {
    ctx.store.rename(record, newName);
    try {
      await ctx.store.save(record);
    } catch (err) {
      ctx.store.rename(record, oldName);
      throw err;
    }
    await ctx.networking.renamed(record.Id, newName);
    await renameInLinks(ctx, oldName, record.Name);
    // A running container's endpoints now answer to the new name: its record shows their DNSNames.
    if (record.State.Running) {
      const networks = ctx.networking.containerNetworks(record.Id);
      if (Object.keys(networks).length > 0) {
        record.Networks = networks;
        await ctx.store.save(record);
      }
    }
  });
  ctx.publish(record, 'rename', { oldName });
}

