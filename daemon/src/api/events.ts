/**
 * GET /events: the engine's events as a stream of JSON records, one per event, each flushed as it
 * happens. `since` replays what the event bus still holds; `until` ends the stream; the stream also ends
 * when the client goes away.
 *
 * Content types: application/json below 1.52; from 1.52 the Accept header chooses between
 * application/x-ndjson and application/json-seq (RFC 7464: each record starts with 0x1E), and from 1.53
 * also application/jsonl. All of them end each record with a line feed.
 */
import type { EngineEvent, EventBus } from '../engine/events.js';
import { InvalidParameter } from '../errors.js';
import { exactMatch, matchLabels, prefixMatch } from '../engine/filters.js';
import { log } from '../util/log.js';
import { nowNano, parseTimestamp, stringifyWithBigInt } from '../util/json.js';
import { eventActionShown, shape, supports } from './compat.js';
import type { ApiRequest, ApiResponse } from './http.js';
import { filterParam, type Filters } from './params.js';
import type { Router } from './router.js';
import type { ApiMinor } from './version.js';

export const EVENT_FILTERS = [
  'config', 'container', 'daemon', 'event', 'image', 'label', 'network', 'node', 'plugin', 'scope',
  'secret', 'service', 'type', 'volume',
] as const;

/** A client that reads slower than events come is cut off once this much output waits for it. */
const MAX_PENDING_OUTPUT = 8 * 1024 * 1024;

const RECORD_SEPARATOR = '\u001e';

export type EventsContentType = 'application/json' | 'application/x-ndjson' | 'application/json-seq' | 'application/jsonl';

/** Picks the stream's content type from the Accept header for the request's version. */
export function negotiateEventsContentType(accept: string | undefined, version: ApiMinor): EventsContentType {
  if (!supports(version, 'events.contentTypes')) return 'application/json';
  const offered: EventsContentType[] = ['application/x-ndjson', 'application/json-seq'];
  if (supports(version, 'events.jsonl')) offered.push('application/jsonl');
  if (!accept) return 'application/json';
  const ranges = accept
    .split(',')
    .map((part, index) => {
      const [type, ...params] = part.split(';').map((s) => s.trim().toLowerCase());
      const q = params.map((p) => /^q=([\d.]+)$/.exec(p)).find(Boolean);
      return { type, q: q ? Number(q[1]) : 1, index };
    })
    .filter((r) => r.type && r.q > 0)
    .sort((a, b) => b.q - a.q || a.index - b.index);
  for (const range of ranges) {
    const hit = offered.find((t) => t === range.type);
    if (hit) return hit;
    if (range.type === 'application/json') return 'application/json';
  }
  return 'application/json';
}

/**
 * Parses since/until: Unix seconds with an optional fraction, RFC 3339, or a duration before now
 * ("10m", "1h30m", as the Go client also accepts). Returns nanoseconds since the epoch.
 */
export function parseEventTime(name: string, text: string, now: bigint = nowNano()): bigint {
  const ts = parseTimestamp(text);
  if (ts !== undefined) return ts;
  const units: Record<string, bigint> = { ns: 1n, us: 1_000n, µs: 1_000n, ms: 1_000_000n, s: 1_000_000_000n, m: 60_000_000_000n, h: 3_600_000_000_000n };
  if (/^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/.test(text)) {
    let total = 0n;
    for (const m of text.matchAll(/(\d+)(?:\.(\d+))?(ns|us|µs|ms|s|m|h)/g)) {
      const unit = units[m[3]];
      total += BigInt(m[1]) * unit;
      if (m[2]) total += (BigInt(m[2].slice(0, 9).padEnd(9, '0')) * unit) / 1_000_000_000n;
    }
    return now - total;
  }
  throw new InvalidParameter(`invalid value for ${name}: ${JSON.stringify(text)} is neither a Unix timestamp, an RFC 3339 time nor a duration`);
}

/** The name part of an image reference without tag, digest or the default registry. */
function familiarName(ref: string): string {
  let name = ref.replace(/@.*$/, '');
  const slash = name.lastIndexOf('/');
  const colon = name.lastIndexOf(':');
  if (colon > slash) name = name.slice(0, colon);
  return name.replace(/^docker\.io\/library\//, '').replace(/^(docker\.io|index\.docker\.io)\//, '');
}

/** Whether an event passes the filters, with Docker's rules for each key. */
export function eventMatches(event: EngineEvent, filters: Filters): boolean {
  const attrs = event.Actor.Attributes;
  const byName = (key: string) => {
    const values = filters.get(key);
    if (!values || values.length === 0) return true;
    return prefixMatch(values, event.Actor.ID) || prefixMatch(values, attrs.name);
  };
  const eventValues = filters.get('event');
  // exec_create, exec_start and health_status carry a suffix (": command", ": healthy"): match their prefix.
  const actionOk = eventValues?.some((v) => v === 'exec_create' || v === 'exec_start' || v === 'health_status')
    ? prefixMatch(eventValues, event.Action)
    : exactMatch(eventValues, event.Action);
  if (!actionOk) return false;
  if (!exactMatch(filters.get('type'), event.Type)) return false;
  if (!exactMatch(filters.get('scope'), event.scope)) return false;
  for (const key of ['container', 'daemon', 'plugin', 'volume', 'network', 'node', 'service', 'secret', 'config']) {
    if (!byName(key)) return false;
  }
  const images = filters.get('image');
  if (images && images.length > 0) {
    const imageName = event.Type === 'image' ? attrs.name : attrs.image;
    const candidates = [event.Actor.ID, imageName, familiarName(event.Actor.ID), imageName && familiarName(imageName)];
    if (!candidates.some((c) => c !== undefined && images.includes(c))) return false;
  }
  return matchLabels(filters.get('label'), attrs);
}

/** The record for one event in the requested version (a copy: events are shared between subscribers). */
export function eventRecord(event: EngineEvent, version: ApiMinor): Record<string, unknown> {
  const copy: Record<string, unknown> = { ...event, Actor: { ID: event.Actor.ID, Attributes: { ...event.Actor.Attributes } } };
  for (const key of ['status', 'id', 'from']) if (copy[key] === undefined) delete copy[key];
  return shape('event', version, copy);
}

export interface EventsApi {
  /** Clients streaming /events right now. */
  listeners(): number;
}

export function registerEventsRoutes(router: Router, bus: EventBus): EventsApi {
  let listeners = 0;

  router.get('/events', async (req: ApiRequest, res: ApiResponse) => {
    const filters = filterParam(req, EVENT_FILTERS);
    const now = nowNano();
    const sinceText = req.query.get('since');
    const untilText = req.query.get('until');
    const since = sinceText ? parseEventTime('since', sinceText, now) : undefined;
    const until = untilText ? parseEventTime('until', untilText, now) : undefined;
    if (since !== undefined && until !== undefined && until < since) {
      throw new InvalidParameter(`since time (${sinceText}) cannot be after until time (${untilText})`);
    }
    const contentType = negotiateEventsContentType(req.header('accept'), req.version);
    const prefix = contentType === 'application/json-seq' ? RECORD_SEPARATOR : '';

    // Subscribe before reading the history, so that nothing published in between is lost; the strictly
    // increasing timeNano drops what the replay already sent.
    const queued: EngineEvent[] = [];
    let deliver: ((e: EngineEvent) => void) | undefined;
    const unsubscribe = bus.subscribe((e) => (deliver ? deliver(e) : queued.push(e)));
    listeners++;
    let timer: NodeJS.Timeout | undefined;
    let finished = false;
    const out = res.stream(200, contentType);
    const finish = () => {
      if (finished) return;
      finished = true;
      unsubscribe();
      listeners--;
      if (timer) clearTimeout(timer);
      req.signal.removeEventListener('abort', finish);
      if (!out.writableEnded && !out.destroyed) out.end();
    };
    req.signal.addEventListener('abort', finish);
    out.on('close', finish);
    out.on('error', finish);

    let lastSent = -1n;
    const send = (e: EngineEvent) => {
      if (finished || e.timeNano <= lastSent) return;
      if (since !== undefined && e.timeNano < since) return;
      if (!eventMatches(e, filters) || !eventActionShown(e.Action, req.version)) return;
      lastSent = e.timeNano;
      out.write(prefix + stringifyWithBigInt(eventRecord(e, req.version)) + '\n');
      if (out.writableLength > MAX_PENDING_OUTPUT) {
        log.warn('closing an events stream whose client does not read', { pending: out.writableLength });
        out.destroy();
        finish();
      }
    };

    if (since !== undefined || until !== undefined) {
      for (const e of bus.past(since ?? 0n, until)) send(e);
    }
    if (until !== undefined && until <= now) {
      finish();
      return;
    }
    for (const e of queued.splice(0)) if (until === undefined || e.timeNano <= until) send(e);
    deliver = (e) => {
      if (until !== undefined && e.timeNano > until) return;
      send(e);
    };
    if (until !== undefined) {
      // setTimeout holds at most 2^31-1 ms; a later `until` re-arms the timer.
      const arm = () => {
        const left = Number((until - nowNano()) / 1_000_000n) + 1;
        if (left <= 0) return finish();
        timer = setTimeout(arm, Math.min(left, 2 ** 31 - 1));
      };
      arm();
    }
    if (req.signal.aborted) finish();
  });

  return { listeners: () => listeners };
}
