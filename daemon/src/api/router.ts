import type { Permission } from '../engine/auth/store.js';
import { InvalidParameter } from '../errors.js';
import type { Handler } from './http.js';
import type { ErrorStyle } from './httpstatus.js';

/**
 * How a route is served. Engine routes (the default) sit under the `/v1.NN` version prefix and write errors as
 * `{"message"}`. Unversioned routes are the other interfaces served beside the engine API (`/v1/sandboxes/...`,
 * `/v2/scim/2.0/...`): matched on the whole path, never under a version prefix, each with its own error style
 * and the token permission it requires.
 */
export interface RouteOptions {
  unversioned?: boolean;
  errorStyle?: ErrorStyle;
  /** The bearer token's permission the route requires (checked before the handler runs, on every listener). */
  permission?: Permission;
  /**
   * Served only to the daemon's administrator: a peer of a unix socket running as root (or as the daemon's own
   * user), as the kernel says (SO_PEERCRED). Refused on TCP listeners, whatever the token.
   */
  localAdmin?: boolean;
  /** Served while the router is held (see Router.holdUntil): the route needs nothing of what is being restored. */
  beforeReady?: boolean;
}

interface Route {
  method: string;
  pattern: string;
  regex: RegExp;
  names: string[];
  handler: Handler;
  options: RouteOptions;
}

export interface RouteMatch {
  handler: Handler;
  params: Record<string, string>;
  options: RouteOptions;
}

/**
 * Routes by method and path. A pattern segment `:name` matches one path segment; `:name*` matches one or
 * more segments (image names hold slashes: `/images/:name*\/json`). Routes are tried in the order they
 * were added, so a more specific pattern goes first.
 */
export class Router {
  private readonly routes: Route[] = [];
  private held?: Promise<void>;
  /** Settles when a route marked `beforeReady` is added while the router is held. */
  private added?: { promise: Promise<void>; resolve: () => void };

  /**
   * Until `ready` settles, a request waits before it is routed (so that it finds the routes added meanwhile),
   * unless a route marked `beforeReady` serves it, added before or while it waits. If `ready` fails, so do the
   * requests that waited.
   */
  holdUntil(ready: Promise<unknown>): void {
    const held = ready.then(() => undefined);
    this.held = held;
    held.then(
      () => {
        if (this.held === held) this.held = undefined;
      },
      () => undefined,
    );
  }

  /** What a request must wait for before it is routed: nothing (undefined) when it can be routed now. */
  waitFor(method: string, path: string, unversioned = false): Promise<void> | undefined {
    if (!this.held || this.servesBeforeReady(method, path, unversioned)) return undefined;
    return this.waitLonger(method, path, unversioned);
  }

  private async waitLonger(method: string, path: string, unversioned: boolean): Promise<void> {
    while (this.held && !this.servesBeforeReady(method, path, unversioned)) {
      if (!this.added) {
        let resolve!: () => void;
        const promise = new Promise<void>((r) => (resolve = r));
        this.added = { promise, resolve };
      }
      await Promise.race([this.held, this.added.promise]);
    }
  }

  private servesBeforeReady(method: string, path: string, unversioned: boolean): boolean {
    return this.routes.some((r) => r.options.beforeReady && r.method === method && Boolean(r.options.unversioned) === unversioned && r.regex.test(path));
  }

  add(method: string, pattern: string, handler: Handler, options: RouteOptions = {}): this {
    const names: string[] = [];
    const source = pattern
      .split('/')
      .map((segment) => {
        const m = /^:(\w+)(\*)?$/.exec(segment);
        if (!m) return segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
        names.push(m[1]);
        return m[2] ? '(.+)' : '([^/]+)';
      })
      .join('/');
    this.routes.push({ method, pattern, regex: new RegExp(`^${source}$`), names, handler, options });
    if (options.beforeReady && this.added) {
      this.added.resolve();
      this.added = undefined;
    }
    return this;
  }

  get(pattern: string, handler: Handler, options?: RouteOptions): this {
    return this.add('GET', pattern, handler, options);
  }
  head(pattern: string, handler: Handler, options?: RouteOptions): this {
    return this.add('HEAD', pattern, handler, options);
  }
  post(pattern: string, handler: Handler, options?: RouteOptions): this {
    return this.add('POST', pattern, handler, options);
  }
  put(pattern: string, handler: Handler, options?: RouteOptions): this {
    return this.add('PUT', pattern, handler, options);
  }
  delete(pattern: string, handler: Handler, options?: RouteOptions): this {
    return this.add('DELETE', pattern, handler, options);
  }
  patch(pattern: string, handler: Handler, options?: RouteOptions): this {
    return this.add('PATCH', pattern, handler, options);
  }

  /** The engine route (or, with `unversioned`, the unversioned route) of this method and path. */
  match(method: string, path: string, unversioned = false): RouteMatch | undefined {
    for (const route of this.routes) {
      if (route.method !== method || Boolean(route.options.unversioned) !== unversioned) continue;
      const m = route.regex.exec(path);
      if (!m) continue;
      const params: Record<string, string> = {};
      route.names.forEach((name, i) => {
        params[name] = decodePathParam(name, m[i + 1]);
      });
      return { handler: route.handler, params, options: route.options };
    }
    return undefined;
  }

  /** The options of an unversioned route of this path under any method (how to answer a method it lacks). */
  unversionedPath(path: string): RouteOptions | undefined {
    return this.routes.find((r) => r.options.unversioned && r.regex.test(path))?.options;
  }
}

/** A path parameter with its %-escapes decoded; a malformed escape (`%zz`) is the client's error. */
function decodePathParam(name: string, raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new InvalidParameter(`invalid escape in the ${name} of the path: ${JSON.stringify(raw)}`);
  }
}
