/**
 * Users and API tokens, kept in one file of the data root: `<data-root>/auth/store.json`.
 *
 * Format (version 1), written atomically through the StateStore with mode 0600:
 *   { "version": 1,
 *     "users":  [{ id, userName, displayName, name: {givenName, familyName}, emails: [{value, primary, display}],
 *                  groups: [{value, display}], active, created, lastModified }],
 *     "tokens": [{ id, userId, description, permissions: [...], sha256, created }] }
 * Timestamps are RFC 3339 strings. A token's text is never stored: only the SHA-256 of it (hex). Tokens carry
 * 32 random bytes, so a fast hash is enough; they are compared in constant time.
 *
 * One writer at a time: the `berthd user` and `berthd token` subcommands, serialised by a lock file beside the
 * store. A running daemon only reads it, and reads it again whenever the file changed (a new inode, size or
 * modification time), so that a token revoked by a subcommand is refused from the next request on.
 */
import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import path from 'node:path';
import { Conflict, InvalidParameter, NotFound } from '../../errors.js';
import { readJSON, writeJSON, type StateStore } from '../../state/state.js';

export const STORE_VERSION = 1;

/** What a token may do. engineWrite allows every engine API call, engineRead only GET and HEAD ones. */
export const PERMISSIONS = ['engineRead', 'engineWrite', 'networkPoliciesRead', 'networkPoliciesWrite', 'scimUsersRead'] as const;
export type Permission = (typeof PERMISSIONS)[number];

export interface User {
  id: string;
  userName: string;
  displayName: string;
  name: { givenName?: string; familyName?: string };
  emails: Array<{ value: string; primary: boolean; display?: string }>;
  groups: Array<{ value: string; display?: string }>;
  active: boolean;
  created: string;
  lastModified: string;
}

export interface TokenRecord {
  /** Public: it names the token in lists and in `token revoke`, and is part of the token's text. */
  id: string;
  userId: string;
  description: string;
  permissions: Permission[];
  /** SHA-256 of the whole token text, hex. */
  sha256: string;
  created: string;
}

interface StoreFile {
  version: number;
  users: User[];
  tokens: TokenRecord[];
}

/** A token's text: the prefix, its id (16 hex digits), `_`, and 32 random bytes in base64url. */
export const TOKEN_PREFIX = 'berth_';
const TOKEN_TEXT = /^berth_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$/;

/** The store's name in the StateStore. */
const STORE_NAME = 'auth/store.json';

export function storeFile(dataRoot: string): string {
  return path.join(dataRoot, STORE_NAME);
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function emptyStore(): StoreFile {
  return { version: STORE_VERSION, users: [], tokens: [] };
}

function parseStore(value: StoreFile | undefined, file: string): StoreFile {
  if (value === undefined) return emptyStore();
  if (value.version !== STORE_VERSION || !Array.isArray(value.users) || !Array.isArray(value.tokens)) {
    throw new Error(`${file}: not a version ${STORE_VERSION} user and token store`);
  }
  return value;
}

export function isPermission(text: string): text is Permission {
  return (PERMISSIONS as readonly string[]).includes(text);
}

export function parsePermissions(list: string[]): Permission[] {
  const out = new Set<Permission>();
  for (const item of list.flatMap((s) => s.split(',')).map((s) => s.trim()).filter(Boolean)) {
    if (!isPermission(item)) throw new InvalidParameter(`unknown permission ${JSON.stringify(item)}: expected one of ${PERMISSIONS.join(', ')}`);
    out.add(item);
  }
  if (out.size === 0) throw new InvalidParameter(`a token needs at least one permission (${PERMISSIONS.join(', ')})`);
  return [...out];
}

const USER_NAME = /^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$/;

export interface NewUser {
  userName: string;
  displayName?: string;
  givenName?: string;
  familyName?: string;
  emails?: string[];
  groups?: string[];
  active?: boolean;
}

/** The users and tokens of a data root, read and changed under a lock (the subcommands' side). */
export class AuthStoreWriter {
  readonly file: string;

  constructor(
    private readonly state: StateStore,
    private readonly now: () => Date = () => new Date(),
  ) {
    this.file = storeFile(state.root);
  }

  async read(): Promise<StoreFile> {
    return parseStore(await readJSON<StoreFile>(this.state, STORE_NAME), this.file);
  }

  /** Runs `change` on the store under the lock and writes its result atomically. */
  private async update<T>(change: (store: StoreFile) => T): Promise<T> {
    await this.state.makeFolder(path.posix.dirname(STORE_NAME), { mode: 0o700 });
    const release = await this.state.lock(`${STORE_NAME}.lock`);
    try {
      const store = await this.read();
      const result = change(store);
      await writeJSON(this.state, STORE_NAME, store, { mode: 0o600 });
      return result;
    } finally {
      await release();
    }
  }

  async listUsers(): Promise<User[]> {
    return (await this.read()).users;
  }

  async addUser(input: NewUser): Promise<User> {
    if (!USER_NAME.test(input.userName)) {
      throw new InvalidParameter(`invalid user name ${JSON.stringify(input.userName)}: letters, digits and . _ @ + -, at most 128`);
    }
    checkEmails(input.emails);
    return this.update((store) => {
      if (store.users.some((u) => u.userName === input.userName)) throw new Conflict(`user ${input.userName} already exists`);
      const at = this.now().toISOString();
      const name: User['name'] = {};
      if (input.givenName) name.givenName = input.givenName;
      if (input.familyName) name.familyName = input.familyName;
      const user: User = {
        id: randomUUID(),
        userName: input.userName,
        displayName: input.displayName ?? input.userName,
        name,
        emails: (input.emails ?? []).map((value, i) => ({ value, primary: i === 0 })),
        groups: (input.groups ?? []).map((value) => ({ value, display: value })),
        active: input.active ?? true,
        created: at,
        lastModified: at,
      };
      store.users.push(user);
      return user;
    });
  }

  /** Changes a user's fields (the lists given replace theirs); lastModified becomes now. */
  async updateUser(ref: string, change: Omit<NewUser, 'userName'>): Promise<User> {
    checkEmails(change.emails);
    return this.update((store) => {
      const user = findUser(store, ref);
      if (change.displayName !== undefined) user.displayName = change.displayName;
      if (change.givenName !== undefined) user.name.givenName = change.givenName;
      if (change.familyName !== undefined) user.name.familyName = change.familyName;
      if (change.emails !== undefined) user.emails = change.emails.map((value, i) => ({ value, primary: i === 0 }));
      if (change.groups !== undefined) user.groups = change.groups.map((value) => ({ value, display: value }));
      if (change.active !== undefined) user.active = change.active;
      // Never before its creation, nor equal to the previous value when the clock is coarse.
      const at = this.now();
      user.lastModified = new Date(Math.max(at.getTime(), Date.parse(user.lastModified) + 1)).toISOString();
      return user;
    });
  }

  /** Removes a user (by id or user name) and every token of theirs. */
  async removeUser(ref: string): Promise<User> {
    return this.update((store) => {
      const user = findUser(store, ref);
      store.users = store.users.filter((u) => u !== user);
      store.tokens = store.tokens.filter((t) => t.userId !== user.id);
      return user;
    });
  }

  /** Makes a token for a user; its text is returned here only, and never stored. */
  async createToken(userRef: string, permissions: Permission[], description = ''): Promise<{ token: TokenRecord; text: string }> {
    return this.update((store) => {
      const user = findUser(store, userRef);
      const id = randomBytes(8).toString('hex');
      const text = `${TOKEN_PREFIX}${id}_${randomBytes(32).toString('base64url')}`;
      const token: TokenRecord = { id, userId: user.id, description, permissions, sha256: sha256(text), created: this.now().toISOString() };
      store.tokens.push(token);
      return { token, text };
    });
  }

  async listTokens(userRef?: string): Promise<TokenRecord[]> {
    const store = await this.read();
    if (userRef === undefined) return store.tokens;
    const user = findUser(store, userRef);
    return store.tokens.filter((t) => t.userId === user.id);
  }

  async revokeToken(id: string): Promise<TokenRecord> {
    return this.update((store) => {
      const token = store.tokens.find((t) => t.id === id);
      if (!token) throw new NotFound(`no such token: ${id}`);
      store.tokens = store.tokens.filter((t) => t !== token);
      return token;
    });
  }
}

function checkEmails(emails: string[] | undefined): void {
  for (const email of emails ?? []) {
    if (!/^[^\s@]+@[^\s@]+$/.test(email)) throw new InvalidParameter(`invalid email address ${JSON.stringify(email)}`);
  }
}

function findUser(store: StoreFile, ref: string): User {
  const user = store.users.find((u) => u.id === ref) ?? store.users.find((u) => u.userName === ref);
  if (!user) throw new NotFound(`no such user: ${ref}`);
  return user;
}

/** Who a valid bearer token belongs to, and what it may do. */
export interface Principal {
  user: User;
  token: TokenRecord;
}

/**
 * The daemon's side: reads the store and checks bearer tokens. The file is stat'ed at each check and read
 * again when it changed, so that tokens made or revoked by the subcommands count from the next request on.
 */
export class AuthStoreReader {
  readonly file: string;
  private seen = '';
  private users = new Map<string, User>();
  private tokens = new Map<string, TokenRecord>();
  private loading?: Promise<void>;

  constructor(private readonly state: StateStore) {
    this.file = storeFile(state.root);
  }

  private async refresh(): Promise<void> {
    const stamp = await this.state.stamp(STORE_NAME);
    if (stamp === this.seen) return;
    const store = parseStore(await readJSON<StoreFile>(this.state, STORE_NAME), this.file);
    this.users = new Map(store.users.map((u) => [u.id, u]));
    this.tokens = new Map(store.tokens.map((t) => [t.id, t]));
    this.seen = stamp;
  }

  /** Reads the store again when it changed; concurrent callers share one read. */
  private async current(): Promise<void> {
    if (!this.loading) {
      this.loading = this.refresh().finally(() => {
        this.loading = undefined;
      });
    }
    await this.loading;
  }

  /** The principal of a token's text, or undefined when the token is malformed, unknown, revoked or its user inactive. */
  async verify(text: string): Promise<Principal | undefined> {
    await this.current();
    const m = TOKEN_TEXT.exec(text);
    if (!m) return undefined;
    const token = this.tokens.get(m[1]!);
    if (!token) return undefined;
    const presented = createHash('sha256').update(text).digest();
    const stored = Buffer.from(token.sha256, 'hex');
    if (stored.length !== presented.length || !timingSafeEqual(stored, presented)) return undefined;
    const user = this.users.get(token.userId);
    if (!user || !user.active) return undefined;
    return { user, token };
  }

  async user(id: string): Promise<User | undefined> {
    await this.current();
    return this.users.get(id);
  }
}
