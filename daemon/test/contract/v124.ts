/**
 * API 1.24 has no published schema file: its only description is the v1.24 core document. These are the
 * fields that document lists for each record, with their JSON types, checked by expectV124Fields().
 * Fields the document marks as conditional (SizeRw with size=1, legacy event fields for container and
 * image events only) are listed as optional.
 */

/** 'map' is an object keyed by names; 'strmap' one whose values are all strings (labels, options). */
type JsonType = 'string' | 'integer' | 'boolean' | 'array' | 'object' | 'map' | 'strmap';

interface FieldSpec {
  type: JsonType | JsonType[];
  nullable?: boolean;
  optional?: boolean;
}

export type V124Record =
  | 'event'
  | 'container.summary'
  | 'container.inspect'
  | 'image.summary'
  | 'image.inspect'
  | 'network'
  | 'volume';

const req = (type: FieldSpec['type'], nullable = false): FieldSpec => ({ type, nullable });
const opt = (type: FieldSpec['type'], nullable = false): FieldSpec => ({ type, nullable, optional: true });

export const V124_FIELDS: Record<V124Record, Record<string, FieldSpec>> = {
  event: {
    Type: req('string'),
    Action: req('string'),
    Actor: req('object'),
    'Actor.ID': req('string'),
    'Actor.Attributes': req('strmap'),
    time: req('integer'),
    timeNano: req('integer'),
    status: opt('string'),
    id: opt('string'),
    from: opt('string'),
  },
  'container.summary': {
    Id: req('string'),
    Names: req('array'),
    Image: req('string'),
    ImageID: req('string'),
    Command: req('string'),
    Created: req('integer'),
    State: req('string'),
    Status: req('string'),
    Ports: req('array'),
    Labels: req('strmap', true),
    SizeRw: opt('integer'),
    SizeRootFs: opt('integer'),
    HostConfig: req('object'),
    'HostConfig.NetworkMode': req('string'),
    NetworkSettings: req('object'),
    'NetworkSettings.Networks': req('map', true),
    Mounts: req('array', true),
  },
  'container.inspect': {
    AppArmorProfile: req('string'),
    Args: req('array', true),
    Config: req('object'),
    Created: req('string'),
    Driver: req('string'),
    ExecIDs: req('array', true),
    HostConfig: req('object'),
    HostnamePath: req('string'),
    HostsPath: req('string'),
    LogPath: req('string'),
    Id: req('string'),
    Image: req('string'),
    MountLabel: req('string'),
    Name: req('string'),
    NetworkSettings: req('object'),
    'NetworkSettings.Networks': req('map', true),
    'NetworkSettings.Ports': req('map', true),
    'NetworkSettings.SandboxKey': req('string'),
    'NetworkSettings.IPAddress': req('string'),
    'NetworkSettings.Gateway': req('string'),
    'NetworkSettings.MacAddress': req('string'),
    Path: req('string'),
    ProcessLabel: req('string'),
    ResolvConfPath: req('string'),
    RestartCount: req('integer'),
    State: req('object'),
    'State.Status': req('string'),
    'State.Running': req('boolean'),
    'State.Paused': req('boolean'),
    'State.Restarting': req('boolean'),
    'State.OOMKilled': req('boolean'),
    'State.Dead': req('boolean'),
    'State.Pid': req('integer'),
    'State.ExitCode': req('integer'),
    'State.Error': req('string'),
    'State.StartedAt': req('string'),
    'State.FinishedAt': req('string'),
    Mounts: req('array'),
    SizeRw: opt('integer'),
    SizeRootFs: opt('integer'),
  },
  'image.summary': {
    RepoTags: req('array', true),
    Id: req('string'),
    Created: req('integer'),
    Size: req('integer'),
    VirtualSize: req('integer'),
    Labels: req('strmap', true),
    ParentId: opt('string'),
    RepoDigests: opt('array', true),
  },
  'image.inspect': {
    Id: req('string'),
    Container: req('string'),
    Comment: req('string'),
    Os: req('string'),
    Architecture: req('string'),
    Parent: req('string'),
    ContainerConfig: req('object', true),
    // The document's "EngineVersion" is the field real clients read as DockerVersion.
    DockerVersion: req('string'),
    VirtualSize: req('integer'),
    Size: req('integer'),
    Author: req('string'),
    Created: req('string'),
    GraphDriver: req('object'),
    'GraphDriver.Name': req('string'),
    RepoDigests: req('array', true),
    RepoTags: req('array', true),
    Config: req('object', true),
    RootFS: req('object'),
    'RootFS.Type': req('string'),
    'RootFS.Layers': req('array'),
  },
  network: {
    Name: req('string'),
    Id: req('string'),
    Scope: req('string'),
    Driver: req('string'),
    EnableIPv6: req('boolean'),
    Internal: req('boolean'),
    IPAM: req('object'),
    'IPAM.Driver': req('string'),
    'IPAM.Config': req('array', true),
    Containers: req('map', true),
    Options: req('strmap', true),
    Labels: req('strmap', true),
  },
  volume: {
    Name: req('string'),
    Driver: req('string'),
    Mountpoint: req('string'),
    Status: opt('map'),
    Labels: req('strmap', true),
    Scope: req('string'),
  },
};

function typeOf(value: unknown): JsonType[] {
  if (Array.isArray(value)) return ['array'];
  if (typeof value === 'number') return Number.isInteger(value) ? ['integer'] : [];
  if (typeof value === 'string') return ['string'];
  if (typeof value === 'boolean') return ['boolean'];
  if (value && typeof value === 'object') {
    const values = Object.values(value);
    return values.every((v) => typeof v === 'string') ? ['object', 'map', 'strmap'] : ['object', 'map'];
  }
  return [];
}

/** Lists how a record departs from the v1.24 document (missing fields, wrong types); empty when it conforms. */
export function v124Errors(kind: V124Record, body: unknown): string[] {
  const errors: string[] = [];
  if (!body || typeof body !== 'object' || Array.isArray(body)) return [`expected an object, got ${JSON.stringify(body)}`];
  for (const [field, spec] of Object.entries(V124_FIELDS[kind])) {
    let value: unknown = body;
    let present = true;
    for (const part of field.split('.')) {
      if (value && typeof value === 'object' && part in (value as object)) value = (value as Record<string, unknown>)[part];
      else {
        present = false;
        break;
      }
    }
    if (!present) {
      if (!spec.optional) errors.push(`${field} is missing`);
      continue;
    }
    if (value === null) {
      if (!spec.nullable) errors.push(`${field} is null`);
      continue;
    }
    const expected = Array.isArray(spec.type) ? spec.type : [spec.type];
    const actual = typeOf(value);
    if (!expected.some((t) => actual.includes(t))) {
      errors.push(`${field} should be ${expected.join(' or ')}, got ${JSON.stringify(value).slice(0, 80)}`);
    }
  }
  return errors;
}

export function expectV124Fields(kind: V124Record, body: unknown): void {
  const errors = v124Errors(kind, body);
  if (errors.length > 0) throw new Error(`${kind} does not conform to API 1.24:\n  ${errors.join('\n  ')}\nbody: ${JSON.stringify(body).slice(0, 2000)}`);
}
