/**
 * Credentials and challenges: the `X-Registry-Auth` header (base64url JSON AuthConfig), the
 * `WWW-Authenticate` challenges of a registry (Basic, or Bearer with realm/service/scope), and the token
 * server exchange (GET with basic credentials, or POST with a refresh token, as distribution's token
 * spec describes).
 */
import { InvalidParameter, Unauthorized } from '../../../errors.js';
import { readSmall, send } from './http.js';

export interface AuthConfig {
  username?: string;
  password?: string;
  auth?: string;
  email?: string;
  serveraddress?: string;
  identitytoken?: string;
  registrytoken?: string;
}

/** Decodes `X-Registry-Auth` (base64url or base64 of a JSON AuthConfig); empty or `{}` is anonymous. */
export function parseAuthHeader(header: string | undefined): AuthConfig | undefined {
  if (!header || header.trim() === '') return undefined;
  let json: string;
  try {
    json = Buffer.from(header.trim().replace(/-/g, '+').replace(/_/g, '/'), 'base64').toString('utf8');
  } catch (err) {
    throw new InvalidParameter('invalid X-Registry-Auth header: not base64', { cause: err });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch (err) {
    throw new InvalidParameter('invalid X-Registry-Auth header: not base64 encoded JSON', { cause: err });
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new InvalidParameter('invalid X-Registry-Auth header: not a JSON object');
  return normaliseAuth(parsed as Record<string, unknown>);
}

/** Accepts the field spellings clients use (docker-py sends `Username`...) and the combined `auth`. */
export function normaliseAuth(raw: Record<string, unknown>): AuthConfig | undefined {
  const pick = (key: string): string | undefined => {
    for (const [k, v] of Object.entries(raw)) if (k.toLowerCase() === key && typeof v === 'string' && v !== '') return v;
    return undefined;
  };
  const out: AuthConfig = {
    username: pick('username'),
    password: pick('password'),
    email: pick('email'),
    serveraddress: pick('serveraddress'),
    identitytoken: pick('identitytoken'),
    registrytoken: pick('registrytoken'),
  };
  const combined = pick('auth');
  if (combined && !out.username) {
    const text = Buffer.from(combined, 'base64').toString('utf8');
    const colon = text.indexOf(':');
    if (colon > 0) {
      out.username = text.slice(0, colon);
      out.password = text.slice(colon + 1);
    }
  }
  if (!out.username && !out.password && !out.identitytoken && !out.registrytoken) return undefined;
  return out;
}

export interface Challenge {
  scheme: string;
  params: Record<string, string>;
}

/** Parses `WWW-Authenticate` (`Bearer realm="...",service="...",scope="..."`, `Basic realm="..."`). */
export function parseChallenges(header: string | string[] | undefined): Challenge[] {
  if (!header) return [];
  const text = Array.isArray(header) ? header.join(', ') : header;
  const out: Challenge[] = [];
  const re = /([A-Za-z][A-Za-z0-9_-]*)(?:\s+|$)((?:\s*,?\s*[A-Za-z0-9_-]+\s*=\s*(?:"(?:[^"\\]|\\.)*"|[^,\s]*))*)/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(text)) !== null) {
    if (m[0] === '') {
      re.lastIndex++;
      continue;
    }
    const params: Record<string, string> = {};
    for (const p of m[2].matchAll(/([A-Za-z0-9_-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^,\s]*))/g)) {
      params[p[1].toLowerCase()] = p[2] !== undefined ? p[2].replace(/\\(.)/g, '$1') : p[3];
    }
    out.push({ scheme: m[1].toLowerCase(), params });
  }
  return out;
}

export function basicHeader(auth: AuthConfig): string | undefined {
  if (auth.username === undefined || auth.password === undefined) return undefined;
  return `Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString('base64')}`;
}

export interface TokenAnswer {
  token: string;
  refreshToken?: string;
  /** Milliseconds since the epoch when the token expires. */
  expires: number;
}

/**
 * Asks a token server for a bearer token for `scopes`. With an identity token it uses the OAuth2
 * refresh grant (POST); with a password, a GET with basic credentials (`offline` asks for a refresh
 * token, as `docker login` does). A refusal is Unauthorized with the server's words.
 */
export async function fetchToken(
  challenge: Challenge,
  scopes: string[],
  auth: AuthConfig | undefined,
  opts: { offline?: boolean; skipVerify?: boolean; signal?: AbortSignal } = {},
): Promise<TokenAnswer> {
  const realm = challenge.params.realm;
  if (!realm) throw new Unauthorized('the registry asked for a bearer token without naming a token server (realm)');
  let realmUrl: URL;
  try {
    realmUrl = new URL(realm);
  } catch {
    throw new Unauthorized(`the registry named an invalid token server ${JSON.stringify(realm)}`);
  }
  const service = challenge.params.service;
  let res;
  if (auth?.identitytoken) {
    const form = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: auth.identitytoken, client_id: 'docker' });
    if (service) form.set('service', service);
    if (scopes.length > 0) form.set('scope', scopes.join(' '));
    res = await send({
      method: 'POST',
      url: realmUrl.toString(),
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: form.toString(),
      skipVerify: opts.skipVerify,
      signal: opts.signal,
    });
  } else {
    if (service) realmUrl.searchParams.set('service', service);
    for (const scope of scopes) realmUrl.searchParams.append('scope', scope);
    const headers: Record<string, string> = {};
    const basic = auth ? basicHeader(auth) : undefined;
    if (basic) {
      headers.Authorization = basic;
      realmUrl.searchParams.set('account', auth!.username!);
      if (opts.offline) {
        realmUrl.searchParams.set('offline_token', 'true');
        realmUrl.searchParams.set('client_id', 'docker');
      }
    }
    res = await send({ method: 'GET', url: realmUrl.toString(), headers, skipVerify: opts.skipVerify, signal: opts.signal });
  }
  const body = await readSmall(res, 1024 * 1024);
  if (res.statusCode === 401 || res.statusCode === 403) {
    throw new Unauthorized(`unauthorized: the token server ${realmUrl.origin} refused the credentials${detailOf(body)}`);
  }
  if (res.statusCode !== 200) throw new Unauthorized(`the token server ${realmUrl.origin} answered ${res.statusCode}${detailOf(body)}`);
  let parsed: { token?: string; access_token?: string; refresh_token?: string; expires_in?: number };
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    throw new Unauthorized(`the token server ${realmUrl.origin} answered something other than JSON`);
  }
  const token = parsed.access_token || parsed.token;
  if (!token) throw new Unauthorized(`the token server ${realmUrl.origin} answered no token`);
  const lifetime = typeof parsed.expires_in === 'number' && parsed.expires_in > 0 ? parsed.expires_in : 60;
  return { token, refreshToken: parsed.refresh_token || undefined, expires: Date.now() + lifetime * 1000 };
}

function detailOf(body: Buffer): string {
  const text = body.toString('utf8').trim();
  if (!text) return '';
  try {
    const parsed = JSON.parse(text) as { details?: string; message?: string; errors?: Array<{ message?: string }> };
    const msg = parsed.details ?? parsed.message ?? parsed.errors?.map((e) => e.message).join('; ');
    if (msg) return `: ${msg}`;
  } catch {
    // not JSON
  }
  return `: ${text.slice(0, 200)}`;
}
