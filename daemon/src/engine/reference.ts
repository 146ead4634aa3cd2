/**
 * Image references, resolved as Docker resolves them: `busybox` is `docker.io/library/busybox:latest`,
 * `localhost:5000/app:v1` names a registry with a port, `name@sha256:<hex>` pins a digest, and output uses
 * the familiar form (`busybox:latest`, `me/app:v1`, `localhost:5000/app:v1`).
 */
import { InvalidParameter } from '../errors.js';
import { compileLinear, type LinearRegExp } from './regexp.js';

export const DEFAULT_DOMAIN = 'docker.io';
const LEGACY_DEFAULT_DOMAIN = 'index.docker.io';
const OFFICIAL_REPO_PREFIX = 'library/';
export const DEFAULT_TAG = 'latest';
const NAME_TOTAL_LENGTH_MAX = 255;

const alphaNumeric = '[a-z0-9]+';
const separator = '(?:[._]|__|[-]+)';
const pathComponent = `${alphaNumeric}(?:${separator}${alphaNumeric})*`;
const domainComponent = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const ipv6 = '\\[(?:[a-fA-F0-9:]+)\\]';
const domainName = `${domainComponent}(?:\\.${domainComponent})*`;
const host = `(?:${domainName}|${ipv6})`;
const domain = `${host}(?::[0-9]+)?`;
const tagPattern = '[\\w][\\w.-]{0,127}';
const digestPattern = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][0-9a-fA-F]{32,}';
const namePattern = `(?:${domain}/)?${pathComponent}(?:/${pathComponent})*`;
const referenceRegex = new RegExp(`^(${namePattern})(?::(${tagPattern}))?(?:@(${digestPattern}))?$`);
const anchoredTag = new RegExp(`^${tagPattern}$`);
const anchoredIdentifier = /^[a-f0-9]{64}$/;

/** A parsed, normalised reference. `name` is fully qualified (`docker.io/library/busybox`). */
export interface Reference {
  domain: string;
  /** The path below the domain (`library/busybox`). */
  path: string;
  /** `domain/path`. */
  name: string;
  tag?: string;
  digest?: string;
}

function splitDomain(name: string): [string, string] {
  const i = name.indexOf('/');
  let domainPart: string;
  let rest: string;
  const first = i === -1 ? '' : name.slice(0, i);
  if (i === -1 || (!first.includes('.') && !first.includes(':') && first !== 'localhost' && first.toLowerCase() === first)) {
    domainPart = DEFAULT_DOMAIN;
    rest = name;
  } else {
    domainPart = first;
    rest = name.slice(i + 1);
  }
  if (domainPart === LEGACY_DEFAULT_DOMAIN) domainPart = DEFAULT_DOMAIN;
  if (domainPart === DEFAULT_DOMAIN && !rest.includes('/')) rest = OFFICIAL_REPO_PREFIX + rest;
  return [domainPart, rest];
}

/**
 * Parses a reference as a user writes it and normalises it (default domain, `library/`). A missing tag
 * stays missing: see `withDefaultTag`. Bad references are InvalidParameter errors with Docker's wording.
 */
export function parseReference(text: string): Reference {
  if (text === '') throw new InvalidParameter('invalid reference format: repository name must have at least one component');
  if (anchoredIdentifier.test(text)) {
    throw new InvalidParameter(`invalid repository name (${text}), cannot specify 64-byte hexadecimal strings`);
  }
  const m = referenceRegex.exec(text);
  if (!m) {
    if (referenceRegex.test(text.toLowerCase())) throw new InvalidParameter(`invalid reference format: repository name (${text}) must be lowercase`);
    throw new InvalidParameter(`invalid reference format: ${JSON.stringify(text)}`);
  }
  const [, rawName, tag, digest] = m;
  const [domainPart, path] = splitDomain(rawName);
  if (path.toLowerCase() !== path) throw new InvalidParameter(`invalid reference format: repository name (${rawName}) must be lowercase`);
  const name = `${domainPart}/${path}`;
  if (name.length > NAME_TOTAL_LENGTH_MAX) throw new InvalidParameter(`invalid reference format: repository name must not be more than ${NAME_TOTAL_LENGTH_MAX} characters`);
  if (digest && !/^sha256:[a-f0-9]{64}$/.test(digest)) throw new InvalidParameter(`invalid reference format: unsupported digest ${digest}`);
  return { domain: domainPart, path, name, tag: tag || undefined, digest: digest || undefined };
}

/** The reference with `latest` when it has neither tag nor digest. */
export function withDefaultTag(ref: Reference): Reference {
  return ref.tag === undefined && ref.digest === undefined ? { ...ref, tag: DEFAULT_TAG } : ref;
}

/** Parses a reference and gives it the default tag when it has neither tag nor digest. */
export function parseNormalizedNamed(text: string): Reference {
  return withDefaultTag(parseReference(text));
}

/** Checks a tag on its own (the `tag` query parameter). */
export function validateTag(tag: string): void {
  if (!anchoredTag.test(tag)) throw new InvalidParameter(`invalid tag format: ${JSON.stringify(tag)}`);
}

/** `docker.io/library/busybox` -> `busybox`; `docker.io/me/app` -> `me/app`; other domains stay. */
export function familiarName(name: string): string {
  const [domainPart, path] = name.includes('/') ? [name.slice(0, name.indexOf('/')), name.slice(name.indexOf('/') + 1)] : ['', name];
  if (domainPart === DEFAULT_DOMAIN) return path.startsWith(OFFICIAL_REPO_PREFIX) && !path.slice(OFFICIAL_REPO_PREFIX.length).includes('/') ? path.slice(OFFICIAL_REPO_PREFIX.length) : path;
  return name;
}

/** The full text of a reference (`docker.io/library/busybox:latest`). */
export function referenceString(ref: Reference): string {
  return `${ref.name}${ref.tag !== undefined ? `:${ref.tag}` : ''}${ref.digest !== undefined ? `@${ref.digest}` : ''}`;
}

/** The familiar text of a reference (`busybox:latest`). */
export function familiarString(ref: Reference): string {
  return `${familiarName(ref.name)}${ref.tag !== undefined ? `:${ref.tag}` : ''}${ref.digest !== undefined ? `@${ref.digest}` : ''}`;
}

/** Familiar text of a full reference string (`docker.io/library/busybox:latest` -> `busybox:latest`). */
export function familiarizeString(full: string): string {
  return familiarString(parseReference(full));
}

/**
 * Matches a familiar or full reference against a `reference` filter pattern the way Docker does: the
 * pattern is a path glob (`*` does not cross `/`) tried against the familiar name with and without tag.
 */
export function matchReferencePattern(pattern: string, ref: Reference): boolean {
  const familiar = familiarName(ref.name);
  const candidates = [familiar, ref.name];
  if (ref.tag !== undefined) candidates.push(`${familiar}:${ref.tag}`, `${ref.name}:${ref.tag}`);
  if (ref.digest !== undefined) candidates.push(`${familiar}@${ref.digest}`, `${ref.name}@${ref.digest}`);
  const regex = globToRegex(pattern);
  return candidates.some((c) => regex.test(c));
}

function globToRegex(pattern: string): LinearRegExp {
  let source = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '*') source += '[^/]*';
    else if (c === '?') source += '[^/]';
    else if (c === '[') {
      const end = pattern.indexOf(']', i + 1);
      if (end === -1) throw new InvalidParameter(`invalid reference filter pattern ${JSON.stringify(pattern)}`);
      let cls = pattern.slice(i + 1, end);
      if (cls.startsWith('^') || cls.startsWith('!')) cls = '^' + cls.slice(1);
      source += `[${cls.replace(/\\/g, '\\\\')}]`;
      i = end;
    } else if (c === '\\' && i + 1 < pattern.length) {
      source += pattern[++i].replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
    } else source += c.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  }
  return compileLinear(`^${source}$`, 'reference filter pattern');
}

/** True when the text looks like an image id or a prefix of one (hex, optionally with `sha256:`). */
export function looksLikeIdPrefix(text: string): boolean {
  return /^(sha256:)?[a-f0-9]{1,64}$/.test(text);
}
