/**
 * `docker plugin set`: the settings a plugin's config declares settable, as `name[.field]=value`. An env
 * value (`NAME=v`, field `value`), the args (`args=a b`, field `value`), a mount's source
 * (`mountname.source=/path`) and a device's path (`devicename.path=/dev/x`); a setting without a field takes
 * the only field its entry declares settable.
 */
import { InvalidParameter } from '../../errors.js';
import type { PluginConfig, PluginRecord } from './config.js';

interface Setting {
  name: string;
  field: string;
  value: string;
  pretty: string;
}

function parseSetting(arg: string): Setting {
  const eq = arg.indexOf('=');
  if (eq === 0) throw new InvalidParameter(`invalid setting ${JSON.stringify(arg)}: expected name=value`);
  let name = eq < 0 ? arg : arg.slice(0, eq);
  const value = eq < 0 ? '' : arg.slice(eq + 1);
  const pretty = name;
  let field = '';
  const dot = name.lastIndexOf('.');
  if (dot > 0) {
    field = name.slice(dot + 1);
    name = name.slice(0, dot);
  }
  return { name, field, value, pretty };
}

/** Whether `s` may set its entry: its field (or the only one declared) among those allowed and declared. */
function settable(s: Setting, allowed: string, declared: string[] | null | undefined): boolean {
  const fields = declared ?? [];
  let field = s.field;
  if (field === '') {
    if (fields.length > 1) throw new InvalidParameter(`setting ${JSON.stringify(s.pretty)}: more than one field is settable, name one (name.field=value)`);
    field = fields[0] ?? '';
  }
  return field === allowed && fields.includes(field);
}

type Mount = NonNullable<PluginConfig['Mounts']>[number];
type Device = { Name?: string; Path?: string; Settable?: string[] | null; [k: string]: unknown };

/** The plugin's settings after `args` are applied (the record is left as it is). */
export function applySettings(p: PluginRecord, args: string[]): PluginRecord['Settings'] {
  const env = new Map(p.Settings.Env.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)] as [string, string]));
  let values = p.Settings.Args;
  const mounts = (p.Settings.Mounts as Mount[]).map((m) => ({ ...m }));
  const devices = (p.Settings.Devices as Device[]).map((d) => ({ ...d }));
  for (const s of args.map(parseSetting)) {
    const notSettable = () => new InvalidParameter(`${JSON.stringify(s.pretty)} is not settable`);
    const mount = (p.Config.Mounts ?? []).find((m) => m.Name !== undefined && m.Name !== '' && m.Name === s.name);
    if (mount) {
      if (!settable(s, 'source', mount.Settable)) throw notSettable();
      if (!s.value.startsWith('/')) throw new InvalidParameter(`setting ${JSON.stringify(s.pretty)}: the source must be an absolute path`);
      for (const m of mounts) if (m.Name === s.name) m.Source = s.value;
      continue;
    }
    const device = ((p.Config.Linux?.Devices ?? []) as Device[]).find((d) => d.Name !== undefined && d.Name !== '' && d.Name === s.name);
    if (device) {
      if (!settable(s, 'path', device.Settable)) throw notSettable();
      if (!s.value.startsWith('/dev/')) throw new InvalidParameter(`setting ${JSON.stringify(s.pretty)}: a device path must be under /dev`);
      for (const d of devices) if (d.Name === s.name) d.Path = s.value;
      continue;
    }
    const declared = (p.Config.Env ?? []).find((e) => e.Name === s.name);
    if (declared) {
      if (!settable(s, 'value', declared.Settable)) throw notSettable();
      env.set(s.name, s.value);
      continue;
    }
    if (s.name === 'args' || (p.Config.Args?.Name && s.name === p.Config.Args.Name)) {
      if (!settable(s, 'value', p.Config.Args?.Settable)) throw notSettable();
      values = s.value.split(/\s+/).filter(Boolean);
      continue;
    }
    throw new InvalidParameter(`setting ${JSON.stringify(s.name)} not found in the plugin configuration`);
  }
  return { Mounts: mounts, Env: [...env].map(([k, v]) => `${k}=${v}`), Args: values, Devices: devices };
}
