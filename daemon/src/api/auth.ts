import { InvalidParameter, NotFound } from '../errors.js';
import { parsePermissions, type NewUser, type Permission, type TokenRecord, type User } from '../engine/auth/store.js';
import type { ApiRequest } from './http.js';
import type { Router } from './router.js';

/**
 * What the user and token routes need: the store's writer (engine/auth/store.ts AuthStoreWriter), the same
 * one the `berthd user` and `berthd token` subcommands use, under the same lock.
 */
export interface AuthAdmin {
  listUsers(): Promise<User[]>;
  addUser(input: NewUser): Promise<User>;
  updateUser(ref: string, change: Omit<NewUser, 'userName'>): Promise<User>;
  removeUser(ref: string): Promise<User>;
  createToken(userRef: string, permissions: Permission[], description?: string): Promise<{ token: TokenRecord; text: string }>;
  listTokens(userRef?: string): Promise<TokenRecord[]>;
  revokeToken(id: string): Promise<TokenRecord>;
}

export const AUTH_PATH = '/v1/auth';

/** A token as listed: never its hash (and its text only in the answer that made it). */
function tokenView(token: TokenRecord, users: Map<string, User>): Record<string, unknown> {
  return {
    id: token.id,
    userId: token.userId,
    userName: users.get(token.userId)?.userName ?? '',
    description: token.description,
    permissions: token.permissions,
    created: token.created,
  };
}

/** The body as an object of known fields (InvalidParameter naming the first problem). */
async function bodyObject(req: ApiRequest, fields: readonly string[]): Promise<Record<string, unknown>> {
  const body = await req.json();
  if (body === undefined || body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new InvalidParameter('the request body must be a JSON object');
  }
  for (const key of Object.keys(body)) {
    if (!fields.includes(key)) throw new InvalidParameter(`unknown field ${JSON.stringify(key)}: expected ${fields.join(', ')}`);
  }
  return body as Record<string, unknown>;
}

function optionalString(body: Record<string, unknown>, field: string): string | undefined {
  const value = body[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw new InvalidParameter(`${field} must be a string`);
  return value;
}

function optionalStrings(body: Record<string, unknown>, field: string): string[] | undefined {
  const value = body[field];
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string')) throw new InvalidParameter(`${field} must be an array of strings`);
  return value as string[];
}

const USER_FIELDS = ['displayName', 'givenName', 'familyName', 'emails', 'groups', 'active'] as const;

/** The fields of a user's body but its userName. */
function userChange(body: Record<string, unknown>): Omit<NewUser, 'userName'> {
  const change: Omit<NewUser, 'userName'> = {};
  const displayName = optionalString(body, 'displayName');
  const givenName = optionalString(body, 'givenName');
  const familyName = optionalString(body, 'familyName');
  const emails = optionalStrings(body, 'emails');
  const groups = optionalStrings(body, 'groups');
  if (displayName !== undefined) change.displayName = displayName;
  if (givenName !== undefined) change.givenName = givenName;
  if (familyName !== undefined) change.familyName = familyName;
  if (emails !== undefined) change.emails = emails;
  if (groups !== undefined) change.groups = groups;
  if (body.active !== undefined && body.active !== null) {
    if (typeof body.active !== 'boolean') throw new InvalidParameter('active must be true or false');
    change.active = body.active;
  }
  return change;
}

async function findUser(admin: AuthAdmin, ref: string): Promise<User> {
  const users = await admin.listUsers();
  const user = users.find((u) => u.id === ref) ?? users.find((u) => u.userName === ref);
  if (!user) throw new NotFound(`no such user: ${ref}`);
  return user;
}

/**
 * Users and API tokens over the daemon's unix socket, for its administrator only (`localAdmin`: a peer that
 * runs as root, or as the daemon's own user), with the control interface's errors:
 *   GET, POST /v1/auth/users;  GET, PATCH, DELETE /v1/auth/users/{user}  (user: id or user name)
 *   GET /v1/auth/tokens[?user=];  POST /v1/auth/tokens (the token's text in that answer only);
 *   DELETE /v1/auth/tokens/{id}
 */
export function registerAuthRoutes(router: Router, admin: AuthAdmin): void {
  const opts = { unversioned: true, errorStyle: 'control', localAdmin: true } as const;
  const users = `${AUTH_PATH}/users`;
  const tokens = `${AUTH_PATH}/tokens`;
  router.get(users, async (_req, res) => res.json(200, await admin.listUsers()), opts);
  router.post(
    users,
    async (req, res) => {
      const body = await bodyObject(req, ['userName', ...USER_FIELDS]);
      const userName = optionalString(body, 'userName');
      if (!userName) throw new InvalidParameter('userName is required');
      res.json(201, await admin.addUser({ userName, ...userChange(body) }));
    },
    opts,
  );
  router.get(`${users}/:user`, async (req, res) => res.json(200, await findUser(admin, req.params.user!)), opts);
  router.patch(
    `${users}/:user`,
    async (req, res) => {
      const body = await bodyObject(req, USER_FIELDS);
      res.json(200, await admin.updateUser(req.params.user!, userChange(body)));
    },
    opts,
  );
  router.delete(
    `${users}/:user`,
    async (req, res) => {
      await admin.removeUser(req.params.user!);
      res.noContent();
    },
    opts,
  );
  router.get(
    tokens,
    async (req, res) => {
      const user = req.query.get('user') ?? undefined;
      const byId = new Map((await admin.listUsers()).map((u) => [u.id, u]));
      res.json(200, (await admin.listTokens(user)).map((t) => tokenView(t, byId)));
    },
    opts,
  );
  router.post(
    tokens,
    async (req, res) => {
      const body = await bodyObject(req, ['user', 'permissions', 'description']);
      const user = optionalString(body, 'user');
      if (!user) throw new InvalidParameter('user is required (a user id or user name)');
      const permissions = parsePermissions(optionalStrings(body, 'permissions') ?? []);
      const made = await admin.createToken(user, permissions, optionalString(body, 'description') ?? '');
      const byId = new Map((await admin.listUsers()).map((u) => [u.id, u]));
      res.json(201, { ...tokenView(made.token, byId), token: made.text });
    },
    opts,
  );
  router.delete(
    `${tokens}/:id`,
    async (req, res) => {
      await admin.revokeToken(req.params.id!);
      res.noContent();
    },
    opts,
  );
}
