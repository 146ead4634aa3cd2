/**
 * Names a task finds through the embedded DNS server on its swarm networks, as Docker's: a service's name
 * (or one of its network aliases) answers its VIP in endpoint mode `vip` and its running tasks' addresses
 * in `dnsrr`; `tasks.<service>` answers the running tasks' addresses. Only services on a network the task
 * is attached to are seen. Answers follow the node's latest view of the swarm (NodeNetworks).
 */
import type { NodeNetworks } from './plane.js';

/** The addresses for `name`, or undefined when no service of the task's networks has that name (the server forwards it). */
export function lookupService(view: NodeNetworks | undefined, taskNetworks: readonly string[], name: string): string[] | undefined {
  const q = name.toLowerCase().replace(/\.$/, '');
  const tasksOf = q.startsWith('tasks.') ? q.slice('tasks.'.length) : undefined;
  let found = false;
  const out: string[] = [];
  for (const n of view?.Networks ?? []) {
    if (!taskNetworks.includes(n.ID)) continue;
    for (const s of n.Services ?? []) {
      const names = [s.Name, ...s.Aliases].map((x) => x.toLowerCase());
      if (tasksOf !== undefined && names.includes(tasksOf)) {
        found = true;
        out.push(...s.Tasks);
      } else if (names.includes(q)) {
        found = true;
        out.push(...(s.VIP ? [s.VIP] : s.Tasks));
      }
    }
    // Standalone containers attached to the network, by their names and aliases.
    for (const a of n.Attached ?? []) {
      if (tasksOf !== undefined || !a.Names.some((x) => x.toLowerCase() === q)) continue;
      found = true;
      out.push(a.Address);
    }
  }
  return found ? [...new Set(out)] : undefined;
}

/** The VIPs a task's container balances, with the running tasks behind each. */
export function vipsOf(view: NodeNetworks | undefined, taskNetworks: readonly string[]): Array<{ vip: string; backends: string[] }> {
  const out: Array<{ vip: string; backends: string[] }> = [];
  for (const n of view?.Networks ?? []) {
    if (!taskNetworks.includes(n.ID)) continue;
    for (const s of n.Services ?? []) if (s.VIP) out.push({ vip: s.VIP, backends: s.Tasks });
  }
  return out;
}
