/**
 * Authorization plugins (`--authorization-plugin NAME`, in the order given): every API request is put to each
 * (`AuthZPlugin.AuthZReq`) before it is served, and its response after (`AuthZPlugin.AuthZRes`), in Docker's
 * body shapes. The first that does not allow it ends it with a 403 naming the plugin and its message. A
 * plugin is a managed one implementing `authz` (enabled) or a legacy one found by name.
 */
import { EngineError, errorMessage, Forbidden } from '../../errors.js';
import type { PluginClient } from './client.js';
import { normalizePluginName, typeImplements } from './config.js';
import type { LegacyPlugins } from './legacy.js';
import type { PluginManager } from './manager.js';

/** What a plugin is told of a request (and, for AuthZRes, of its response). Bodies are base64 (Go's []byte). */
export interface AuthzRequest {
  User?: string;
  UserAuthNMethod?: string;
  RequestMethod: string;
  RequestUri: string;
  RequestBody?: string;
  RequestHeaders: Record<string, string>;
  ResponseStatusCode?: number;
  ResponseBody?: string;
  ResponseHeaders?: Record<string, string>;
}

/** What the API asks of authorization. */
export interface Authorizer {
  /** Throws Forbidden when a plugin denies the request, EngineError when one fails. */
  request(req: AuthzRequest): Promise<void>;
  /** The same for the response about to be sent. */
  response(req: AuthzRequest): Promise<void>;
}

export class AuthzPlugins implements Authorizer {
  constructor(
    private readonly names: string[],
    private readonly managed: PluginManager,
    private readonly legacy: LegacyPlugins,
  ) {}

  private async client(name: string): Promise<PluginClient> {
    const p = this.managed.find(name);
    if (p && p.Config.Interface.Types.some((t) => typeImplements(t, 'authz'))) {
      if (!p.Enabled) throw new EngineError(`plugin ${normalizePluginName(name)} is disabled`);
      return this.managed.client(p);
    }
    return (await this.legacy.get(name, 'authz')).client;
  }

  private async put(method: 'AuthZPlugin.AuthZReq' | 'AuthZPlugin.AuthZRes', req: AuthzRequest): Promise<void> {
    for (const name of this.names) {
      let answer: { Allow?: unknown; Msg?: unknown };
      try {
        answer = await (await this.client(name)).call<{ Allow?: unknown; Msg?: unknown }>(method, req);
      } catch (err) {
        throw new EngineError(`plugin ${name} failed with error: ${method}: ${errorMessage(err)}`, { cause: err });
      }
      if (answer.Allow !== true) throw new Forbidden(`authorization denied by plugin ${name}: ${typeof answer.Msg === 'string' ? answer.Msg : ''}`);
    }
  }

  request(req: AuthzRequest): Promise<void> {
    return this.put('AuthZPlugin.AuthZReq', req);
  }

  response(req: AuthzRequest): Promise<void> {
    return this.put('AuthZPlugin.AuthZRes', req);
  }
}
