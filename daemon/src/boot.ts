/**
 * The daemon's start: what serving its sockets needs comes first, everything else follows while it serves.
 *
 * Before listening it checks the flags, makes the roots, takes the pidfile, and loads only the HTTP server, the
 * router and the ping routes (a few small modules). Then it listens, and in the background loads and builds the
 * rest (daemon.ts: the host, the engine services and their routes, the default bridge, the containers' state
 * reconciled with what runs). Until that is done, the router holds every request that needs it; `/_ping`
 * answers at once.
 */
import { promises as fs, readFileSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import type http from 'node:http';
import type { Socket } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { isLoopbackHost, listenOn, parseListenAddress } from './api/listen.js';
import { Router } from './api/router.js';
import { createApiServer } from './api/server.js';
import { registerPingRoutes } from './api/system.js';
import type { LocalSession } from './engine/auth/local-session.js';
import type { AuthStoreReader } from './engine/auth/store.js';
import type { Authorizer } from './engine/plugins/authz.js';
import type { Composition, DaemonOptions } from './daemon.js';
import type { Host } from './host/host.js';
import { log } from './util/log.js';
import type { EngineEndpoint } from './ui/server.js';

export interface Daemon {
  /** Settles once the engine has restored its state and serves every route; fails if it could not. */
  ready: Promise<void>;
  /** Stops serving and releases the daemon's own resources; containers keep running under conmon. */
  shutdown(): Promise<void>;
  /**
   * The bearer token of the daemon's local session (engine/auth/local-session.ts), for a front end that
   * hosts this daemon in its own process (the desktop app): every permission, valid until the daemon stops.
   * Known once `ready` has settled.
   */
  readonly localToken: string;
}

/**
 * Whether process `pid` holds `pidfile` open. A running daemon keeps its pidfile open, so this tells it from
 * a zombie left by kill -9 (no open files) or an unrelated program that reuses the pid.
 */
async function holdsOpen(pid: number, pidfile: string): Promise<boolean> {
  const target = await fs.realpath(pidfile).catch(() => path.resolve(pidfile));
  let fds: string[];
  try {
    fds = await fs.readdir(`/proc/${pid}/fd`);
  } catch {
    // Gone, or another user's process: not a daemon that wrote this file.
    return false;
  }
  for (const fd of fds) {
    const link = await fs.readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
    if (link === target) return true;
  }
  return false;
}

/**
 * Writes the pidfile and keeps it open while the daemon runs. A pidfile left by a daemon that is gone (even
 * when its pid now names a zombie or another program) does not block a start; a live daemon with it does.
 */
async function writePidfile(pidfile: string): Promise<FileHandle> {
  let old = 0;
  try {
    old = Number((await fs.readFile(pidfile, 'utf8')).trim());
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (Number.isInteger(old) && old > 0 && old !== process.pid) {
    if (await holdsOpen(old, pidfile)) throw new Error(`pid file ${pidfile} names a running berthd (pid ${old}): is another berthd running?`);
    log.info('removing a stale pid file', { pidfile, pid: old });
  }
  const handle = await fs.open(pidfile, 'w', 0o644);
  try {
    await handle.writeFile(`${process.pid}\n`);
  } catch (err) {
    await handle.close();
    throw err;
  }
  return handle;
}

/** Under the exec root: the UI's address with its access token (mode 0600). */
export const UI_LOGIN_FILE = 'ui-url';

/** Writes a file that only its owner reads, replacing any earlier one. */
async function writeFileAtomicPrivate(file: string, text: string): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`;
  await fs.rm(tmp, { force: true });
  await fs.writeFile(tmp, text, { mode: 0o600, flag: 'wx' });
  await fs.rename(tmp, file);
}

/**
 * Starts the daemon: listening once this resolves, its engine (on `givenHost`, or the Host of this machine)
 * restored when `ready` settles.
 */
export async function startDaemon(opts: DaemonOptions, givenHost?: Host): Promise<Daemon> {
  const addresses = opts.hosts.map(parseListenAddress);
  for (const address of addresses) {
    if (address.kind === 'tcp' && !opts.tls && !isLoopbackHost(address.host)) {
      throw new Error(`refusing to serve the API on ${address.host}:${address.port} without TLS: use --tlsverify with --tlscacert, --tlscert and --tlskey`);
    }
    if (address.kind === 'tcp' && !opts.tls) {
      log.warn(
        `serving the API on tcp://${address.host}:${address.port} without TLS: every local user and program that can connect to it has root access to this machine; use a unix socket, or --tlsverify`,
      );
    }
  }
  if (opts.tls && (!opts.tlsCert || !opts.tlsKey)) throw new Error('--tls and --tlsverify need --tlscert and --tlskey');
  if (opts.tlsVerify && !opts.tlsCaCert) throw new Error('--tlsverify needs --tlscacert');

  await fs.mkdir(opts.dataRoot, { recursive: true, mode: 0o710 });
  await fs.mkdir(opts.execRoot, { recursive: true, mode: 0o700 });
  // The exec root becomes a tmpfs (where it is on a disk and empty) before the composition writes to it. That
  // can wait until the sockets listen, unless the pidfile or a socket is to be made inside it.
  const inExecRoot = (file: string) => !path.relative(opts.execRoot, path.resolve(file)).startsWith('..');
  const tmpfsFirst = inExecRoot(opts.pidfile) || addresses.some((a) => a.kind === 'unix' && inExecRoot(a.path));
  // With an agent, containers' per-boot state lives in the agent's exec root; this one holds only sockets.
  const execRootTmpfs = async () => {
    if (opts.agent) return;
    const { ensureExecRootTmpfs } = await import('./host/linux/execroot.js');
    await ensureExecRootTmpfs(opts.execRoot);
  };
  if (tmpfsFirst) await execRootTmpfs();
  const pidfileHandle = await writePidfile(opts.pidfile);

  // Users and API tokens (made by `berthd user` and `berthd token`): read at the first bearer check.
  let authReader: Promise<AuthStoreReader> | undefined;
  const loadAuth = () =>
    (authReader ??= Promise.all([import('./engine/auth/store.js'), import('./state/fs.js')]).then(
      ([{ AuthStoreReader }, { FsStateStore }]) => new AuthStoreReader(new FsStateStore(opts.dataRoot)),
    ));
  const authStore = {
    verify: async (token: string) => (await loadAuth()).verify(token),
    user: async (id: string) => (await loadAuth()).user(id),
  };
  // The local session's token, made once the sockets listen (its front ends come later).
  let session: Promise<LocalSession> | undefined;
  const loadSession = () => (session ??= import('./engine/auth/local-session.js').then(({ LocalSession }) => new LocalSession()));
  let localToken = '';
  let peer: Promise<typeof import('./host/linux/peer.js')> | undefined;
  const loadPeer = () => (peer ??= import('./host/linux/peer.js'));

  // The router holds the requests that need the composition from the first one on: it starts after listening.
  let compose!: (composition: Promise<Composition>) => void;
  const composed = new Promise<Composition>((resolve) => (compose = resolve));
  const router = new Router();
  router.holdUntil(composed);
  registerPingRoutes(router);
  const servers: http.Server[] = [];
  // Whatever the composition adds to every request (the memory given back after a burst), once it is built.
  let onRequest: Composition['onRequest'];
  // Authorization plugins see every request from the first one on: requests wait for the composition.
  const authz: Authorizer | undefined = opts.authorizationPlugins?.length
    ? { request: async (r) => (await composed).authz!.request(r), response: async (r) => (await composed).authz!.response(r) }
    : undefined;
  for (const address of addresses) {
    const tls =
      address.kind === 'tcp' && opts.tls
        ? {
            key: readFileSync(opts.tlsKey!),
            cert: readFileSync(opts.tlsCert!),
            ca: opts.tlsCaCert ? readFileSync(opts.tlsCaCert) : undefined,
            verifyClients: opts.tlsVerify,
          }
        : undefined;
    const auth = { verify: async (token: string) => (await loadSession()).verify(token) ?? authStore.verify(token), engine: address.kind === 'tcp' && Boolean(opts.authTokens) };
    // Users and tokens are managed over a unix socket by its peers that run as root (SO_PEERCRED).
    const localAdmin = address.kind === 'unix' ? async (socket: Socket) => (await loadPeer()).peerIsAdmin(socket) : undefined;
    const server = createApiServer(router, { corsOrigin: opts.corsOrigin, tls, auth, localAdmin, plainTcp: address.kind === 'tcp' && !tls, authz });
    server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => onRequest?.(req, res));
    server.on('upgrade', (req: http.IncomingMessage) => onRequest?.(req));
    servers.push(server);
  }
  const closeServers = () => {
    for (const server of servers) {
      server.close();
      server.closeAllConnections();
    }
  };
  try {
    for (const [i, address] of addresses.entries()) {
      await listenOn(servers[i]!, address);
      log.info('API listening', { address: address.kind === 'tcp' ? `tcp://${address.host}:${address.port}` : `${address.kind}://${address.path}` });
    }
  } catch (err) {
    closeServers();
    await pidfileHandle.close().catch(() => undefined);
    throw err;
  }

  // The rest, loaded and built while the sockets serve; requests that need it wait in the router.
  const closers: Array<() => Promise<void> | void> = [];
  compose(Promise.all([import('./daemon.js'), tmpfsFirst || execRootTmpfs()]).then(([daemon]) => daemon.composeDaemon(opts, { router, authStore, closers }, givenHost)));
  const ready = Promise.all([composed, loadSession()]).then(async ([composition, local]) => {
    onRequest = composition.onRequest;
    localToken = local.token;
    if (opts.ui !== undefined) await startUi(opts, addresses, closers, localToken);
    log.info('daemon has completed initialization', { dataRoot: opts.dataRoot, execRoot: opts.execRoot });
  });
  // The caller learns of a failure through `ready`; this keeps it from being reported as unhandled meanwhile.
  ready.catch(() => undefined);

  return {
    ready,
    get localToken() {
      return localToken;
    },
    async shutdown() {
      closeServers();
      // What the composition started is released once it has settled (a half-built engine included).
      await ready.catch(() => undefined);
      for (const close of closers.reverse()) await close();
      await pidfileHandle.close().catch(() => undefined);
      await fs.rm(opts.pidfile, { force: true });
      for (const address of addresses) if (address.kind === 'unix') await fs.rm(address.path, { force: true });
    },
  };
}

/**
 * The daemon started whole, for embedders (the Electron shell, through daemon.ts): resolves once it has
 * restored its state, and fails (releasing what it took) when it cannot start.
 */
export async function startDaemonReady(opts: DaemonOptions, givenHost?: Host): Promise<Daemon> {
  const daemon = await startDaemon(opts, givenHost);
  try {
    await daemon.ready;
  } catch (err) {
    await daemon.shutdown().catch(() => undefined);
    throw err;
  }
  return daemon;
}

/** `--ui`: the renderer served to a browser, through the engine's own socket. */
async function startUi(opts: DaemonOptions, addresses: ReturnType<typeof parseListenAddress>[], closers: Array<() => Promise<void> | void>, engineToken: string): Promise<void> {
  // Loaded only when asked for: the UI server and its websocket module stay out of a headless daemon.
  const { parseUiAddress, startUiServer } = await import('./ui/server.js');
  const uiAddress = parseUiAddress(opts.ui!);
  const engineAddress = addresses.find((a) => a.kind === 'unix') ?? addresses.find((a) => a.kind === 'tcp' && !opts.tls);
  if (!engineAddress) throw new Error('--ui needs the engine on a unix socket or a plain TCP address');
  const engine: EngineEndpoint = engineAddress.kind !== 'tcp' ? { socketPath: engineAddress.path } : { host: engineAddress.host, port: engineAddress.port };
  const staticDir = process.env.BERTH_UI_ROOT ?? path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'renderer', 'dist');
  // The UI's user holds the UI's own token: its requests reach the engine as the local session's.
  const ui = await startUiServer({ engine, staticDir, host: uiAddress.host, port: uiAddress.port, engineToken });
  closers.push(() => ui.close());
  // The address with its token gives full control of the engine: it goes to a file only root reads and to
  // the terminal that started the daemon, never to the log.
  const loginFile = path.join(opts.execRoot, UI_LOGIN_FILE);
  await writeFileAtomicPrivate(loginFile, `${ui.loginUrl}\n`);
  closers.push(() => fs.rm(loginFile, { force: true }));
  if (process.stdout.isTTY) process.stdout.write(`Open the UI in a browser: ${ui.loginUrl}\n`);
  log.info('UI listening: its address with the access token is in the login file', { url: ui.url, loginFile });
}
