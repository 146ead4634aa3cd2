/**
 * Contract checks: validates response bodies against the published Engine API schemas (Swagger 2.0, one
 * frozen file per API version, spec/openapi/v1.NN.json) for the version the request asked for.
 *
 *   await expectConforms('1.44', 'GET', '/containers/{id}/json', 200, body);
 *
 * The Swagger schemas are turned into JSON Schema for ajv: `x-nullable: true` (and `nullable: true`)
 * allow null, Swagger-only keywords are dropped, formats are not checked (the published schemas use Go
 * formats such as "int64" and "dateTime" that are informative only).
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv, type ValidateFunction } from 'ajv';

const here = path.dirname(fileURLToPath(import.meta.url));

/**
 * Where the schemas live: $BERTH_OPENAPI_DIR, the repository's spec/openapi, the shared folder beside the
 * repository, or the shared spec folder of these machines.
 */
export function openapiDir(): string {
  const repo = path.resolve(here, '..', '..', '..', '..');
  const candidates = [
    process.env.BERTH_OPENAPI_DIR,
    path.join(repo, 'spec', 'openapi'),
    path.join(repo, '..', 'shared', 'spec', 'openapi'),
    '/work/shared/spec/openapi',
  ].filter((p): p is string => !!p);
  for (const dir of candidates) if (existsSync(path.join(dir, 'v1.53.json'))) return dir;
  throw new Error(`the Engine API schemas (v1.NN.json) were not found in ${candidates.join(', ')}: set BERTH_OPENAPI_DIR`);
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Schema = { [key: string]: Json };

const SCHEMA_MAPS = new Set(['properties', 'definitions', 'patternProperties']);
const SCHEMA_LISTS = new Set(['allOf', 'anyOf', 'oneOf']);
const SCHEMA_ONE = new Set(['items', 'additionalProperties', 'not']);
const DROPPED = new Set(['example', 'discriminator', 'xml', 'externalDocs', 'nullable', 'readOnly', 'default']);

/** Converts one Swagger 2.0 schema to JSON Schema (draft 7) for ajv; refs point into `refBase`. */
export function convertSchema(input: Json, refBase: string): Json {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) return input;
  const out: Schema = {};
  for (const [key, value] of Object.entries(input)) {
    if (key.startsWith('x-') || DROPPED.has(key)) continue;
    if (key === '$ref' && typeof value === 'string') {
      out.$ref = value.startsWith('#/') ? `${refBase}${value}` : value;
    } else if (SCHEMA_MAPS.has(key) && value && typeof value === 'object' && !Array.isArray(value)) {
      out[key] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, convertSchema(v, refBase)]));
    } else if (SCHEMA_LISTS.has(key) && Array.isArray(value)) {
      out[key] = value.map((v) => convertSchema(v, refBase));
    } else if (SCHEMA_ONE.has(key) && value && typeof value === 'object') {
      out[key] = convertSchema(value, refBase);
    } else if (key === 'type' && value === 'file') {
      // a binary body: nothing to check
    } else {
      out[key] = value;
    }
  }
  const nullable = input['x-nullable'] === true || input.nullable === true;
  if (!nullable) return out;
  if (out.$ref !== undefined) {
    const { $ref, ...rest } = out;
    return { ...rest, anyOf: [{ $ref }, { type: 'null' }] };
  }
  if (typeof out.type === 'string') out.type = [out.type, 'null'];
  else if (Array.isArray(out.type) && !out.type.includes('null')) out.type = [...out.type, 'null'];
  if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null];
  if (out.type === undefined && out.allOf !== undefined) return { anyOf: [{ allOf: out.allOf }, { type: 'null' }] };
  return out;
}

/**
 * Known errors of the published schemas, where every engine and every client use another shape than the
 * file says. Each is corrected before validation, and only these.
 */
function applyErrata(doc: { definitions: Record<string, Json>; paths: Record<string, Record<string, unknown>> }): void {
  // 1.25 to 1.38 type IPAM.Options as an array of maps; it has always been one map of strings
  // (map[string]string in the engine and the Go client); 1.39 corrected the schema.
  const ipam = doc.definitions.IPAM as Schema | undefined;
  const props = ipam?.properties as Schema | undefined;
  const options = props?.Options as Schema | undefined;
  if (props && options?.type === 'array') {
    const { items: _items, ...rest } = options;
    props.Options = { ...rest, type: 'object', additionalProperties: { type: 'string' } };
  }
  // IPAM.Options is null when a network has none, and an endpoint's Links and Aliases are null when the
  // client gave none: dockerd has always sent them so (a nil map or slice), and the Go client decodes them.
  if (props?.Options) (props.Options as Schema)['x-nullable'] = true;
  const endpoint = (doc.definitions.EndpointSettings as Schema | undefined)?.properties as Schema | undefined;
  for (const key of ['Links', 'Aliases']) {
    const field = endpoint?.[key] as Schema | undefined;
    if (field) field['x-nullable'] = true;
  }
  // 1.25 to 1.34 describe a container's NetworkSettings with a draft ("TODO: check is correct") whose
  // Ports is a list; it has always been the port map of later versions ({"80/tcp": [{HostIp, HostPort}]}).
  const networkConfig = (doc.definitions.NetworkConfig as Schema | undefined)?.properties as Schema | undefined;
  if (networkConfig && (networkConfig.Ports as Schema | undefined)?.type === 'array') {
    networkConfig.Ports = {
      type: 'object',
      additionalProperties: { type: 'array', 'x-nullable': true, items: { type: 'object', properties: { HostIp: { type: 'string' }, HostPort: { type: 'string' } } } },
    };
  }
  // Up to 1.39 a PortMap entry cannot be null; an exposed port that is not published has always been
  // null there ("53/udp": null), which 1.40 documented.
  const portMapValue = (doc.definitions.PortMap as Schema | undefined)?.additionalProperties as Schema | undefined;
  if (portMapValue && portMapValue.type === 'array') portMapValue['x-nullable'] = true;
  // Up to 1.39 the RestartPolicy.Name enum leaves out "no" (and up to 1.29 also ""), the value of every
  // container created without a policy; 1.40 lists them.
  const restartName = ((doc.definitions.RestartPolicy as Schema | undefined)?.properties as Schema | undefined)?.Name as Schema | undefined;
  if (Array.isArray(restartName?.enum)) {
    for (const value of ['', 'no']) if (!restartName.enum.includes(value)) restartName.enum.push(value);
  }
  // Up to 1.39 ContainerSummary names the whole list of /containers/json, yet /system/df uses it for
  // each of its Containers, which would make those a list of lists; they have always been summaries.
  const summary = doc.definitions.ContainerSummary as Schema | undefined;
  const df = (doc.paths['/system/df']?.get as { responses?: Record<string, { schema?: Schema }> } | undefined)?.responses?.['200']?.schema;
  const dfContainers = (df?.properties as Schema | undefined)?.Containers as Schema | undefined;
  if (summary?.type === 'array' && summary.items && dfContainers && (dfContainers.items as Schema | undefined)?.$ref === '#/definitions/ContainerSummary') {
    dfContainers.items = summary.items;
  }
  // 1.25 to 1.40 type the container's ExecIDs as a string; it has always been a list of exec ids, or null
  // when there are none ([]string in the engine and the Go client); 1.41 corrected the schema.
  const inspect = (doc.paths['/containers/{id}/json']?.get as { responses?: Record<string, { schema?: Schema }> } | undefined)?.responses?.['200']?.schema;
  const inspectProps = inspect?.properties as Schema | undefined;
  if (inspectProps && (inspectProps.ExecIDs as Schema | undefined)?.type === 'string') {
    inspectProps.ExecIDs = { type: 'array', items: { type: 'string' }, 'x-nullable': true };
  }
  // Up to 1.52 a plugin's Config.Interface.Types holds PluginInterfaceType objects; dockerd has always
  // written each as one string ("docker.volumedriver/1.0"), which 1.53 documented.
  const pluginConfig = ((doc.definitions.Plugin as Schema | undefined)?.properties as Schema | undefined)?.Config as Schema | undefined;
  const pluginInterface = (pluginConfig?.properties as Schema | undefined)?.Interface as Schema | undefined;
  const types = (pluginInterface?.properties as Schema | undefined)?.Types as Schema | undefined;
  if (types && (types.items as Schema | undefined)?.$ref === '#/definitions/PluginInterfaceType') types.items = { type: 'string' };
}

interface SpecVersion {
  doc: { paths: Record<string, Record<string, { responses?: Record<string, { schema?: Json }> }>> };
  validators: Map<string, ValidateFunction | null>;
}

const ajv = new Ajv({ strict: false, validateFormats: false, allErrors: true, allowUnionTypes: true });
const versions = new Map<string, SpecVersion>();

function normaliseVersion(version: string | number): string {
  const text = typeof version === 'number' ? `1.${version}` : version.replace(/^v/, '');
  if (!/^1\.\d+$/.test(text)) throw new Error(`invalid API version ${JSON.stringify(version)}`);
  return text;
}

function loadVersion(version: string): SpecVersion {
  let spec = versions.get(version);
  if (spec) return spec;
  const file = path.join(openapiDir(), `v${version}.json`);
  if (!existsSync(file)) throw new Error(`no published schema for API ${version} (${file}); v1.24 is checked with v124.ts`);
  const doc = JSON.parse(readFileSync(file, 'utf8')) as SpecVersion['doc'] & { definitions: Record<string, Json> };
  applyErrata(doc);
  const id = `engine-api-v${version}`;
  const converted = convertSchema({ definitions: doc.definitions } as Json, id) as Schema;
  ajv.addSchema({ $id: id, definitions: converted.definitions } as object);
  spec = { doc, validators: new Map() };
  versions.set(version, spec);
  return spec;
}

/** The operation's path template as the schema names it, for a concrete path ('/containers/abc/json'). */
export function findPathTemplate(version: string | number, method: string, concretePath: string): string | undefined {
  const spec = loadVersion(normaliseVersion(version));
  const m = method.toLowerCase();
  const templates = Object.keys(spec.doc.paths).filter((t) => spec.doc.paths[t][m]);
  // Literal paths first: /containers/json must not be taken for /containers/{id}.
  templates.sort((x, y) => Number(x.includes('{')) - Number(y.includes('{')));
  return templates.find((template) => {
    const source = template
      .split('/')
      .map((segment) => (segment === '{name}' ? '.+' : /^\{[^}]+\}$/.test(segment) ? '[^/]+' : segment.replace(/[.*+?^$()|[\]\\]/g, '\\$&')))
      .join('/');
    return new RegExp(`^${source}$`).test(concretePath);
  });
}

function validatorFor(version: string, method: string, pathTemplate: string, status: number): ValidateFunction | null {
  const spec = loadVersion(version);
  const key = `${method} ${pathTemplate} ${status}`;
  if (spec.validators.has(key)) return spec.validators.get(key)!;
  const operation = spec.doc.paths[pathTemplate]?.[method.toLowerCase()];
  if (!operation) throw new Error(`API ${version} has no operation ${method.toUpperCase()} ${pathTemplate}`);
  const response = operation.responses?.[String(status)] ?? operation.responses?.default;
  if (!response) throw new Error(`API ${version} ${method.toUpperCase()} ${pathTemplate} documents no response ${status}`);
  const validate = response.schema === undefined ? null : ajv.compile(convertSchema(response.schema, `engine-api-v${version}`) as object);
  spec.validators.set(key, validate);
  return validate;
}

/** Describes how a body fails its schema, or returns undefined when it conforms. */
export function conformanceErrors(version: string | number, method: string, pathTemplate: string, status: number, body: unknown): string | undefined {
  const v = normaliseVersion(version);
  const validate = validatorFor(v, method, pathTemplate, status);
  if (!validate) return undefined;
  if (validate(body)) return undefined;
  return (validate.errors ?? [])
    .slice(0, 20)
    .map((e) => `  ${e.instancePath || '(root)'} ${e.message}${e.params && Object.keys(e.params).length ? ` ${JSON.stringify(e.params)}` : ''}`)
    .join('\n');
}

/** Throws (failing the test) when a response body does not conform to the schema of its API version. */
export async function expectConforms(version: string | number, method: string, pathTemplate: string, status: number, body: unknown): Promise<void> {
  const errors = conformanceErrors(version, method, pathTemplate, status, body);
  if (errors !== undefined) {
    const v = normaliseVersion(version);
    throw new Error(`response of ${method.toUpperCase()} ${pathTemplate} (${status}) does not conform to API ${v}:\n${errors}\nbody: ${JSON.stringify(body).slice(0, 2000)}`);
  }
}
