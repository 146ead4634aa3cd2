/**
 * Sandbox policies in the kernel: one nftables table per sandbox in the host's namespace, family netdev,
 * with a base chain on the ingress of the host end of each of the container's veths. Every frame the
 * container sends passes there (raw and packet sockets included) and nothing in the container's namespace
 * can reach the table. The table is named after the container (`berth_sbx_<short id>`); the engine's
 * compiled program (engine/sandbox/policy.ts) is its body.
 */
import { existsSync } from 'node:fs';
import type { SandboxHost, SandboxProgram } from '../../host.js';
import { run } from './run.js';

function tableName(containerId: string): string {
  if (!/^[0-9a-f]{12,64}$/.test(containerId)) throw new Error(`invalid container id ${JSON.stringify(containerId)}`);
  return `berth_sbx_${containerId.slice(0, 12)}`;
}

const INTERFACE_NAME = /^[A-Za-z0-9_.-]{1,15}$/;
const SET_NAME = /^d\d+_[46]$/;
const MAC = /^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$/;
const IPV4 = /^\d{1,3}(\.\d{1,3}){3}$/;
const IPV6 = /^[0-9a-f:]{2,39}$/;

async function tableExists(table: string): Promise<boolean> {
  try {
    await run('nft', ['list', 'table', 'netdev', table]);
    return true;
  } catch {
    return false;
  }
}

export class LinuxSandboxHost implements SandboxHost {
  /**
   * Installs (or replaces, in one transaction) the container's table with the program, hooked on the
   * ingress of `interfaces` (the host ends of its veths). With no interface, the table is removed.
   */
  async applyPolicy(containerId: string, interfaces: readonly string[], program: SandboxProgram): Promise<void> {
    const table = tableName(containerId);
    for (const name of interfaces) if (!INTERFACE_NAME.test(name)) throw new Error(`invalid interface name ${JSON.stringify(name)}`);
    if (interfaces.length === 0) return this.removePolicy(containerId);
    // Frames to another container of the bridge would skip the ingress hook through the bridge's direct
    // delivery (the bridge's tc filter block on the veth's clsact ingress, which runs first): a sandbox's veth
    // leaves the block and its frames go through the bridge.
    for (const dev of interfaces) await run('tc', ['qdisc', 'del', 'dev', dev, 'clsact']).catch(() => undefined);
    const lines = [
      // Created if missing, so that the deletion that follows is valid; both in the same transaction.
      `table netdev ${table} {}`,
      `delete table netdev ${table}`,
      `table netdev ${table} {`,
      ...program.sets.map((s) => `  ${s}`),
      '  chain refuse {',
      ...program.refuse.map((r) => `    ${r}`),
      '  }',
      ...program.chains.flatMap((c) => {
        if (!/^[a-z][a-z0-9_]{0,30}$/.test(c.name)) throw new Error(`invalid chain name ${JSON.stringify(c.name)}`);
        return [`  chain ${c.name} {`, ...c.rules.map((r) => `    ${r}`), '  }'];
      }),
      '  chain rules {',
      ...program.chain.map((r) => `    ${r}`),
      '  }',
      ...interfaces.map((dev, i) => `  chain ingress${i} {\n    type filter hook ingress device "${dev}" priority 0; policy accept;\n    jump rules\n  }`),
      // What the rules let through (and only that: a refused frame ends at priority 0) goes on at priority 10,
      // where a frame for a container of the bridge is handed to its veth, as the bridge's tc block does for
      // the frames of other containers; a MAC address the map lacks leaves it to the bridge.
      '  map peers { type ether_addr : iface_index; }',
      ...interfaces.map((dev, i) => `  chain deliver${i} {\n    type filter hook ingress device "${dev}" priority 10; policy accept;\n    fwd to ether daddr map @peers\n  }`),
      '}',
      '',
    ];
    await run('nft', ['-f', '-'], lines.join('\n'));
  }

  /**
   * Fills the table's map of the containers its frames are handed to directly (replaced whole, in one
   * transaction). An interface gone meanwhile is left out.
   */
  async setDirectPeers(containerId: string, peers: ReadonlyArray<{ mac: string; hostInterface: string }>): Promise<void> {
    const table = tableName(containerId);
    const present = peers.filter((p) => MAC.test(p.mac) && INTERFACE_NAME.test(p.hostInterface) && existsSync(`/sys/class/net/${p.hostInterface}`));
    const lines = [`flush map netdev ${table} peers`];
    if (present.length > 0) lines.push(`add element netdev ${table} peers { ${present.map((p) => `${p.mac.toLowerCase()} : "${p.hostInterface}"`).join(', ')} }`);
    await run('nft', ['-f', '-'], lines.join('\n') + '\n');
  }

  /** Removes the container's table. Idempotent. */
  async removePolicy(containerId: string): Promise<void> {
    const table = tableName(containerId);
    if (!(await tableExists(table))) return;
    await run('nft', ['-f', '-'], `table netdev ${table} {}\ndelete table netdev ${table}\n`).catch(() => undefined);
  }

  /**
   * Adds addresses to a set of the container's table for `ttlSeconds`, each with the name it answered for (a
   * present element gets the new timeout). Fails when the table or set is gone.
   */
  async allowAddresses(containerId: string, set: string, name: string, addresses: readonly string[], ttlSeconds: number): Promise<void> {
    const table = tableName(containerId);
    if (!SET_NAME.test(set)) throw new Error(`invalid set name ${JSON.stringify(set)}`);
    if (!/^[A-Za-z0-9_.*-]{1,253}$/.test(name)) throw new Error(`invalid name ${JSON.stringify(name)}`);
    const v6 = set.endsWith('_6');
    for (const a of addresses) if (!(v6 ? IPV6 : IPV4).test(a)) throw new Error(`invalid address ${JSON.stringify(a)}`);
    if (addresses.length === 0) return;
    const ttl = Math.max(1, Math.floor(ttlSeconds));
    const list = addresses.join(', ');
    // Added, removed and added again with the timeout in one transaction: an element already present (an
    // earlier answer) takes the new timeout.
    const lines = [
      `add element netdev ${table} ${set} { ${list} }`,
      `delete element netdev ${table} ${set} { ${list} }`,
      `add element netdev ${table} ${set} { ${addresses.map((a) => `${a} timeout ${ttl}s comment "${name}"`).join(', ')} }`,
      '',
    ];
    await run('nft', ['-f', '-'], lines.join('\n'));
  }

  /** The addresses in the sets of the container's table now (none when it has no table). */
  async allowedAddresses(containerId: string): Promise<Array<{ set: string; address: string; name: string; expiresInSeconds: number }>> {
    const table = tableName(containerId);
    let text: string;
    try {
      text = await run('nft', ['-j', 'list', 'table', 'netdev', table]);
    } catch {
      return [];
    }
    const out: Array<{ set: string; address: string; name: string; expiresInSeconds: number }> = [];
    for (const item of (JSON.parse(text) as { nftables?: Array<Record<string, any>> }).nftables ?? []) {
      const set = item.set as { name?: string; elem?: Array<{ elem?: { val?: unknown; expires?: number; comment?: string } }> } | undefined;
      if (!set?.name || !SET_NAME.test(set.name)) continue;
      for (const e of set.elem ?? []) {
        if (typeof e.elem?.val !== 'string') continue;
        out.push({ set: set.name, address: e.elem.val, name: e.elem.comment ?? '', expiresInSeconds: e.elem.expires ?? 0 });
      }
    }
    return out;
  }

  /** The tables of sandboxes present in the kernel, by container short id. */
  async installedPolicies(): Promise<string[]> {
    const out = await run('nft', ['list', 'tables', 'netdev']).catch(() => '');
    return [...out.matchAll(/^table netdev berth_sbx_([0-9a-f]{12})$/gm)].map((m) => m[1]);
  }

  /** Removes a table found by installedPolicies (a crash's leftover). */
  async removePolicyByShortId(shortId: string): Promise<void> {
    if (!/^[0-9a-f]{12}$/.test(shortId)) return;
    await run('nft', ['delete', 'table', 'netdev', `berth_sbx_${shortId}`]).catch(() => undefined);
  }
}
