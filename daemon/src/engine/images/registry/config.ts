/**
 * Which registries are reached how: Docker Hub's names (`docker.io` is served at registry-1.docker.io,
 * mirrors tried first), insecure registries (plain HTTP allowed, certificates not checked) by CIDR or by
 * host[:port], loopback insecure by default as in Docker.
 */
import net from 'node:net';
import { InvalidParameter } from '../../../errors.js';
import { DEFAULT_DOMAIN } from '../../reference.js';

export const DOCKER_HUB_HOST = 'registry-1.docker.io';
export const DOCKER_HUB_INDEX = 'https://index.docker.io/v1/';

export interface RegistryOptions {
  /** `--registry-mirror` URLs for docker.io. */
  mirrors?: string[];
  /** `--insecure-registry`: CIDRs or host[:port] names. */
  insecure?: string[];
}

/** One place to try for a registry: base URL (scheme://host[:port]) and whether TLS may be skipped. */
export interface Endpoint {
  url: string;
  /** Certificates are not verified (insecure registry over https). */
  skipVerify: boolean;
  /** A mirror of Docker Hub (failures fall through to the next endpoint). */
  mirror: boolean;
}

interface Cidr {
  family: 4 | 6;
  bits: bigint;
  prefix: number;
}

function ipBits(ip: string): { family: 4 | 6; bits: bigint } | undefined {
  if (net.isIPv4(ip)) return { family: 4, bits: ip.split('.').reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n) };
  if (net.isIPv6(ip)) {
    const [head, tail] = ip.includes('::') ? ip.split('::') : [ip, undefined];
    const h = head ? head.split(':') : [];
    const t = tail !== undefined && tail !== '' ? tail.split(':') : [];
    const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
    if (groups.length !== 8) return undefined;
    return { family: 6, bits: groups.reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g || '0', 16)), 0n) };
  }
  return undefined;
}

function parseCidr(text: string): Cidr | undefined {
  const m = /^(.+)\/(\d{1,3})$/.exec(text);
  if (!m) return undefined;
  const ip = ipBits(m[1]);
  const prefix = Number(m[2]);
  if (!ip || prefix > (ip.family === 4 ? 32 : 128)) return undefined;
  return { family: ip.family, bits: ip.bits, prefix };
}

function inCidr(ip: { family: 4 | 6; bits: bigint }, cidr: Cidr): boolean {
  if (ip.family !== cidr.family) return false;
  const width = BigInt(cidr.family === 4 ? 32 : 128);
  const shift = width - BigInt(cidr.prefix);
  return ip.bits >> shift === cidr.bits >> shift;
}

/** Host part of `host[:port]` (IPv6 in brackets). */
export function hostOf(domain: string): string {
  if (domain.startsWith('[')) return domain.slice(1, domain.indexOf(']'));
  const colon = domain.lastIndexOf(':');
  return colon === -1 ? domain : domain.slice(0, colon);
}

export class RegistryConfig {
  readonly mirrors: string[];
  readonly insecureCidrs: string[];
  readonly insecureNames: string[];
  private readonly cidrs: Cidr[];

  constructor(opts: RegistryOptions = {}) {
    this.mirrors = (opts.mirrors ?? []).map((m) => {
      let url: URL;
      try {
        url = new URL(m);
      } catch {
        throw new InvalidParameter(`invalid registry mirror ${JSON.stringify(m)}: expected an http(s) URL`);
      }
      if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new InvalidParameter(`invalid registry mirror ${JSON.stringify(m)}: expected an http(s) URL`);
      return url.origin;
    });
    const cidrs = ['127.0.0.0/8', '::1/128'];
    const names: string[] = [];
    for (const entry of opts.insecure ?? []) {
      const clean = entry.replace(/^https?:\/\//, '').replace(/\/$/, '');
      if (parseCidr(clean)) cidrs.push(clean);
      else names.push(clean);
    }
    this.insecureCidrs = [...new Set(cidrs)];
    this.insecureNames = names;
    this.cidrs = this.insecureCidrs.map((c) => parseCidr(c)!);
  }

  /** True when plain HTTP is allowed for the registry `domain` (host[:port]). */
  isInsecure(domain: string): boolean {
    if (this.insecureNames.includes(domain) || this.insecureNames.includes(hostOf(domain))) return true;
    let host = hostOf(domain);
    if (host === 'localhost') host = '127.0.0.1';
    const ip = ipBits(host);
    return ip !== undefined && this.cidrs.some((c) => inCidr(ip, c));
  }

  /** The places to try for a registry domain, in order. */
  endpoints(domain: string): Endpoint[] {
    if (domain === DEFAULT_DOMAIN) {
      return [
        ...this.mirrors.map((url) => ({ url, skipVerify: false, mirror: true })),
        { url: `https://${DOCKER_HUB_HOST}`, skipVerify: false, mirror: false },
      ];
    }
    if (this.isInsecure(domain)) {
      return [
        { url: `https://${domain}`, skipVerify: true, mirror: false },
        { url: `http://${domain}`, skipVerify: true, mirror: false },
      ];
    }
    return [{ url: `https://${domain}`, skipVerify: false, mirror: false }];
  }

  /** The RegistryConfig section of /info. */
  info(): Record<string, unknown> {
    const indexConfigs: Record<string, unknown> = {
      'docker.io': { Name: 'docker.io', Mirrors: this.mirrors.map((m) => `${m}/`), Secure: true, Official: true },
    };
    for (const name of this.insecureNames) indexConfigs[name] = { Name: name, Mirrors: [], Secure: false, Official: false };
    return { InsecureRegistryCIDRs: this.insecureCidrs, IndexConfigs: indexConfigs, Mirrors: this.mirrors.map((m) => `${m}/`) };
  }
}

/**
 * The registry domain of a login's server address, as the CLI sends it: `127.0.0.1:5000`,
 * `https://index.docker.io/v1/` (Docker Hub), `https://registry.example.com/`.
 */
export function domainOfServerAddress(address: string | undefined): string {
  if (!address) return DEFAULT_DOMAIN;
  let text = address.trim();
  if (/^https?:\/\//.test(text)) {
    try {
      text = new URL(text).host;
    } catch {
      throw new InvalidParameter(`invalid registry address ${JSON.stringify(address)}`);
    }
  } else text = text.replace(/\/.*$/, '');
  if (text === 'index.docker.io' || text === DOCKER_HUB_HOST || text === 'docker.io' || text === '') return DEFAULT_DOMAIN;
  return text;
}
