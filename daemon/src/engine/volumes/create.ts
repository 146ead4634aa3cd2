/** Create: a volume of the local driver (its folder and record) or of a plugin's driver (which makes it). */
import { newId } from '../../util/ids.js';
import { Conflict, EngineError, errorMessage, InvalidParameter } from '../../errors.js';
import { createdAtNow, type VolumeContext } from './context.js';
import { ANONYMOUS_LABEL, type VolumeRecord, type VolumeView } from './types.js';
import { checkDriver, isStringMap, validateLocalOptions, validateVolumeName, type CreateVolumeRequest } from './validate.js';

/**
 * Creates a volume (a generated name when none is given). A name that exists already answers that volume,
 * as Docker does. Validates everything before anything is written; a failed write leaves nothing behind.
 */
export async function create(ctx: VolumeContext, request: CreateVolumeRequest): Promise<{ volume: VolumeView; created: boolean }> {
  if (request.Name !== undefined && request.Name !== null && typeof request.Name !== 'string') throw new InvalidParameter('Name must be a string');
  const name = (request.Name as string | undefined) || newId();
  validateVolumeName(name);
  const anonymous = !request.Name;
  const given = checkDriver(request.Driver);
  const driverName = given === undefined ? undefined : (ctx.drivers.canonical?.(given) ?? given);
  if (request.DriverOpts !== undefined && request.DriverOpts !== null && !isStringMap(request.DriverOpts)) {
    throw new InvalidParameter('DriverOpts must be a map of strings');
  }
  if (request.Labels !== undefined && request.Labels !== null && !isStringMap(request.Labels)) throw new InvalidParameter('Labels must be a map of strings');
  const options = { ...((request.DriverOpts as Record<string, string> | null | undefined) ?? {}) };
  const labels = { ...((request.Labels as Record<string, string> | null | undefined) ?? {}) };
  // As Docker: a volume created without a name is anonymous (a later prune, from API 1.42, removes it).
  if (anonymous) labels[ANONYMOUS_LABEL] = '';
  return ctx.withLock(name, async () => {
    const existing = ctx.volumes.get(name);
    if (existing) {
      const asked = driverName ?? (typeof request.Driver === 'string' && request.Driver !== '' ? 'local' : undefined);
      if (asked !== undefined && asked !== existing.Driver) {
        throw new Conflict(`create ${name}: volume name must be unique: driver '${existing.Driver}' already has volume '${name}'`);
      }
      return { volume: ctx.view(existing), created: false };
    }
    if (driverName !== undefined) {
      // A plugin's driver: it makes the volume; the record here keeps its name, driver, labels and options.
      const volume: VolumeRecord = { Name: name, Driver: driverName, CreatedAt: createdAtNow(), Labels: labels, Options: options };
      const driver = await ctx.driverOf(volume, 'create');
      volume.Driver = driver.name;
      await ctx.remember(driver);
      try {
        await driver.create(name, options);
      } catch (err) {
        throw new EngineError(`create ${name}: ${errorMessage(err)}`, { cause: err });
      }
      try {
        await ctx.record(volume);
      } catch (err) {
        await driver.remove(name).catch(() => undefined);
        throw err;
      }
      ctx.events.publish('volume', 'create', name, { driver: volume.Driver });
      return { volume: ctx.view(volume), created: true };
    }
    await validateLocalOptions(options, ctx.host);
    const volume: VolumeRecord = { Name: name, Driver: 'local', CreatedAt: createdAtNow(), Labels: labels, Options: options };
    // The content's folder first, on the Host: a crash before the record leaves an empty folder, which init() removes.
    const dir = ctx.dir(name);
    await ctx.host.createVolumeDir(dir);
    try {
      await ctx.record(volume);
    } catch (err) {
      await ctx.host.removeVolumeDir(dir).catch(() => undefined);
      throw err;
    }
    ctx.events.publish('volume', 'create', name, { driver: volume.Driver });
    return { volume: ctx.view(volume), created: true };
  });
}

