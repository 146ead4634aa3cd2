/**
 * `berthd agent`: serves this machine's Host (a LinuxHost) to one daemon at a time over the agent protocol,
 * on a unix socket (`--socket PATH [--group NAME]`: the root agent service of a Linux desktop, whose daemon
 * runs as the user) or a character device (`--device PATH`: the guest's virtio-serial port). It runs as root;
 * its containers live on while no daemon is connected.
 */
import { promises as fs } from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { errorMessage } from '../errors.js';
import { createLinuxHost } from '../host/linux/index.js';
import { loadLayerHasher } from '../host/linux/layers/hash.js';
import { useOffThreadHasher } from '../util/digest.js';
import { ensureExecRootTmpfs } from '../host/linux/execroot.js';
import { isLogLevel, log, setLogLevel } from '../util/log.js';
import { hostHandler } from './dispatch.js';
import { serveDevice, serveSocket, type AgentServer } from './serve.js';

export const AGENT_USAGE = `Usage: berthd agent --socket PATH [--group NAME] [OPTIONS]
       berthd agent --device PATH [OPTIONS]

Serves this machine's containers, layers, volumes and networks to a daemon started with --agent unix://PATH.

Options:
      --socket string          Unix socket to serve on (mode 0660)
      --group string           Group that owns the socket (its members' daemons may connect)
      --device string          Character device to serve on (a virtio-serial port such as /dev/virtio-ports/org.berth.agent)
      --data-root string       Root of the agent's persistent state (default "/var/lib/berth-agent")
      --exec-root string       Root of the agent's per-boot state, on a tmpfs (default "/run/berth-agent")
      --runtime string         OCI runtime: crun or runc (default "crun")
      --init-path string       Init binary that --init runs as PID 1
  -l, --log-level string       debug, info, warn, error or fatal (default "info")
  -h, --help                   Print this help and exit
`;

export async function agentMain(argv: string[]): Promise<void> {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      options: {
        socket: { type: 'string' },
        group: { type: 'string' },
        device: { type: 'string' },
        'data-root': { type: 'string' },
        'exec-root': { type: 'string' },
        runtime: { type: 'string' },
        'init-path': { type: 'string' },
        'log-level': { type: 'string', short: 'l' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
    if (values.help) {
      process.stdout.write(AGENT_USAGE);
      return;
    }
    if (Boolean(values.socket) === Boolean(values.device)) throw new Error('give one of --socket and --device');
    if (values.group && !values.socket) throw new Error('--group is for --socket');
    if (values.runtime && values.runtime !== 'crun' && values.runtime !== 'runc') throw new Error(`unknown runtime ${JSON.stringify(values.runtime)}: expected crun or runc`);
    const level = (values['log-level'] as string | undefined) ?? 'info';
    if (!isLogLevel(level)) throw new Error(`unknown log level ${JSON.stringify(level)}`);
    setLogLevel(level);
  } catch (err) {
    process.stderr.write(`berthd agent: ${errorMessage(err)}\n\n${AGENT_USAGE}`);
    process.exit(2);
  }
  process.on('unhandledRejection', (reason) => {
    log.error('unhandled rejection', { error: errorMessage(reason), stack: (reason as Error)?.stack });
  });
  const dataRoot = (values['data-root'] as string | undefined) ?? '/var/lib/berth-agent';
  const execRoot = (values['exec-root'] as string | undefined) ?? '/run/berth-agent';
  let server: AgentServer;
  let close: () => Promise<void>;
  try {
    await fs.mkdir(dataRoot, { recursive: true, mode: 0o710 });
    await fs.mkdir(execRoot, { recursive: true, mode: 0o700 });
    await ensureExecRootTmpfs(execRoot);
    // Digests of layers on the thread pool (the addon is loaded at the first one).
    useOffThreadHasher(loadLayerHasher);
    const host = await createLinuxHost({
      dataRoot,
      execRoot,
      runtime: ((values.runtime as string | undefined) ?? 'crun') as 'crun' | 'runc',
      initPath: values['init-path'] as string | undefined,
    });
    for (const warning of host.probe.warnings) log.warn(warning);
    const hello = { kernel: os.release(), arch: process.arch, bootId: await fs.readFile('/proc/sys/kernel/random/boot_id', 'utf8').then((s) => s.trim(), () => '') };
    const handler = hostHandler(host);
    server = values.socket
      ? await serveSocket(values.socket as string, handler, { group: values.group as string | undefined, hello })
      : await serveDevice(values.device as string, handler, { hello });
    close = async () => {
      await server.close();
      await host.close();
    };
    log.info('agent serving', { socket: values.socket, device: values.device, dataRoot, execRoot });
  } catch (err) {
    log.error('failed to start the agent', { error: errorMessage(err) });
    process.exit(1);
  }
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info('agent shutting down; containers keep running', { signal });
    // On a device, a read waits in a thread of libuv's pool until the host writes, and process.exit() waits for
    // that thread: the agent ends itself with SIGKILL instead (its containers live on under conmon).
    const end = (code: number) => (values.device ? process.kill(process.pid, 'SIGKILL') : process.exit(code));
    close().then(
      () => end(0),
      () => end(1),
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}
