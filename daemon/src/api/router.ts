import { InvalidParameter } from '../engine/errors.js';
import type { Handler } from './http.js';

interface Route {
  method: string;
  pattern: string;
  regex: RegExp;
  names: string[];
  handler: Handler;
}

export interface RouteMatch {
  handler: Handler;
  params: Record<string, string>;
}

/**
 * Routes by method and path. A pattern segment `:name` matches one path segment; `:name*` matches one or
 * more segments (image names hold slashes: `/images/:name*\/json`). Routes are tried in the order they
 * were added, so a more specific pattern goes first.
 */
export class Router {
  private readonly routes: Route[] = [];

  add(method: string, pattern: string, handler: Handler): this {
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
    this.routes.push({ method, pattern, regex: new RegExp(`^${source}$`), names, handler });
    return this;
  }

  get(pattern: string, handler: Handler): this {
    return this.add('GET', pattern, handler);
  }
  head(pattern: string, handler: Handler): this {
    return this.add('HEAD', pattern, handler);
  }
  post(pattern: string, handler: Handler): this {
    return this.add('POST', pattern, handler);
  }
  put(pattern: string, handler: Handler): this {
    return this.add('PUT', pattern, handler);
  }
  delete(pattern: string, handler: Handler): this {
    return this.add('DELETE', pattern, handler);
  }

  match(method: string, path: string): RouteMatch | undefined {
    for (const route of this.routes) {
      if (route.method !== method) continue;
      const m = route.regex.exec(path);
      if (!m) continue;
      const params: Record<string, string> = {};
      route.names.forEach((name, i) => {
        params[name] = decodePathParam(name, m[i + 1]);
      });
      return { handler: route.handler, params };
    }
    return undefined;
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
