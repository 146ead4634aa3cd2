/**
 * `berthd user ...` and `berthd token ...`: users and API tokens of a data root. They change the store file
 * directly (under its lock, atomically); a running daemon on that data root sees each change from its next
 * request on.
 */
import { parseArgs } from 'node:util';
import { AuthStoreWriter, PERMISSIONS, parsePermissions } from './engine/auth/store.js';
import { FsStateStore } from './state/fs.js';
import { errorMessage } from './errors.js';

export const AUTH_USAGE = `Usage:
  berthd user add NAME [--display-name S] [--given-name S] [--family-name S] [--email ADDR]... [--group G]... [--inactive]
  berthd user set USER [--display-name S] [--given-name S] [--family-name S] [--email ADDR]... [--group G]... [--active true|false]
  berthd user list [--json]
  berthd user rm USER                      (also removes the user's tokens)
  berthd token create USER --permission P[,P...] [--description S]
  berthd token list [USER] [--json]
  berthd token revoke TOKEN-ID

Every command takes --data-root (default "/var/lib/berth"). USER is a user's id or name.
Permissions: ${PERMISSIONS.join(', ')} (engineWrite includes engineRead).
token create prints the token on stdout, once: only its SHA-256 is kept.
`;

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]! + 3))).join('').trimEnd()).join('\n') + '\n';
}

class UsageError extends Error {}

async function run(argv: string[], out: (text: string) => void, err: (text: string) => void): Promise<void> {
  const [noun, verb, ...rest] = argv;
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    strict: true,
    options: {
      'data-root': { type: 'string' },
      'display-name': { type: 'string' },
      'given-name': { type: 'string' },
      'family-name': { type: 'string' },
      email: { type: 'string', multiple: true },
      group: { type: 'string', multiple: true },
      inactive: { type: 'boolean' },
      active: { type: 'string' },
      permission: { type: 'string', multiple: true },
      description: { type: 'string' },
      json: { type: 'boolean' },
    },
  });
  const store = new AuthStoreWriter(new FsStateStore(values['data-root'] ?? '/var/lib/berth'));
  const one = (what: string): string => {
    if (positionals.length !== 1) throw new UsageError(`${noun} ${verb} takes one ${what}`);
    return positionals[0]!;
  };
  const key = `${noun} ${verb}`;
  switch (key) {
    case 'user add': {
      const user = await store.addUser({
        userName: one('NAME'),
        displayName: values['display-name'],
        givenName: values['given-name'],
        familyName: values['family-name'],
        emails: values.email,
        groups: values.group,
        active: !values.inactive,
      });
      out(`${user.id}\n`);
      return;
    }
    case 'user set': {
      const active = values.active;
      if (active !== undefined && active !== 'true' && active !== 'false') throw new UsageError('--active takes true or false');
      const user = await store.updateUser(one('USER'), {
        displayName: values['display-name'],
        givenName: values['given-name'],
        familyName: values['family-name'],
        emails: values.email,
        groups: values.group,
        active: active === undefined ? undefined : active === 'true',
      });
      out(`${user.id}\n`);
      return;
    }
    case 'user list': {
      const users = await store.listUsers();
      if (values.json) return out(JSON.stringify(users, null, 2) + '\n');
      out(table([['ID', 'USER NAME', 'DISPLAY NAME', 'ACTIVE', 'CREATED'], ...users.map((u) => [u.id, u.userName, u.displayName, String(u.active), u.created])]));
      return;
    }
    case 'user rm': {
      const user = await store.removeUser(one('USER'));
      out(`${user.id}\n`);
      return;
    }
    case 'token create': {
      const user = one('USER');
      const token = await store.createToken(user, parsePermissions(values.permission ?? []), values.description ?? '');
      out(`${token.text}\n`);
      err(`token ${token.token.id} created; this is the only time it is shown\n`);
      return;
    }
    case 'token list': {
      if (positionals.length > 1) throw new UsageError('token list takes at most one USER');
      const tokens = await store.listTokens(positionals[0]);
      const names = new Map((await store.listUsers()).map((u) => [u.id, u.userName]));
      if (values.json) return out(JSON.stringify(tokens.map(({ sha256: _hash, ...t }) => t), null, 2) + '\n');
      out(table([
        ['ID', 'USER', 'PERMISSIONS', 'CREATED', 'DESCRIPTION'],
        ...tokens.map((t) => [t.id, names.get(t.userId) ?? t.userId, t.permissions.join(','), t.created, t.description]),
      ]));
      return;
    }
    case 'token revoke': {
      const token = await store.revokeToken(one('TOKEN-ID'));
      out(`${token.id}\n`);
      return;
    }
    default:
      throw new UsageError(`unknown command: berthd ${[noun, verb].filter(Boolean).join(' ')}`);
  }
}

/** Runs a user or token subcommand; resolves to the process's exit code. */
export async function authMain(argv: string[]): Promise<number> {
  const out = (text: string) => void process.stdout.write(text);
  const err = (text: string) => void process.stderr.write(text);
  try {
    await run(argv, out, err);
    return 0;
  } catch (e) {
    if (e instanceof UsageError || (e as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      err(`berthd: ${errorMessage(e)}\n\n${AUTH_USAGE}`);
      return 2;
    }
    err(`berthd: ${errorMessage(e)}\n`);
    return 1;
  }
}
