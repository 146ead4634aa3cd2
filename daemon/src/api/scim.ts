import type { User } from '../engine/auth/store.js';
import { InvalidParameter, NotFound } from '../errors.js';
import type { ApiRequest } from './http.js';
import { SCIM_CONTENT_TYPE } from './httpstatus.js';
import type { Router } from './router.js';

export const SCIM_USER_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:User';
export const SCIM_USERS_PATH = '/v2/scim/2.0/Users';

/** A user as the store keeps it: what the SCIM view is made of. */
export type ScimUserSource = User;

/** What the SCIM routes need: a user by id. */
export interface ScimBackend {
  user(id: string): Promise<ScimUserSource | undefined>;
}

/** The base URL the request reached, as its client named it (the Host header), scheme by the listener. */
function baseUrl(req: ApiRequest): string {
  const tls = Boolean((req.raw.socket as { encrypted?: boolean }).encrypted);
  const host = req.header('host') ?? 'localhost';
  return `${tls ? 'https' : 'http'}://${host}`;
}

/** A user in the SCIM 2.0 core schema (RFC 7643 section 4.1). */
export function scimUser(user: ScimUserSource, location: string): Record<string, unknown> {
  return {
    schemas: [SCIM_USER_SCHEMA],
    id: user.id,
    userName: user.userName,
    displayName: user.displayName,
    active: user.active,
    name: { familyName: user.name.familyName ?? '', givenName: user.name.givenName ?? '' },
    emails: user.emails.map((e) => ({ display: e.display ?? e.value, primary: e.primary, value: e.value })),
    groups: user.groups.map((g) => ({ display: g.display ?? g.value, value: g.value })),
    meta: { created: user.created, lastModified: user.lastModified, location, resourceType: 'User' },
  };
}

/** `GET /v2/scim/2.0/Users/{id}`: needs a token with scimUsersRead; errors are SCIM errors. */
export function registerScimRoutes(router: Router, backend: ScimBackend): void {
  router.get(
    `${SCIM_USERS_PATH}/:id`,
    async (req, res) => {
      const id = req.params.id!;
      if (id.length > 256 || /[\x00-\x1f\x7f/]/.test(id)) throw new InvalidParameter('invalid user id');
      const user = await backend.user(id);
      if (!user) throw new NotFound(`no such user: ${id}`);
      const location = `${baseUrl(req)}${SCIM_USERS_PATH}/${encodeURIComponent(user.id)}`;
      res.json(200, scimUser(user, location), { 'Content-Type': SCIM_CONTENT_TYPE });
    },
    { unversioned: true, errorStyle: 'scim', permission: 'scimUsersRead' },
  );
}
