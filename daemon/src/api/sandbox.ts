import { InvalidParameter } from '../errors.js';
import type { Router } from './router.js';

/**
 * What the sandbox routes need from the engine: the network policy of a sandbox (a container with an egress
 * policy), read and installed. Both throw NotFound for an unknown container or one without a policy, and
 * install throws InvalidParameter for a policy it cannot take.
 */
export interface SandboxPolicies {
  view(ref: string): Promise<unknown>;
  install(ref: string, policy: unknown): Promise<unknown>;
}

const POLICIES_PATH = '/v1/sandboxes/:sandbox/network-policies';

/**
 * `GET` and `PUT /v1/sandboxes/{sandbox}/network-policies`, beside the engine API (no version prefix), with
 * the control interface's errors (`{code, message, details}`) and bearer tokens carrying networkPoliciesRead
 * or networkPoliciesWrite.
 */
export function registerSandboxRoutes(router: Router, policies: SandboxPolicies): void {
  router.get(
    POLICIES_PATH,
    async (req, res) => res.json(200, await policies.view(req.params.sandbox!)),
    { unversioned: true, errorStyle: 'control', permission: 'networkPoliciesRead' },
  );
  router.put(
    POLICIES_PATH,
    async (req, res) => {
      const policy = await req.json();
      if (policy === undefined || policy === null || typeof policy !== 'object' || Array.isArray(policy)) {
        throw new InvalidParameter('the request body must be a network policy (a JSON object)');
      }
      res.json(200, await policies.install(req.params.sandbox!, policy));
    },
    { unversioned: true, errorStyle: 'control', permission: 'networkPoliciesWrite' },
  );
}
