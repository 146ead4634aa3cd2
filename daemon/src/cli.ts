import { parseArgs } from 'node:util';
import { errorMessage } from './errors.js';
import { startDaemon } from './boot.js';
import type { DaemonOptions } from './daemon.js';
import { parsePathMapping } from './util/hostpath.js';
import { isLogLevel, log, setLogLevel } from './util/log.js';

const USAGE = `Usage: berthd [OPTIONS]
       berthd user add|set|list|rm ...     (users; berthd user --help)
       berthd token create|list|revoke ... (API tokens; berthd token --help)
       berthd agent --socket PATH [--group NAME] | --device PATH  (serve this machine's Host; berthd agent --help)

A container engine serving the Engine API.

Options:
  -H, --host list              Daemon socket(s) to listen on (unix://PATH, tcp://HOST:PORT; repeatable)
      --data-root string       Root of persistent state (default "/var/lib/berth")
      --exec-root string       Root of the daemon's per-boot state, on a tmpfs (default "/run/berth")
  -p, --pidfile string         Path of the daemon's PID file (default "/var/run/berthd.pid")
      --runtime string         OCI runtime: crun or runc (default "crun")
      --init-path string       Init binary that --init runs as PID 1 (default: docker-init, tini-static or tini on PATH)
      --api-cors-header string Access-Control-Allow-Origin for the API (CORS off when unset)
  -b, --bridge string          Name of the default bridge (default "berth0")
      --bip string             Address and prefix of the default bridge (default: a free 172.17-31.0.1/16)
      --iptables               Add firewall rules for NAT (default true; --iptables=false to disable)
      --tls                    Serve TCP with TLS
      --tlsverify              Serve TCP with TLS and verify clients
      --tlscacert string       CA the clients' certificates must be signed by
      --tlscert string         Server certificate
      --tlskey string          Server key
      --registry-mirror list   Preferred Docker Hub mirror (repeatable)
      --insecure-registry list Registry (CIDR or HOST[:PORT]) reached over plain HTTP (repeatable; 127.0.0.0/8 always)
      --auth-tokens            On TCP listeners, serve the engine API only to bearer tokens (engineRead: GET and HEAD)
      --ui [ADDRESS]           Also serve the desktop UI to a browser on a loopback [HOST:]PORT (default 127.0.0.1:2380)
      --authorization-plugin list  Authorization plugin every API request and answer is put to (repeatable)
      --agent string           Use the Host that berthd agent serves at unix://PATH, not this machine's
      --agent-path list        HOST=GUEST: a folder of this machine and its path on the agent's (repeatable)
      --agent-wsl string       The agent runs in this WSL2 distribution: Windows drives are /mnt/<letter> there
  -l, --log-level string       debug, info, warn, error or fatal (default "info")
  -D, --debug                  Debug mode (log level debug)
  -v, --version                Print the version and exit
  -h, --help                   Print this help and exit
`;

export const DEFAULT_SOCKET = 'unix:///var/run/engine.sock';

export function parseFlags(argv: string[]): DaemonOptions | 'help' | 'version' {
  // `--iptables=false` is the dockerd spelling of a false boolean; parseArgs knows only `--no-x`.
  // `--ui` takes an optional address: given alone (last, or before another flag) it means the default one.
  argv = argv.map((arg, i) => (arg === '--ui' && (i === argv.length - 1 || argv[i + 1]!.startsWith('-')) ? '--ui=' : arg));
  const normalised = argv.flatMap((arg) => {
    const m = /^--(iptables|tls|tlsverify|debug)=(true|false|1|0)$/.exec(arg);
    if (!m) return [arg];
    return m[2] === 'true' || m[2] === '1' ? [`--${m[1]}`] : [`--no-${m[1]}`];
  });
  const { values } = parseArgs({
    args: normalised,
    allowNegative: true,
    strict: true,
    options: {
      host: { type: 'string', short: 'H', multiple: true },
      'data-root': { type: 'string' },
      'exec-root': { type: 'string' },
      pidfile: { type: 'string', short: 'p' },
      runtime: { type: 'string' },
      'init-path': { type: 'string' },
      'api-cors-header': { type: 'string' },
      bridge: { type: 'string', short: 'b' },
      bip: { type: 'string' },
      iptables: { type: 'boolean', default: true },
      tls: { type: 'boolean' },
      tlsverify: { type: 'boolean' },
      tlscacert: { type: 'string' },
      tlscert: { type: 'string' },
      tlskey: { type: 'string' },
      ui: { type: 'string' },
      'registry-mirror': { type: 'string', multiple: true },
      'insecure-registry': { type: 'string', multiple: true },
      'auth-tokens': { type: 'boolean' },
      agent: { type: 'string' },
      'agent-path': { type: 'string', multiple: true },
      'agent-wsl': { type: 'string' },
      'authorization-plugin': { type: 'string', multiple: true },
      'log-level': { type: 'string', short: 'l' },
      debug: { type: 'boolean', short: 'D' },
      version: { type: 'boolean', short: 'v' },
      help: { type: 'boolean', short: 'h' },
    },
  } as Parameters<typeof parseArgs>[0] & { allowNegative: boolean });
  const v = values as Record<string, string | string[] | boolean | undefined>;
  if (v.help) return 'help';
  if (v.version) return 'version';
  const runtime = (v.runtime as string | undefined) ?? 'crun';
  if (runtime !== 'crun' && runtime !== 'runc') throw new Error(`unknown runtime ${JSON.stringify(runtime)}: expected crun or runc`);
  const level = v.debug ? 'debug' : ((v['log-level'] as string | undefined) ?? 'info');
  if (!isLogLevel(level)) throw new Error(`unknown log level ${JSON.stringify(level)}`);
  return {
    hosts: (v.host as string[] | undefined) ?? [DEFAULT_SOCKET],
    dataRoot: (v['data-root'] as string | undefined) ?? '/var/lib/berth',
    execRoot: (v['exec-root'] as string | undefined) ?? '/run/berth',
    pidfile: (v.pidfile as string | undefined) ?? '/var/run/berthd.pid',
    runtime,
    initPath: v['init-path'] as string | undefined,
    corsOrigin: v['api-cors-header'] as string | undefined,
    bridgeName: (v.bridge as string | undefined) ?? 'berth0',
    bridgeCidr: v.bip as string | undefined,
    iptables: v.iptables !== false,
    tls: Boolean(v.tls || v.tlsverify),
    tlsVerify: Boolean(v.tlsverify),
    tlsCaCert: v.tlscacert as string | undefined,
    tlsCert: v.tlscert as string | undefined,
    tlsKey: v.tlskey as string | undefined,
    logLevel: level,
    ui: v.ui as string | undefined,
    registryMirrors: (v['registry-mirror'] as string[] | undefined) ?? [],
    insecureRegistries: (v['insecure-registry'] as string[] | undefined) ?? [],
    authTokens: Boolean(v['auth-tokens']),
    agent: v.agent as string | undefined,
    agentPaths: ((v['agent-path'] as string[] | undefined) ?? []).map(parsePathMapping),
    agentWsl: v['agent-wsl'] as string | undefined,
    authorizationPlugins: (v['authorization-plugin'] as string[] | undefined) ?? [],
  };
}

export async function main(argv: string[]): Promise<void> {
  if (argv[0] === 'user' || argv[0] === 'token') {
    const { authMain, AUTH_USAGE } = await import('./auth-cli.js');
    if (argv.length < 2 || argv.includes('--help') || argv.includes('-h')) {
      process.stdout.write(AUTH_USAGE);
      return;
    }
    process.exitCode = await authMain(argv);
    return;
  }
  if (argv[0] === 'agent') {
    const { agentMain } = await import('./agent/main.js');
    await agentMain(argv.slice(1));
    return;
  }
  let opts: ReturnType<typeof parseFlags>;
  try {
    opts = parseFlags(argv);
  } catch (err) {
    process.stderr.write(`berthd: ${errorMessage(err)}\n\n${USAGE}`);
    process.exit(2);
  }
  if (opts === 'help') {
    process.stdout.write(USAGE);
    return;
  }
  if (opts === 'version') {
    const { ENGINE_VERSION } = await import('./version.js');
    process.stdout.write(`Berth version ${ENGINE_VERSION}\n`);
    return;
  }
  setLogLevel(opts.logLevel);
  // A promise that failed with nobody waiting for it is a bug to log, not a reason to stop serving.
  process.on('unhandledRejection', (reason) => {
    log.error('unhandled rejection', { error: errorMessage(reason), stack: (reason as Error)?.stack });
  });
  try {
    const daemon = await startDaemon(opts);
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      log.info('shutting down; containers keep running', { signal });
      daemon.shutdown().then(
        () => process.exit(0),
        (err) => {
          log.error('shutdown failed', { error: errorMessage(err) });
          process.exit(1);
        },
      );
    };
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
    // The daemon serves from here on; main() returns once it has restored its state.
    await daemon.ready.catch((err: unknown) => {
      log.error('failed to start daemon', { error: errorMessage(err) });
      stopping = true;
      return daemon.shutdown().finally(() => process.exit(1));
    });
  } catch (err) {
    log.error('failed to start daemon', { error: errorMessage(err) });
    process.exit(1);
  }
}
