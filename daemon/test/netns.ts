/**
 * Nodes of a swarm on one machine: each daemon in a network namespace of its own (with its own hostname), on
 * a test bridge, as in the netns harness of the swarm notes. Used by the multi-daemon tests and benchmarks;
 * the names carry a random tag, and tearDown removes what setUp made.
 */
import { randomBytes, randomInt } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { Engine } from './harness.js';

export interface NetnsNode {
  ns: string;
  veth: string;
  ip: string;
  name: string;
}

function run(cmd: string, args: string[]): void {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.stderr}`);
}

export class NetnsCluster {
  readonly bridge: string;
  readonly subnet: string;
  readonly nodes: NetnsNode[];

  constructor(count: number) {
    const tag = randomBytes(3).toString('hex');
    this.bridge = `swb${tag}`;
    this.subnet = `10.${randomInt(200, 250)}.${randomInt(0, 250)}`;
    this.nodes = Array.from({ length: count }, (_, i) => ({ ns: `sw${tag}${i + 1}`, veth: `swv${tag}${i + 1}`, ip: `${this.subnet}.${11 + i}`, name: `node-${i + 1}` }));
  }

  setUp(): void {
    run('ip', ['link', 'add', this.bridge, 'type', 'bridge']);
    run('ip', ['addr', 'add', `${this.subnet}.1/24`, 'dev', this.bridge]);
    run('ip', ['link', 'set', this.bridge, 'up']);
    for (const n of this.nodes) {
      run('ip', ['netns', 'add', n.ns]);
      run('ip', ['link', 'add', n.veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', n.ns]);
      run('ip', ['link', 'set', n.veth, 'master', this.bridge, 'up']);
      run('ip', ['-n', n.ns, 'addr', 'add', `${n.ip}/24`, 'dev', 'eth0']);
      run('ip', ['-n', n.ns, 'link', 'set', 'eth0', 'up']);
      run('ip', ['-n', n.ns, 'link', 'set', 'lo', 'up']);
    }
  }

  tearDown(): void {
    for (const n of this.nodes) spawnSync('ip', ['netns', 'del', n.ns]);
    spawnSync('ip', ['link', 'del', this.bridge]);
  }

  /** A daemon in node i's namespace, with the node's own hostname. */
  engine(i: number, opts: { verbose?: boolean; args?: string[] } = {}): Engine {
    const n = this.nodes[i]!;
    return new Engine({
      verbose: opts.verbose,
      args: opts.args,
      wrapper: ['nsenter', `--net=/run/netns/${n.ns}`, 'unshare', '--uts', '--', 'sh', '-c', `hostname ${n.name} && exec "$0" "$@"`],
    });
  }
}
