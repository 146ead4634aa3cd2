/**
 * Fuzz: a few thousand generated requests across every route of the Engine API 1.53 (the routes, their
 * parameters and body schemas come from the published OpenAPI schema), with wrong types, huge and negative
 * numbers, unicode, bad booleans, bad filters JSON, bad versions, traversal in names and ids, truncated,
 * chunked and deeply nested bodies, text/plain bodies, unknown keys, and oversized headers. At the end the
 * daemon is alive and its memory bounded, and:
 *
 * - no request got a 5xx, except the documented "not supported" answers and a registry that cannot be reached;
 * - every 4xx carries a JSON body with a message;
 * - no request left the connection without an answer (other than the framing errors Node answers itself);
 * - a JSON body sent as text/plain was refused;
 * - keys a schema does not know were not stored (inspect never shows them).
 *
 * The generator is seeded: the seed is printed, and BERTH_FUZZ_SEED=<seed> replays the same requests
 * (BERTH_FUZZ_REQUESTS sets how many random ones follow the sweep). Nothing leaves the machine: pulls, pushes,
 * logins, searches and build contexts name a registry on 127.0.0.1 at a closed port.
 */
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { rssBytes } from '../bench/procmem.js';
import { openapiDir } from './contract/openapi.js';
import { startEngine, type Engine } from './harness.js';

const SEED = Number(process.env.BERTH_FUZZ_SEED ?? randomInt(2 ** 31));
const RANDOM_REQUESTS = Number(process.env.BERTH_FUZZ_REQUESTS ?? 4000);
const CONCURRENCY = 8;
const TIMEOUT_MS = 20_000;
/** A registry nobody listens on: pulls, pushes and logins fail at once without leaving the machine. */
const REGISTRY = '127.0.0.1:1';
/** The name of keys no schema has: a daemon that stores them shows it in inspect. */
const UNKNOWN_KEY = 'XFuzzUnknownKey';

// -- the generator ----------------------------------------------------------------------------------------

/** mulberry32: small, fast and reproducible from its seed. */
class Random {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
}

/** Percent-encoding of any string (a lone surrogate becomes U+FFFD, as a client would send it). */
const wellFormed = (s: string) => s.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd');
const pct = (s: string) => encodeURIComponent(wellFormed(s));

const nested = (open: string, close: string, depth: number, inner = '1') => open.repeat(depth) + inner + close.repeat(depth);

const LONG_NAME = 'a'.repeat(5000);
const LONG_PATH = '/' + 'dir/'.repeat(1200) + 'file';
const STRINGS = [
  '', ' ', 'a', 'busybox', 'busybox:latest', 'bridge', '../../../../etc/passwd', '..', '.', '/', '//', '%2e%2e%2f',
  'a/../../b', '/etc/shadow', '\u0000', 'x\ny', '\u2603', '\u0646\u0627\u0645', '\u{1F600}'.repeat(40), 'null', '{}',
  '[', '(a', '*x', '?', '\\', '"', "'", '<b>', ' a ', ':', '@', 'sha256:' + 'f'.repeat(64), 'f'.repeat(64), '-1',
  'true', 'Infinity', '\ud800', LONG_NAME, LONG_PATH, '\u00e9'.repeat(1000),
];
const INTS = ['-1', '0', '1', '42', '-9223372036854775809', '9223372036854775807', '18446744073709551616', '1e308', '1.5', '0x10', 'NaN', '+5', ' 7', 'abc', ''];
const BOOLS = ['1', '0', 'true', 'false', 'True', 'yes', 'maybe', '2', '-1', '', 'TRUE'];
const FILTERS = [
  '{', '[]', 'null', '""', '7', '{"label":"x"}', '{"label":["a=b"]}', '{"name":["["]}', '{"name":["(a"]}',
  '{"name":["*x"]}', '{"id":{"x":true}}', '{"bogus":["1"]}', '{"status":["nope"]}', '{"dangling":["maybe"]}',
  '{"until":["-99999999999999999999"]}', '{"until":["1e400"]}', '{"before":["../x"]}', '{"since":["\u2603"]}',
  '{"reference":["[a-"]}', '{"label":[5]}', '{"label":{"a":"b"}}', `{"driver":["${'d'.repeat(5000)}"]}`,
  nested('{"a":', '}', 500),
];
/**
 * Values 5000 levels deep, which JSON.stringify cannot write: a body holds these strings, replaced by the
 * nested text once the body is written.
 */
const DEEP: Record<string, string> = {
  '\u0000deep-arrays': nested('[', ']', 5000),
  '\u0000deep-objects': nested('{"a":', '}', 5000, '{}'),
};
const withDeep = (json: string) => json.replace(/"\\u0000deep-(arrays|objects)"/g, (m) => DEEP[JSON.parse(m) as string]!);

/** JSON values of the wrong kind for any field. */
const WRONG_JSON: unknown[] = [null, true, -1, 0, 1.5, 1e308, -9.3e18, 18446744073709551616, 'str', '', [], {}, [1, 'a', null], { a: 1 }, LONG_NAME];

// -- the routes, from the OpenAPI schema ---------------------------------------------------------------------

type Schema = { [key: string]: any };

interface Param {
  name: string;
  in: 'path' | 'query' | 'header' | 'body';
  type?: string;
  schema?: Schema;
}

interface Operation {
  method: string;
  /** The path with `{name}` placeholders. */
  template: string;
  params: Param[];
  /** The schema of a JSON body, when the operation takes one. */
  jsonBody?: Schema;
  /** The operation takes a binary body (a tar, a build context). */
  binaryBody: boolean;
}

const spec = JSON.parse(readFileSync(path.join(openapiDir(), 'v1.53.json'), 'utf8')) as { paths: Record<string, Record<string, { parameters?: Param[] }>>; definitions: Record<string, Schema> };

/** A schema with its reference followed and its `allOf` parts merged into one object schema. */
function resolve(schema: Schema | undefined): Schema | undefined {
  let s = schema;
  for (let i = 0; s && s.$ref && i < 10; i++) s = spec.definitions[String(s.$ref).replace('#/definitions/', '')];
  if (s?.allOf) {
    const parts = (s.allOf as Schema[]).map((part) => resolve(part) ?? {});
    return { type: 'object', properties: Object.assign({}, ...parts.map((part) => part.properties ?? {}), s.properties ?? {}) };
  }
  return s;
}

const OPERATIONS: Operation[] = Object.entries(spec.paths).flatMap(([template, methods]) =>
  Object.entries(methods)
    .filter(([method]) => ['get', 'head', 'post', 'put', 'delete'].includes(method))
    .map(([method, op]) => {
      const params = op.parameters ?? [];
      const body = params.find((p) => p.in === 'body');
      const bodySchema = resolve(body?.schema);
      const binary = !!body && (!bodySchema || bodySchema.type === 'string');
      return { method: method.toUpperCase(), template, params, jsonBody: body && !binary ? bodySchema : undefined, binaryBody: binary };
    }),
);

/**
 * Routes answered with a stream that ends only when its object does (or a pull, push, load or build that
 * streams its progress): their answer is read for a moment, and no answer within a few seconds is no hang.
 */
const STREAMING = new Set([
  '/containers/{id}/attach', '/containers/{id}/attach/ws', '/containers/{id}/wait', '/events', '/containers/{id}/logs',
  '/containers/{id}/stats', '/exec/{id}/start', '/containers/{id}/export', '/images/get', '/images/{name}/get',
  '/images/{name}/push', '/images/create', '/images/load', '/build', '/services/{id}/logs', '/tasks/{id}/logs',
]);
const STREAM_HEAD_MS = 3000;
const STREAM_READ_MS = 1500;

/**
 * 5xx answers that are documented, not faults: features this engine does not have (README "Not yet") and a
 * registry that cannot be reached (here, by design).
 */
const ALLOWED_5XX = [
  /BuildKit \(builder version 2\) is not supported/,
  /^squash is not supported/,
  /network driver is not supported yet/,
  /^config-only networks are not supported yet/,
  /more than one IPv[46] pool per network is not supported yet/,
  /cluster volumes need swarm mode/,
  /only cluster volumes can be updated/,
  /^importing from \S+ URLs is not supported/,
  /^BuildKit sessions are not supported/,
  /^configured logging driver does not support reading$/,
  /^plugins are not supported by this engine/,
  /^swarm mode is not supported by this engine/,
  /^This node is not a swarm manager\./,
  /^This node is not part of a swarm$/,
  /^This node is already part of a swarm/,
  /cannot reach the registry 127\.0\.0\.1:1\b/,
];

// -- the fixtures the requests name ------------------------------------------------------------------------

interface Fixtures {
  created: { id: string; name: string };
  running: { id: string; name: string };
  image: string;
  volume: string;
  network: string;
  exec: string;
}

/** Values for a path parameter: the fixtures' names and ids (so that requests reach past the lookup), and junk. */
function pathValues(fx: Fixtures, template: string, name: string): string[] {
  if (template.startsWith('/containers/')) return [fx.created.id, fx.created.name, fx.running.id.slice(0, 12), fx.running.name, 'nonexistent'];
  if (template.startsWith('/images/')) return ['busybox', 'busybox:latest', fx.image, fx.image.slice(7, 19)];
  if (template.startsWith('/volumes/')) return [fx.volume];
  if (template.startsWith('/networks/')) return [fx.network, 'bridge', 'none', 'host'];
  if (template.startsWith('/exec/')) return [fx.exec];
  return name === 'name' ? ['busybox'] : [];
}

// -- one request -------------------------------------------------------------------------------------------

interface FuzzRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
  /** The route's template, for the report and the checks. */
  route: string;
  /** What kind of generated request this is, for the report. */
  kind: string;
  /** Send the body in chunks (Transfer-Encoding: chunked). */
  chunked?: boolean;
  /** The body does not match its framing: Node's parser answers the bytes that follow it. */
  badFraming?: boolean;
  /** The request was sent as text/plain with a JSON body: it must be refused. */
  textPlain?: boolean;
  /** The body has keys its schema does not know: what it creates must not show them. */
  unknownKeys?: boolean;
}

interface Outcome {
  status: number;
  body: string;
  /** The connection ended without an answer, or the answer did not come in time. */
  error?: string;
  timedOut?: boolean;
}

function send(socketPath: string, req: FuzzRequest): Promise<Outcome> {
  const streaming = STREAMING.has(req.route.split(' ')[1]!);
  return new Promise((done) => {
    const headers: Record<string, string> = { ...req.headers };
    if (req.body && !req.chunked) headers['Content-Length'] ??= String(req.body.length);
    const r = http.request({ socketPath, method: req.method, path: req.path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      const finish = (error?: string) => {
        clearTimeout(reading);
        done({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8'), error });
      };
      const reading = streaming
        ? setTimeout(() => {
            res.destroy();
            finish();
          }, STREAM_READ_MS)
        : undefined;
      res.on('data', (c: Buffer) => {
        // A stream (logs, events, an export) only needs its head and a little of its body.
        if (size < 64 * 1024) chunks.push(c);
        size += c.length;
        if (size > 1024 * 1024) {
          res.destroy();
          finish();
        }
      });
      res.on('end', () => finish());
      res.on('error', () => finish());
      res.on('aborted', () => finish());
    });
    r.setTimeout(streaming ? STREAM_HEAD_MS : TIMEOUT_MS, () => {
      r.destroy();
      done({ status: 0, body: '', error: 'timed out', timedOut: true });
    });
    r.on('error', (err) => done({ status: 0, body: '', error: err.message }));
    r.on('socket', (s) => s.on('error', () => undefined));
    if (req.body && req.chunked) {
      // Uneven chunks, some empty writes in between.
      let at = 0;
      while (at < req.body.length) {
        const n = Math.max(1, Math.floor(req.body.length / 3));
        r.write(req.body.subarray(at, at + n));
        at += n;
      }
      r.end();
    } else {
      r.end(req.body);
    }
  });
}

/** Writes raw bytes and reads the status line of the answer (0 when the connection ends without one). */
function sendRaw(socketPath: string, bytes: Buffer, opts: { closeAfterWrite?: boolean } = {}): Promise<Outcome> {
  return new Promise((done) => {
    const sock = net.connect(socketPath);
    const chunks: Buffer[] = [];
    let finished = false;
    const finish = (error?: string) => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      sock.destroy();
      const text = Buffer.concat(chunks).toString('utf8');
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(text);
      const bodyAt = text.indexOf('\r\n\r\n');
      done({ status: m ? Number(m[1]) : 0, body: bodyAt >= 0 ? text.slice(bodyAt + 4) : '', error });
    };
    const timer = setTimeout(() => finish('timed out'), TIMEOUT_MS);
    sock.on('error', (err) => finish(err.message));
    sock.on('data', (c: Buffer) => {
      chunks.push(c);
      if (Buffer.concat(chunks).includes('\r\n\r\n')) setTimeout(() => finish(), 200);
    });
    sock.on('end', () => finish());
    sock.on('connect', () => {
      sock.write(bytes);
      if (opts.closeAfterWrite) sock.end();
    });
  });
}

// -- building requests ------------------------------------------------------------------------------------

class Builder {
  constructor(
    readonly rnd: Random,
    readonly fx: Fixtures,
  ) {}

  queryValue(p: Param): string {
    const { rnd } = this;
    if (p.name === 'filters') return rnd.pick(FILTERS);
    if (p.type === 'integer') return rnd.chance(0.7) ? rnd.pick(INTS) : rnd.pick(STRINGS);
    if (p.type === 'boolean') return rnd.chance(0.7) ? rnd.pick(BOOLS) : rnd.pick(STRINGS);
    return rnd.chance(0.8) ? rnd.pick(STRINGS) : rnd.pick(INTS);
  }

  pathValue(template: string, name: string): string {
    const { rnd } = this;
    const good = pathValues(this.fx, template, name);
    const value = good.length && rnd.chance(0.55) ? rnd.pick(good) : rnd.pick(STRINGS);
    // Mostly encoded; sometimes raw, so that slashes and dots reach the router as they are.
    return rnd.chance(0.8) ? pct(value) : wellFormed(value).replace(/[^\x21-\x7e]|[?#%]/gu, (c: string) => encodeURIComponent(c));
  }

  /** A value for a schema: mostly of its type (with edge values), sometimes of the wrong kind. */
  value(schema: Schema | undefined, depth: number): unknown {
    const { rnd } = this;
    const s = resolve(schema) ?? {};
    if (rnd.chance(0.15) || depth > 4) return rnd.pick(WRONG_JSON);
    const type = s.type ?? (s.properties ? 'object' : undefined);
    switch (type) {
      case 'integer':
      case 'number':
        return rnd.pick([0, 1, -1, 7, 1024, 2 ** 31, -(2 ** 63), 2 ** 64, 1e308, 0.5, -0.0]);
      case 'boolean':
        return rnd.chance(0.7) ? rnd.chance(0.5) : rnd.pick(['true', 1, 'yes']);
      case 'string':
        if (s.enum && rnd.chance(0.5)) return rnd.pick(s.enum as string[]);
        return rnd.pick(STRINGS);
      case 'array': {
        const n = rnd.int(4);
        return Array.from({ length: n }, () => this.value(s.items, depth + 1));
      }
      case 'object':
      default:
        return this.object(s, depth);
    }
  }

  object(s: Schema, depth: number): Record<string, unknown> {
    const { rnd } = this;
    const out: Record<string, unknown> = {};
    const props = Object.entries((s.properties ?? {}) as Record<string, Schema>);
    for (const [key, sub] of props) if (rnd.chance(props.length > 8 ? 0.25 : 0.5)) out[key] = this.value(sub, depth + 1);
    if (s.additionalProperties && typeof s.additionalProperties === 'object') {
      for (let i = rnd.int(3); i > 0; i--) out[rnd.pick(STRINGS).slice(0, 64) || 'k'] = this.value(s.additionalProperties, depth + 1);
    }
    return out;
  }

  /** Adds a key no schema knows to `body` and to one of its nested objects that has a schema. */
  addUnknownKeys(body: Record<string, unknown>, schema: Schema): void {
    body[UNKNOWN_KEY] = 'fuzz';
    for (const [key, sub] of Object.entries((schema.properties ?? {}) as Record<string, Schema>)) {
      const r = resolve(sub);
      if (r?.properties && !r.additionalProperties) {
        const inner = body[key] && typeof body[key] === 'object' && !Array.isArray(body[key]) ? (body[key] as Record<string, unknown>) : {};
        inner[UNKNOWN_KEY] = 'fuzz';
        body[key] = inner;
        return;
      }
    }
  }

  /** One request on an operation; `overrides` fixes some parameters (the sweep). */
  build(op: Operation, overrides: { query?: Record<string, string>; path?: Record<string, string>; body?: Buffer | Record<string, unknown> } = {}): FuzzRequest {
    const { rnd } = this;
    let urlPath = op.template.replace(/\{(\w+)\}/g, (_, name: string) => overrides.path?.[name] ?? this.pathValue(op.template, name));
    const query = new URLSearchParams();
    if (overrides.query) for (const [k, v] of Object.entries(overrides.query)) query.append(k, v);
    else {
      for (const p of op.params.filter((q) => q.in === 'query')) if (rnd.chance(0.5)) query.append(p.name, this.queryValue(p));
      if (rnd.chance(0.1)) query.append(rnd.pick(STRINGS).slice(0, 32) || 'x', rnd.pick(STRINGS).slice(0, 64));
    }
    const headers: Record<string, string> = {};
    let body: Buffer | undefined;
    let unknownKeys = false;
    if (op.jsonBody) {
      let value: unknown = overrides.body ?? this.value(op.jsonBody, 0);
      if (!overrides.body && value && typeof value === 'object' && !Array.isArray(value) && rnd.chance(0.2)) {
        this.addUnknownKeys(value as Record<string, unknown>, op.jsonBody);
        unknownKeys = true;
      }
      body = Buffer.isBuffer(value) ? value : Buffer.from(JSON.stringify(value));
      headers['Content-Type'] = 'application/json';
    } else if (op.binaryBody) {
      body = Buffer.isBuffer(overrides.body) ? overrides.body : Buffer.from(Array.from({ length: rnd.int(2048) }, () => rnd.int(256)));
      headers['Content-Type'] = rnd.pick(['application/x-tar', 'application/octet-stream', 'text/plain']);
    }
    // Header parameters (X-Registry-Auth, X-Registry-Config): junk and base64 of junk.
    for (const p of op.params.filter((q) => q.in === 'header')) {
      if (rnd.chance(0.3)) headers[p.name] = rnd.chance(0.5) ? Buffer.from(JSON.stringify(this.value(undefined, 0))).toString('base64') : rnd.pick(STRINGS).replace(/[^\x20-\x7e]/g, '').slice(0, 200);
    }
    const req: FuzzRequest = { method: op.method, path: '', headers, body, route: `${op.method} ${op.template}`, kind: 'route', unknownKeys };
    urlPath = this.confine(req, urlPath, query);
    if (req.body && req.headers['Content-Type'] === 'application/json') req.body = Buffer.from(withDeep(req.body.toString('utf8')));
    const qs = query.toString();
    req.path = urlPath + (qs ? `?${qs}` : '');
    return req;
  }

  /**
   * Keeps a request from leaving the machine or starting long work: registries are the closed local port,
   * build contexts never come from a URL, containers never get host resources.
   */
  confine(req: FuzzRequest, urlPath: string, query: URLSearchParams): string {
    const t = req.route.split(' ')[1]!;
    if (t === '/images/create') {
      query.set('fromImage', `${REGISTRY}/${query.get('fromImage') || 'x'}`);
      if (query.has('fromSrc')) query.set('fromSrc', this.rnd.pick(['-', `http://${REGISTRY}/x.tar`]));
    }
    if (t === '/images/{name}/push' || t === '/distribution/{name}/json') {
      // No dots, slashes or escapes: the URL's dot segments must not take the registry away from the name.
      const rest = urlPath.split('/').slice(2, -1).join('').replace(/[./%\\]/g, '');
      urlPath = `/${t.split('/')[1]}/${REGISTRY}/fuzz${pct(rest)}/${t.split('/').at(-1)}`;
    }
    if (t === '/images/search' && query.has('term')) {
      // A term without a registry part searches Docker Hub's index.
      query.set('term', `${REGISTRY}/${query.get('term') || 'x'}`);
    }
    if (t === '/build' && query.has('remote')) query.set('remote', `http://${REGISTRY}/context.tar`);
    if (t.startsWith('/plugins')) {
      for (const key of ['remote', 'name']) if (query.has(key)) query.set(key, `${REGISTRY}/${query.get(key)}`);
    }
    if (t === '/swarm/init' || t === '/swarm/join') {
      // A swarm is never created or joined: whatever body was drawn (none, not JSON, not an object), the request
      // advertises the unspecified address, which no machine can advertise.
      let b: Record<string, unknown> = {};
      try {
        const parsed: unknown = JSON.parse(req.body?.toString('utf8') ?? '');
        if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) b = parsed as Record<string, unknown>;
      } catch {
        // Not JSON: replaced by an object.
      }
      b.AdvertiseAddr = '0.0.0.0';
      b.RemoteAddrs = [`${REGISTRY}`];
      req.body = Buffer.from(JSON.stringify(b));
      req.headers['Content-Type'] = 'application/json';
      return urlPath;
    }
    if (req.body && req.headers['Content-Type'] === 'application/json') {
      let parsed: unknown;
      try {
        parsed = JSON.parse(req.body.toString('utf8'));
      } catch {
        if (t === '/auth') parsed = {};
        else return urlPath;
      }
      // A login always names the local closed port (a body without a server would mean Docker Hub).
      if (t === '/auth' && (!parsed || typeof parsed !== 'object' || Array.isArray(parsed))) parsed = {};
      if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return urlPath;
      const b = parsed as Record<string, any>;
      if (t === '/auth') b.serveraddress = `http://${REGISTRY}`;
      if (t === '/containers/create' || t === '/commit') {
        if (this.rnd.chance(0.6)) b.Image = 'busybox';
        const hc = b.HostConfig;
        if (hc && typeof hc === 'object' && !Array.isArray(hc)) {
          for (const key of ['Binds', 'Mounts', 'Devices', 'DeviceCgroupRules', 'Privileged', 'CapAdd', 'CgroupParent', 'PidMode', 'IpcMode', 'UsernsMode', 'UTSMode', 'NetworkMode', 'VolumesFrom', 'Cgroup', 'SecurityOpt', 'Sysctls', 'ContainerIDFile', 'Runtime']) delete hc[key];
        }
        delete b.Volumes;
      }
      if (t === '/volumes/create' && b.DriverOpts !== undefined) b.DriverOpts = { type: 'tmpfs', device: 'tmpfs', o: String(this.rnd.pick(STRINGS)).slice(0, 100) };
      if (t === '/networks/create') {
        delete b.Options;
        delete b.ConfigFrom;
      }
      req.body = Buffer.from(JSON.stringify(b));
    }
    return urlPath;
  }

  /** A JSON route given a malformed body: deep nesting, truncated, not UTF-8, chunked, oversized. */
  badBody(op: Operation): FuzzRequest {
    const { rnd } = this;
    const req = this.build(op);
    // Every kind is made from the confined body (a login's body names the local registry even when cut).
    const valid = req.body!.toString('utf8');
    const kinds: Array<[string, () => void]> = [
      ['nested 5000 arrays', () => (req.body = Buffer.from(nested('[', ']', 5000)))],
      ['nested 5000 objects', () => (req.body = Buffer.from(nested('{"a":', '}', 5000, '{}')))],
      ['truncated', () => (req.body = Buffer.from(valid.slice(0, Math.max(1, valid.length >> 1))))],
      ['not JSON', () => (req.body = Buffer.from(rnd.pick(['{', '}', 'nul', '{"a":}', '\u2603', "{'a':1}", '[1,]'])))],
      ['not UTF-8', () => (req.body = Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]))],
      ['scalar', () => (req.body = Buffer.from(rnd.pick(['null', '[]', '1', '"s"', 'true'])))],
      ['chunked', () => ((req.chunked = true), (req.body = Buffer.from(valid)))],
      ['empty', () => (req.body = Buffer.alloc(0))],
      ['body longer than declared', () => ((req.body = Buffer.from(valid + ' '.repeat(64))), (req.headers['Content-Length'] = String(valid.length)), (req.badFraming = true))],
    ];
    // A login whose body has no server would go to Docker Hub, and a swarm init or join whose body lost its
    // unspecified advertise address (empty, or not UTF-8 and so read as another object) would make a real swarm:
    // these get only the kinds that keep the body.
    const keepsBody = op.template === '/auth' || op.template === '/swarm/init' || op.template === '/swarm/join';
    const usable = keepsBody ? kinds.filter(([k]) => k === 'chunked' || k === 'body longer than declared') : kinds;
    const [kind, apply] = rnd.pick(usable);
    apply();
    req.kind = `body: ${kind}`;
    return req;
  }

  /** A JSON body route sent a valid JSON object as text/plain. */
  textPlain(op: Operation): FuzzRequest {
    const req = this.build(op, { body: op.template === '/containers/create' ? { Image: 'busybox', Cmd: ['true'] } : {} });
    req.headers['Content-Type'] = 'text/plain';
    req.textPlain = true;
    req.kind = 'text/plain body';
    return req;
  }

  /** A version prefix in front of a route: old, new, malformed. */
  versioned(req: FuzzRequest): FuzzRequest {
    const prefix = this.rnd.pick(['/v1.24', '/v1.53', '/v1.54', '/v1.99', '/v2.0', '/v0.1', '/v1.x', '/v1.', '/v1.-1', '/v99999999999999999999.1', '/v1.23', '/V1.44', '/v1.44/v1.44']);
    return { ...req, path: prefix + req.path, kind: `${req.kind}, version ${prefix}` };
  }
}

/** Requests below HTTP's semantics: framing, header sizes, request lines, odd paths. */
function rawRequests(rnd: Random): Array<{ kind: string; bytes: Buffer; closeAfterWrite?: boolean }> {
  const line = (s: string) => Buffer.from(s.replace(/\n/g, '\r\n'));
  return [
    { kind: 'absolute URI', bytes: line('GET http://engine/containers/json HTTP/1.1\nHost: x\n\n') },
    { kind: 'asterisk', bytes: line('OPTIONS * HTTP/1.1\nHost: x\n\n') },
    { kind: 'path without slash', bytes: line('GET containers/json HTTP/1.1\nHost: x\n\n') },
    { kind: 'percent junk', bytes: line('GET /containers/%zz/json HTTP/1.1\nHost: x\n\n') },
    { kind: 'encoded NUL id', bytes: line('GET /containers/%00/json HTTP/1.1\nHost: x\n\n') },
    { kind: 'bad method', bytes: line('FROB /containers/json HTTP/1.1\nHost: x\n\n') },
    { kind: 'HTTP/1.0 no host', bytes: line('GET /_ping HTTP/1.0\n\n') },
    { kind: 'oversized header', bytes: line(`GET /_ping HTTP/1.1\nHost: x\nX-Big: ${'b'.repeat(40_000)}\n\n`) },
    { kind: 'many headers', bytes: line(`GET /_ping HTTP/1.1\nHost: x\n${Array.from({ length: 3000 }, (_, i) => `X-H${i}: v`).join('\n')}\n\n`) },
    { kind: 'oversized URL', bytes: line(`GET /containers/${'c'.repeat(70_000)}/json HTTP/1.1\nHost: x\n\n`) },
    { kind: 'Content-Length past the end, then closed', closeAfterWrite: true, bytes: line('POST /volumes/create HTTP/1.1\nHost: x\nContent-Type: application/json\nContent-Length: 1000\n\n{"Name":"tr') },
    { kind: 'negative Content-Length', bytes: line('POST /volumes/create HTTP/1.1\nHost: x\nContent-Length: -5\n\n{}') },
    { kind: 'huge Content-Length', bytes: line('POST /volumes/create HTTP/1.1\nHost: x\nContent-Type: application/json\nContent-Length: 99999999999999999999\n\n{}') },
    { kind: 'bad chunk size', bytes: line('POST /volumes/create HTTP/1.1\nHost: x\nContent-Type: application/json\nTransfer-Encoding: chunked\n\nzz\n{}\n0\n\n') },
    { kind: 'chunked, closed mid-chunk', closeAfterWrite: true, bytes: line('POST /containers/create HTTP/1.1\nHost: x\nContent-Type: application/json\nTransfer-Encoding: chunked\n\n10\n{"Image":"bu') },
    { kind: 'chunked and Content-Length', bytes: line('POST /volumes/create HTTP/1.1\nHost: x\nContent-Type: application/json\nContent-Length: 2\nTransfer-Encoding: chunked\n\n2\n{}\n0\n\n') },
    { kind: 'upgrade to tcp on a plain route', bytes: line('POST /containers/json HTTP/1.1\nHost: x\nConnection: Upgrade\nUpgrade: tcp\n\n') },
    { kind: 'upgrade, closed at once', closeAfterWrite: true, bytes: line('POST /containers/nonexistent/attach?stream=1 HTTP/1.1\nHost: x\nConnection: Upgrade\nUpgrade: tcp\n\n') },
    { kind: 'garbage', bytes: Buffer.from(Array.from({ length: 512 }, () => rnd.int(256))) },
    // Paths with empty segments last: a daemon that falls over on them still had every other request.
    { kind: 'GET //', bytes: line('GET // HTTP/1.1\nHost: x\n\n') },
    { kind: 'GET ///containers//json', bytes: line('GET ///containers//json HTTP/1.1\nHost: x\n\n') },
    { kind: 'GET /v1.44//', bytes: line('GET /v1.44// HTTP/1.1\nHost: x\n\n') },
    { kind: 'pipelined', bytes: line('GET /_ping HTTP/1.1\nHost: x\n\nGET // HTTP/1.1\nHost: x\n\nGET /version HTTP/1.1\nHost: x\n\n') },
  ];
}

// -- the test -----------------------------------------------------------------------------------------------

interface Failure {
  request: string;
  status: number;
  detail: string;
}

describe('fuzz: generated requests across every route', { timeout: 300_000 }, () => {
  let engine: Engine;
  let fx: Fixtures;

  before(async () => {
    engine = await startEngine();
    await engine.loadBusybox();
    const create = async (name: string, cmd: string[]) => {
      const r = await engine.request('POST', `/containers/create?name=${name}`, { body: { Image: 'busybox', Cmd: cmd } });
      assert.equal(r.status, 201, r.text);
      return { id: r.json().Id as string, name };
    };
    const created = await create('fuzz-created', ['true']);
    // PID 1 with a TERM trap, so that a stop with any timeout ends within a second.
    const running = await create('fuzz-running', ['sh', '-c', 'trap "exit 0" TERM; while :; do sleep 1; done']);
    assert.equal((await engine.request('POST', `/containers/${running.id}/start`)).status, 204);
    const exec = (await engine.request('POST', `/containers/${running.id}/exec`, { body: { Cmd: ['true'] } })).json().Id as string;
    assert.equal((await engine.request('POST', '/volumes/create', { body: { Name: 'fuzz-volume' } })).status, 201);
    assert.equal((await engine.request('POST', '/networks/create', { body: { Name: 'fuzz-network' } })).status, 201);
    const image = (await engine.request('GET', '/images/busybox/json')).json().Id as string;
    fx = { created, running, image, volume: 'fuzz-volume', network: 'fuzz-network', exec };
  });

  after(async () => {
    if (!engine) return;
    // The daemon removes what the requests created (containers, networks with their rules, volumes) before
    // the harness removes the rest.
    if (engine.pid) {
      const containers = (await engine.request('GET', '/containers/json?all=1').catch(() => undefined))?.json<Array<{ Id: string }>>() ?? [];
      for (const c of containers) await engine.request('DELETE', `/containers/${c.Id}?force=1&v=1`, { timeoutMs: 60_000 }).catch(() => undefined);
      const networks = (await engine.request('GET', '/networks').catch(() => undefined))?.json<Array<{ Id: string; Name: string }>>() ?? [];
      for (const n of networks) if (!['bridge', 'host', 'none'].includes(n.Name)) await engine.request('DELETE', `/networks/${n.Id}`).catch(() => undefined);
      await engine.request('POST', '/volumes/prune?filters=%7B%22all%22%3A%5B%22true%22%5D%7D').catch(() => undefined);
    }
    await engine.cleanup();
  });

  test(`seed ${SEED}: the daemon stays up, answers no 5xx but documented ones, and keeps its memory bounded`, async (t) => {
    t.diagnostic(`seed ${SEED} (replay with BERTH_FUZZ_SEED=${SEED})`);
    console.log(`fuzz seed ${SEED} (replay with BERTH_FUZZ_SEED=${SEED})`);
    const rnd = new Random(SEED);
    const b = new Builder(rnd, fx);
    const pid = engine.pid!;
    const rssBefore = rssBytes(pid)!;
    const started = Date.now();
    const failures: Failure[] = [];
    const statuses = new Map<number, number>();
    let sent = 0;
    const fail = (req: { route?: string; kind: string; method?: string; path?: string }, status: number, detail: string) => {
      failures.push({ request: `${req.method ?? ''} ${(req.path ?? req.kind).slice(0, 160)} [${req.kind}]`, status, detail: detail.slice(0, 300) });
    };

    const check = async (req: FuzzRequest, out: Outcome) => {
      sent++;
      statuses.set(out.status, (statuses.get(out.status) ?? 0) + 1);
      if (out.timedOut) {
        if (!STREAMING.has(req.route.split(' ')[1]!)) fail(req, 0, 'no answer within the time limit');
        return;
      }
      if (out.error && out.status === 0) {
        fail(req, 0, `connection ended without an answer: ${out.error}`);
        return;
      }
      let message: unknown;
      try {
        message = (JSON.parse(out.body) as { message?: unknown }).message;
      } catch {
        message = undefined;
      }
      if (out.status >= 500) {
        if (!(typeof message === 'string' && ALLOWED_5XX.some((re) => re.test(message as string)))) fail(req, out.status, String(message ?? out.body));
      } else if (out.status >= 400 && out.status !== 431 && req.method !== 'HEAD' && !req.badFraming && typeof message !== 'string') {
        // (431: headers over Node's limit are refused by its parser, before the daemon sees the request.)
        fail(req, out.status, `a 4xx without a JSON message: ${out.body.slice(0, 100)}`);
      }
      if (req.textPlain && out.status < 400) fail(req, out.status, 'a JSON body sent as text/plain was accepted');
      if (req.unknownKeys && out.status === 201) {
        const t = req.route.split(' ')[1]!;
        const inspect =
          t === '/containers/create' ? `/containers/${JSON.parse(out.body).Id}/json`
          : t === '/volumes/create' ? `/volumes/${encodeURIComponent(JSON.parse(out.body).Name)}`
          : t === '/networks/create' ? `/networks/${JSON.parse(out.body).Id}`
          : t === '/containers/{id}/exec' ? `/exec/${JSON.parse(out.body).Id}/json`
          : undefined;
        if (inspect) {
          const shown = await engine.request('GET', inspect).catch(() => undefined);
          if (shown?.text.includes(UNKNOWN_KEY)) fail(req, out.status, `a key no schema has (${UNKNOWN_KEY}) was stored: ${inspect} shows it`);
        }
      }
    };

    // 1. The sweep: every operation, every parameter, given each kind of bad value once, with the fixtures
    //    in the other places; every JSON body route given each kind of bad body, and text/plain.
    const sweep: FuzzRequest[] = [];
    const sweepValues = (p: Param): string[] =>
      p.name === 'filters' ? FILTERS
      : p.type === 'integer' ? ['-1', '9223372036854775808', '1.5', 'abc', LONG_NAME]
      : p.type === 'boolean' ? ['1', 'maybe', '-1']
      : ['../../../../etc/passwd', LONG_NAME, LONG_PATH, '\u2603', '[', ''];
    // Operations that remove, stop or rename the fixtures come last, so that the others find them.
    const last = (op: Operation) => op.method === 'DELETE' || /\/(prune|stop|kill|restart|pause|rename|update|wait|attach)$/.test(op.template);
    for (const op of [...OPERATIONS.filter((o) => !last(o)), ...OPERATIONS.filter(last)]) {
      const fixed: Record<string, string> = {};
      for (const p of op.params.filter((q) => q.in === 'path')) fixed[p.name] = pct(pathValues(fx, op.template, p.name)[0] ?? 'x');
      for (const p of op.params.filter((q) => q.in === 'query')) {
        for (const value of sweepValues(p)) sweep.push({ ...b.build(op, { path: fixed, query: { [p.name]: value }, body: op.jsonBody ? {} : undefined }), kind: `sweep ${p.name}` });
      }
      for (const p of op.params.filter((q) => q.in === 'path')) {
        for (const value of ['..', '../../etc', LONG_NAME, '\u2603', '%00']) sweep.push({ ...b.build(op, { path: { ...fixed, [p.name]: pct(value) }, query: {} }), kind: `sweep path ${p.name}` });
      }
      if (op.jsonBody) {
        const schema = op.jsonBody;
        for (const [key, sub] of Object.entries((schema.properties ?? {}) as Record<string, Schema>)) {
          const r = resolve(sub);
          const values: unknown[] = r?.type === 'string' ? [LONG_NAME, '../x', '\u2603', 5] : r?.type === 'integer' || r?.type === 'number' ? [-1, 1e308, 2 ** 64, 'x'] : r?.type === 'boolean' ? ['yes', 2] : ['x', 5, []];
          values.push(...Object.keys(DEEP));
          for (const v of values) sweep.push({ ...b.build(op, { path: fixed, query: {}, body: { ...(op.template === '/containers/create' ? { Image: 'busybox' } : {}), [key]: v } }), kind: `sweep body ${key}` });
        }
        for (let i = 0; i < 9; i++) sweep.push(b.badBody(op));
        sweep.push(b.textPlain(op));
        const withUnknown = b.build(op, { path: fixed, query: {}, body: op.template === '/containers/create' ? { Image: 'busybox', Cmd: ['true'] } : op.template === '/volumes/create' ? { Name: `fuzz-unknown-${rnd.int(1e9)}` } : {} });
        const parsed = JSON.parse(withUnknown.body!.toString('utf8')) as Record<string, unknown>;
        b.addUnknownKeys(parsed, schema);
        sweep.push({ ...withUnknown, body: Buffer.from(JSON.stringify(parsed)), unknownKeys: true, kind: 'sweep unknown keys' });
      }
    }
    for (const op of OPERATIONS.filter((o) => o.method === 'GET' && !o.template.includes('{'))) sweep.push(b.versioned(b.build(op)));

    // 2. The random part: routes with random parameters and bodies, bad bodies, text/plain, version prefixes.
    const randomRequests = function* (): Generator<FuzzRequest> {
      const jsonOps = OPERATIONS.filter((o) => o.jsonBody);
      for (let i = 0; i < RANDOM_REQUESTS; i++) {
        const roll = rnd.next();
        if (roll < 0.1) yield b.badBody(rnd.pick(jsonOps));
        else if (roll < 0.13) yield b.textPlain(rnd.pick(jsonOps));
        else if (roll < 0.23) yield b.versioned(b.build(rnd.pick(OPERATIONS)));
        else yield b.build(rnd.pick(OPERATIONS));
      }
    };

    const runAll = async (requests: Iterable<FuzzRequest>) => {
      const it = requests[Symbol.iterator]();
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          for (let next = it.next(); !next.done; next = it.next()) await check(next.value, await send(engine.socket, next.value));
        }),
      );
    };
    await runAll(sweep);
    const afterSweep = sent;
    await runAll(randomRequests());

    // 3. Below HTTP: framing, sizes, odd request lines. Node itself answers what it cannot parse (400, 413,
    //    431) and closes; a connection closed by the client cannot be answered.
    for (const raw of rawRequests(rnd)) {
      if (!(await engine.request('GET', '/_ping').then(() => true, () => false))) break;
      const out = await sendRaw(engine.socket, raw.bytes, { closeAfterWrite: raw.closeAfterWrite });
      sent++;
      statuses.set(out.status, (statuses.get(out.status) ?? 0) + 1);
      if (out.status >= 500) fail({ kind: `raw: ${raw.kind}` }, out.status, out.body);
      if (out.status === 0 && !raw.closeAfterWrite && raw.kind !== 'garbage') fail({ kind: `raw: ${raw.kind}` }, 0, `no answer: ${out.error ?? 'connection closed'}`);
    }

    const seconds = (Date.now() - started) / 1000;
    const alive = await engine.request('GET', '/_ping').then((r) => r.status === 200, () => false);
    const rssAfter = rssBytes(pid);
    const summary = [...statuses.entries()].sort((x, y) => x[0] - y[0]).map(([s, n]) => `${s}: ${n}`).join(', ');
    t.diagnostic(`${sent} requests (${afterSweep} in the sweep) in ${seconds.toFixed(1)} s; statuses ${summary}`);
    t.diagnostic(`daemon RSS ${(rssBefore / 2 ** 20).toFixed(1)} MB before, ${((rssAfter ?? 0) / 2 ** 20).toFixed(1)} MB after`);
    if (failures.length) {
      // One line per distinct route, status and message, so that one bug does not hide the others.
      const seen = new Map<string, { f: Failure; n: number }>();
      for (const f of failures) {
        const key = `${f.status} ${f.request.split(' ')[0]} ${f.request.split(' ')[1]!.split('?')[0]!.slice(0, 60)} ${f.detail.slice(0, 80)}`;
        const entry = seen.get(key);
        if (entry) entry.n++;
        else seen.set(key, { f, n: 1 });
      }
      const lines = [...seen.values()].map(({ f, n }) => `  ${f.status} ${f.request} -> ${f.detail.replace(/\s*\n\s*/g, ' | ')}${n > 1 ? ` (x${n})` : ''}`);
      // The daemon's log (its errors carry their stacks) is kept for the one who reads the failures.
      const logFile = path.join(os.tmpdir(), `berth-fuzz-${SEED}.log`);
      writeFileSync(logFile, engine.daemonLog);
      console.log(`fuzz failures (seed ${SEED}; the daemon's log is in ${logFile}):\n${lines.join('\n')}`);
    }
    assert.ok(alive && rssAfter !== undefined, `the daemon died (seed ${SEED}):\n${engine.daemonLog.slice(-3000)}`);
    assert.deepEqual(failures.map((f) => `${f.status} ${f.request} -> ${f.detail}`).slice(0, 40), [], `seed ${SEED}: ${failures.length} failures`);
    assert.ok(rssAfter! < rssBefore + 100 * 2 ** 20, `RSS grew from ${rssBefore} to ${rssAfter}`);
  });
});
