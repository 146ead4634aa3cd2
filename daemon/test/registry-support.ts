/**
 * Test registries: Debian's `docker-registry` (distribution 2.8) on 127.0.0.1 on a free port, with a
 * generated configuration in a temporary folder: no auth, htpasswd basic auth (bcrypt), or token auth
 * backed by a small token server in this process (RS256 JWTs carrying their certificate in `x5c`, the
 * certificate trusted by the registry's `rootcertbundle`). Plus plain-HTTP helpers to put blobs and
 * manifests straight into a registry (to build multi-platform indexes and odd images in tests).
 *
 * Every registry a test starts is stopped by PID and its folder removed by `stop()`.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash, createSign, randomBytes, X509Certificate } from 'node:crypto';
import { mkdtempSync, promises as fs, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './tcp-support.js';
/** Kept here too for the tests that take it with the registry's helpers. */
export { freePort } from './tcp-support.js';

export type RegistryAuth = 'none' | 'basic' | 'token';

export interface RegistryStartOptions {
  auth?: RegistryAuth;
  /** user -> password (basic and token auth). */
  users?: Record<string, string>;
  /** Token auth: anonymous users get pull access (as on Docker Hub). Default true. */
  anonymousPull?: boolean;
}

export interface TestRegistry {
  port: number;
  /** `127.0.0.1:PORT` */
  host: string;
  root: string;
  /** The registry's storage folder (filesystem driver). */
  storage: string;
  /** Requests the token server saw (token auth). */
  tokenRequests: Array<{ method: string; scope: string[]; account?: string; grant?: string }>;
  /** An Authorization header value for direct HTTP requests with full access. */
  adminAuth(scope: string): Promise<string | undefined>;
  stop(): Promise<void>;
}

export function haveRegistry(): boolean {
  return spawnSync('docker-registry', ['--version']).status === 0;
}

/** A bcrypt hash for an htpasswd file (htpasswd from apache2-utils, else python3's crypt). */
function bcrypt(password: string): string {
  // A low cost: the registry checks the hash on every request.
  const htpasswd = spawnSync('htpasswd', ['-nbB', '-C', '5', 'u', password], { encoding: 'utf8' });
  if (htpasswd.status === 0) return htpasswd.stdout.trim().split(':')[1];
  const py = spawnSync('python3', ['-W', 'ignore', '-c', 'import crypt,sys; print(crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=32)))', password], {
    encoding: 'utf8',
  });
  if (py.status !== 0 || !py.stdout.startsWith('$2')) throw new Error(`cannot make a bcrypt hash: install apache2-utils (htpasswd): ${py.stderr}`);
  return py.stdout.trim();
}

function b64url(data: Buffer | string): string {
  return Buffer.from(data).toString('base64url');
}

interface TokenServer {
  url: string;
  close(): Promise<void>;
  sign(subject: string, access: Array<{ type: string; name: string; actions: string[] }>): string;
}

/** Grants: a known user gets pull and push everywhere; anonymous users get pull when allowed. */
async function startTokenServer(
  root: string,
  users: Record<string, string>,
  anonymousPull: boolean,
  log: TestRegistry['tokenRequests'],
): Promise<TokenServer & { certFile: string }> {
  const keyFile = path.join(root, 'token.key');
  const certFile = path.join(root, 'token.crt');
  const made = spawnSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '2', '-subj', '/CN=berth-test-token-issuer'], {
    encoding: 'utf8',
  });
  if (made.status !== 0) throw new Error(`openssl: ${made.stderr}`);
  const key = readFileSync(keyFile, 'utf8');
  const certDer = new X509Certificate(readFileSync(certFile)).raw;
  const refreshTokens = new Map<string, string>();
  const sign = (subject: string, access: Array<{ type: string; name: string; actions: string[] }>): string => {
    const header = { typ: 'JWT', alg: 'RS256', x5c: [certDer.toString('base64')] };
    const now = Math.floor(Date.now() / 1000);
    const claims = { iss: 'berth-test-issuer', sub: subject, aud: 'berth-test-registry', exp: now + 600, nbf: now - 60, iat: now, jti: randomBytes(8).toString('hex'), access };
    const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(claims))}`;
    const signature = createSign('RSA-SHA256').update(input).sign(key);
    return `${input}.${b64url(signature)}`;
  };
  const grant = (user: string | undefined, scopes: string[]) =>
    scopes
      .map((s) => s.split(':'))
      .filter((parts) => parts.length >= 3 && parts[0] === 'repository')
      .map((parts) => {
        const actions = parts[parts.length - 1].split(',');
        const name = parts.slice(1, -1).join(':');
        return { type: 'repository', name, actions: user ? actions : anonymousPull ? actions.filter((a) => a === 'pull') : [] };
      });
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://x');
      const answer = (status: number, body: unknown) => {
        res.writeHead(status, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      let user: string | undefined;
      let scopes: string[];
      let offline = false;
      if (req.method === 'POST') {
        const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
        scopes = (form.get('scope') ?? '').split(' ').filter(Boolean);
        log.push({ method: 'POST', scope: scopes, grant: form.get('grant_type') ?? undefined });
        if (form.get('grant_type') === 'refresh_token') {
          user = refreshTokens.get(form.get('refresh_token') ?? '');
          if (!user) return answer(401, { details: 'invalid refresh token' });
        } else if (form.get('grant_type') === 'password') {
          const u = form.get('username') ?? '';
          if (users[u] === undefined || users[u] !== form.get('password')) return answer(401, { details: 'invalid username or password' });
          user = u;
          offline = form.get('access_type') === 'offline';
        } else return answer(400, { details: 'unsupported grant type' });
      } else {
        scopes = url.searchParams.getAll('scope').flatMap((s) => s.split(' ')).filter(Boolean);
        const authz = req.headers.authorization;
        log.push({ method: 'GET', scope: scopes, account: url.searchParams.get('account') ?? undefined });
        if (authz) {
          const m = /^Basic (.+)$/.exec(authz);
          const text = m ? Buffer.from(m[1], 'base64').toString('utf8') : '';
          const colon = text.indexOf(':');
          const u = text.slice(0, colon);
          if (colon < 0 || users[u] === undefined || users[u] !== text.slice(colon + 1)) return answer(401, { details: 'invalid username or password' });
          user = u;
          offline = url.searchParams.get('offline_token') === 'true';
        }
      }
      const token = sign(user ?? '', grant(user, scopes));
      const body: Record<string, unknown> = { token, access_token: token, expires_in: 600, issued_at: new Date().toISOString() };
      if (offline && user) {
        const refresh = `refresh-${randomBytes(12).toString('hex')}`;
        refreshTokens.set(refresh, user);
        body.refresh_token = refresh;
      }
      answer(200, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/token`,
    certFile,
    sign,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export async function startRegistry(opts: RegistryStartOptions = {}): Promise<TestRegistry> {
  const auth = opts.auth ?? 'none';
  const users = opts.users ?? {};
  const root = mkdtempSync(path.join(os.tmpdir(), 'berth-registry-'));
  const storage = path.join(root, 'storage');
  const port = await freePort();
  const tokenRequests: TestRegistry['tokenRequests'] = [];
  let tokenServer: (TokenServer & { certFile: string }) | undefined;
  let authSection = '';
  if (auth === 'basic') {
    const file = path.join(root, 'htpasswd');
    writeFileSync(file, Object.entries(users).map(([u, p]) => `${u}:${bcrypt(p)}\n`).join(''));
    authSection = `auth:\n  htpasswd:\n    realm: berth-test-realm\n    path: ${file}\n`;
  } else if (auth === 'token') {
    tokenServer = await startTokenServer(root, users, opts.anonymousPull ?? true, tokenRequests);
    authSection =
      `auth:\n  token:\n    realm: ${tokenServer.url}\n    service: berth-test-registry\n    issuer: berth-test-issuer\n` +
      `    rootcertbundle: ${tokenServer.certFile}\n`;
  }
  const configFile = path.join(root, 'config.yml');
  writeFileSync(
    configFile,
    `version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: ${storage}\n  delete:\n    enabled: true\n` +
      `  maintenance:\n    uploadpurging:\n      enabled: false\nhttp:\n  addr: 127.0.0.1:${port}\n${authSection}`,
  );
  const child: ChildProcess = spawn('docker-registry', ['serve', configFile], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await gone;
      clearTimeout(timer);
    }
    await tokenServer?.close();
    rmSync(root, { recursive: true, force: true });
  };
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) {
      await stop();
      throw new Error(`docker-registry exited: ${stderr}`);
    }
    const ok = await new Promise<boolean>((resolve) => {
      const req = http.get(`http://127.0.0.1:${port}/v2/`, (res) => {
        res.resume();
        resolve(res.statusCode === 200 || res.statusCode === 401);
      });
      req.on('error', () => resolve(false));
    });
    if (ok) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`docker-registry did not answer within 20 s: ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  const adminAuth = async (scope: string): Promise<string | undefined> => {
    if (auth === 'none') return undefined;
    const [user, password] = Object.entries(users)[0] ?? [];
    if (auth === 'basic') return `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
    const parts = scope.split(':');
    return `Bearer ${tokenServer!.sign(user ?? 'admin', [{ type: 'repository', name: parts.slice(1, -1).join(':'), actions: parts[parts.length - 1].split(',') }])}`;
  };
  return { port, host: `127.0.0.1:${port}`, root, storage, tokenRequests, adminAuth, stop };
}

export function digestOf(data: Buffer | string): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

async function rawRequest(
  method: string,
  url: string,
  body?: Buffer,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers: { ...headers, ...(body ? { 'Content-Length': String(body.length) } : {}) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Uploads a blob in one POST + PUT; returns its digest. */
export async function putBlob(registry: TestRegistry, repo: string, data: Buffer): Promise<string> {
  const digest = digestOf(data);
  const authz = await registry.adminAuth(`repository:${repo}:pull,push`);
  const headers: Record<string, string> = authz ? { Authorization: authz } : {};
  const start = await rawRequest('POST', `http://${registry.host}/v2/${repo}/blobs/uploads/`, Buffer.alloc(0), headers);
  if (start.status !== 202) throw new Error(`upload start ${start.status}: ${start.body}`);
  const location = new URL(String(start.headers.location), `http://${registry.host}/`);
  location.searchParams.set('digest', digest);
  const put = await rawRequest('PUT', location.toString(), data, { ...headers, 'Content-Type': 'application/octet-stream' });
  if (put.status !== 201) throw new Error(`upload ${put.status}: ${put.body}`);
  return digest;
}

/** Puts a manifest (or index) under a tag or digest; returns its digest. */
export async function putManifest(registry: TestRegistry, repo: string, reference: string, manifest: unknown, mediaType: string): Promise<{ digest: string; size: number }> {
  const bytes = Buffer.isBuffer(manifest) ? manifest : Buffer.from(JSON.stringify(manifest));
  const authz = await registry.adminAuth(`repository:${repo}:pull,push`);
  const res = await rawRequest('PUT', `http://${registry.host}/v2/${repo}/manifests/${reference}`, bytes, {
    'Content-Type': mediaType,
    ...(authz ? { Authorization: authz } : {}),
  });
  if (res.status !== 201) throw new Error(`manifest put ${res.status}: ${res.body}`);
  return { digest: digestOf(bytes), size: bytes.length };
}

/** GET of a registry path (plain HTTP, full access). */
export async function getFromRegistry(registry: TestRegistry, urlPath: string, accept?: string): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
  const repo = /^\/v2\/(.+?)\/(?:manifests|blobs|tags)\//.exec(urlPath)?.[1] ?? '';
  const authz = await registry.adminAuth(`repository:${repo}:pull`);
  return rawRequest('GET', `http://${registry.host}${urlPath}`, undefined, { ...(accept ? { Accept: accept } : {}), ...(authz ? { Authorization: authz } : {}) });
}

/** The file the filesystem driver keeps a blob's bytes in. */
export function blobDataPath(registry: TestRegistry, digest: string): string {
  const hex = digest.replace(/^sha256:/, '');
  return path.join(registry.storage, 'docker', 'registry', 'v2', 'blobs', 'sha256', hex.slice(0, 2), hex, 'data');
}

/** Writes `bytes` over a blob's stored data (a registry serving corrupt content). */
export async function corruptBlob(registry: TestRegistry, digest: string, bytes: Buffer): Promise<void> {
  await fs.writeFile(blobDataPath(registry, digest), bytes);
}

/** `X-Registry-Auth` for the API. */
export function registryAuthHeader(auth: Record<string, string>): string {
  return Buffer.from(JSON.stringify(auth)).toString('base64url');
}
