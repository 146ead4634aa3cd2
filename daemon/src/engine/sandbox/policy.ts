/**
 * Network policies of sandboxes: the policy JSON (validated and given its defaults here), and the rule
 * program the kernel enforces for it (compiled here, installed by the host).
 *
 * A policy:
 *   {"defaultAction": "allow"|"deny",
 *    "rules": [{"action": "allow"|"deny", "cidr": "10.1.0.0/16" | "domain": "example.test" | "*.example.test",
 *               "protocol": "tcp"|"udp"|"any" (default any), "ports": [443, "8000-8100"] (default every port)}]}
 *
 * Rules are read in order and the first that matches a packet decides; the default action decides the rest.
 * A domain rule matches the addresses the embedded DNS server answered for a matching name, for the answer's
 * TTL (the engine fills the rule's address sets as answers go by).
 */
import { InvalidParameter } from '../../errors.js';
import { formatIPv4, parseCIDR } from '../networks/ipv4.js';
import { formatIPv6, parseCIDR6 } from '../../util/ipv6.js';

export type PolicyAction = 'allow' | 'deny';
export type PolicyProtocol = 'tcp' | 'udp' | 'any';

export interface PolicyRule {
  action: PolicyAction;
  cidr?: string;
  domain?: string;
  protocol: PolicyProtocol;
  /** Single ports and `first-last` ranges; absent: every port. */
  ports?: Array<number | string>;
}

export interface NetworkPolicy {
  defaultAction: PolicyAction;
  rules: PolicyRule[];
}

/** The label that gives a container its policy at create (any docker client can set it). */
export const POLICY_LABEL = 'berth.network-policy';

export const MAX_RULES = 10_000;

const DOMAIN_LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/;

function bad(message: string): never {
  throw new InvalidParameter(`invalid network policy: ${message}`);
}

function checkPorts(value: unknown, where: string): Array<number | string> {
  if (!Array.isArray(value) || value.length === 0) bad(`${where}.ports must be a non-empty array of ports (443) or ranges ("8000-8100")`);
  return value.map((p, i) => {
    if (typeof p === 'number') {
      if (!Number.isInteger(p) || p < 1 || p > 65535) bad(`${where}.ports[${i}] is not a port (1-65535): ${JSON.stringify(p)}`);
      return p;
    }
    const m = typeof p === 'string' ? /^(\d{1,5})(?:-(\d{1,5}))?$/.exec(p) : null;
    if (!m) bad(`${where}.ports[${i}] must be a port number or a "first-last" range: ${JSON.stringify(p)}`);
    const first = Number(m[1]);
    const last = m[2] === undefined ? first : Number(m[2]);
    if (first < 1 || last > 65535 || first > last) bad(`${where}.ports[${i}] is not a range of ports within 1-65535: ${JSON.stringify(p)}`);
    return p;
  });
}

function checkDomain(value: unknown, where: string): string {
  if (typeof value !== 'string') bad(`${where}.domain must be a string`);
  const name = value.toLowerCase().replace(/\.$/, '');
  const bare = name.startsWith('*.') ? name.slice(2) : name;
  if (bare.length === 0 || bare.length > 253 || !bare.split('.').every((l) => DOMAIN_LABEL.test(l))) {
    bad(`${where}.domain is not a domain name (or a "*." wildcard of one): ${JSON.stringify(value)}`);
  }
  return name;
}

function checkCidr(value: unknown, where: string): string {
  if (typeof value !== 'string') bad(`${where}.cidr must be a string`);
  const text = value.includes('/') ? value : `${value}/${value.includes(':') ? 128 : 32}`;
  const v4 = parseCIDR(text);
  if (v4) return `${formatIPv4(v4.subnet.base)}/${v4.subnet.prefix}`;
  const v6 = parseCIDR6(text.toLowerCase());
  if (v6) return `${formatIPv6(v6.subnet.base)}/${v6.subnet.prefix}`;
  bad(`${where}.cidr is not an IPv4 or IPv6 address or CIDR: ${JSON.stringify(value)}`);
}

/** Checks a policy as given (InvalidParameter naming the first problem) and answers it with its defaults. */
export function validatePolicy(input: unknown): NetworkPolicy {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) bad('the policy must be a JSON object');
  const p = input as Record<string, unknown>;
  for (const key of Object.keys(p)) if (key !== 'defaultAction' && key !== 'rules') bad(`unknown field ${JSON.stringify(key)}`);
  if (p.defaultAction !== 'allow' && p.defaultAction !== 'deny') bad('defaultAction must be "allow" or "deny"');
  const rulesIn = p.rules ?? [];
  if (!Array.isArray(rulesIn)) bad('rules must be an array');
  if (rulesIn.length > MAX_RULES) bad(`at most ${MAX_RULES} rules`);
  const rules = rulesIn.map((r, i): PolicyRule => {
    const where = `rules[${i}]`;
    if (typeof r !== 'object' || r === null || Array.isArray(r)) bad(`${where} must be an object`);
    const rule = r as Record<string, unknown>;
    for (const key of Object.keys(rule)) {
      if (!['action', 'cidr', 'domain', 'protocol', 'ports'].includes(key)) bad(`${where} has an unknown field ${JSON.stringify(key)}`);
    }
    if (rule.action !== 'allow' && rule.action !== 'deny') bad(`${where}.action must be "allow" or "deny"`);
    const protocol = rule.protocol ?? 'any';
    if (protocol !== 'tcp' && protocol !== 'udp' && protocol !== 'any') bad(`${where}.protocol must be "tcp", "udp" or "any"`);
    if ((rule.cidr === undefined) === (rule.domain === undefined)) bad(`${where} needs exactly one of cidr and domain`);
    const out: PolicyRule = { action: rule.action, protocol };
    if (rule.cidr !== undefined) out.cidr = checkCidr(rule.cidr, where);
    else out.domain = checkDomain(rule.domain, where);
    if (rule.ports !== undefined) {
      if (protocol === 'any') bad(`${where}.ports needs protocol "tcp" or "udp"`);
      out.ports = checkPorts(rule.ports, where);
    }
    return out;
  });
  return { defaultAction: p.defaultAction, rules };
}

/** Whether a name the container asked for is one of the domain rule's: exact, or below it for `*.`. */
export function domainMatches(pattern: string, name: string): boolean {
  const n = name.toLowerCase().replace(/\.$/, '');
  if (pattern.startsWith('*.')) return n.endsWith(pattern.slice(1)) && n.length > pattern.length - 1;
  return n === pattern;
}

/**
 * For each rule, the index of the first rule of its run: consecutive rules of one kind (domain or CIDR) with
 * the same action, protocol and ports, which the program checks with one set lookup.
 */
export function ruleRuns(policy: NetworkPolicy): number[] {
  const key = (r: PolicyRule) => `${r.domain !== undefined ? 'domain' : 'cidr'}|${r.action}|${r.protocol}|${JSON.stringify(r.ports ?? null)}`;
  const starts: number[] = [];
  policy.rules.forEach((rule, i) => starts.push(i > 0 && key(policy.rules[i - 1]) === key(rule) ? starts[i - 1] : i));
  return starts;
}

/** The names of the address sets of the domain rules of the run starting at `index`. */
export function domainSets(index: number): { v4: string; v6: string } {
  return { v4: `d${index}_4`, v6: `d${index}_6` };
}

/** Merges CIDRs of one family into sorted, disjoint ranges (`a-b`, or the address when a range is one address). */
function mergeRanges(cidrs: readonly string[], v6: boolean): string[] {
  const bits = v6 ? 128n : 32n;
  const ranges = cidrs.map((c) => {
    const [addr, prefix] = c.split('/');
    const base = v6 ? parseCIDR6(c)!.subnet.base : BigInt(parseCIDR(c)!.subnet.base >>> 0);
    void addr;
    const size = 1n << (bits - BigInt(prefix));
    return [base, base + size - 1n] as [bigint, bigint];
  });
  ranges.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const merged: Array<[bigint, bigint]> = [];
  for (const r of ranges) {
    const last = merged[merged.length - 1];
    if (last && r[0] <= last[1] + 1n) {
      if (r[1] > last[1]) last[1] = r[1];
    } else merged.push([r[0], r[1]]);
  }
  const fmt = (n: bigint) => (v6 ? formatIPv6(n) : formatIPv4(Number(n)));
  return merged.map(([a, b]) => (a === b ? fmt(a) : `${fmt(a)}-${fmt(b)}`));
}

function portMatch(rule: PolicyRule): string {
  if (rule.protocol === 'any') return '';
  if (!rule.ports) return `meta l4proto ${rule.protocol} `;
  const ports = rule.ports.map((p) => String(p));
  return `${rule.protocol} dport ${ports.length === 1 ? ports[0] : `{ ${ports.join(', ')} }`} `;
}

/** How long a flow a domain rule let through stays allowed without a packet. */
export const FLOW_IDLE_SECONDS = 300;

/** The verdict of an action: a denial is refused at once (TCP reset, ICMP administratively prohibited). */
function verdict(action: PolicyAction): string[] {
  return action === 'allow' ? ['accept'] : ['goto refuse'];
}

/**
 * The nftables program of a policy (netdev family, for the ingress of the host end of the container's
 * veths): the sets of the domain rules and the `rules` and `refuse` chains. Consecutive CIDR rules with the
 * same action, protocol and ports are merged into one lookup of an interval set, and consecutive domain rules
 * of one kind share one pair of address sets, so that a long list costs a few lookups per packet, not one
 * comparison per rule.
 */
export function compilePolicy(policy: NetworkPolicy): { sets: string[]; chain: string[]; refuse: string[]; chains: Array<{ name: string; rules: string[] }> } {
  const sets: string[] = [];
  const chains: Array<{ name: string; rules: string[] }> = [];
  const chain: string[] = [
    // Address resolution and IPv6 neighbour discovery; nothing but IP and ARP leaves a sandbox.
    'meta protocol arp accept',
    'meta protocol != { ip, ip6 } drop',
    'icmpv6 type { nd-router-solicit, nd-neighbor-solicit, nd-neighbor-advert } accept',
  ];
  // A domain's addresses are allowed for the answer's TTL; the TCP and UDP flows a domain rule let through
  // stay allowed while they are active (FLOW_IDLE_SECONDS without a packet ends them), past that TTL.
  const domainAllows = policy.rules.some((r) => r.domain !== undefined && r.action === 'allow');
  if (domainAllows) {
    for (const [family, addr, type] of [['4', 'ip', 'ipv4_addr'], ['6', 'ip6', 'ipv6_addr']] as const) {
      const flow = `${addr} daddr . meta l4proto . th dport . th sport`;
      sets.push(`set flows${family} { type ${type} . inet_proto . inet_service . inet_service; flags dynamic, timeout; timeout ${FLOW_IDLE_SECONDS}s; }`);
      chain.push(`meta l4proto { tcp, udp } ${flow} @flows${family} update @flows${family} { ${flow} } accept`);
      chains.push({ name: `admit${family}`, rules: [`meta l4proto { tcp, udp } add @flows${family} { ${flow} }`, 'accept'] });
    }
  }
  const rules = policy.rules;
  const runs = ruleRuns(policy);
  for (let i = 0; i < rules.length; ) {
    const rule = rules[i];
    let end = i;
    while (end < rules.length && runs[end] === i) end++;
    if (rule.domain !== undefined) {
      // One pair of sets for the run: the addresses answered for any of its names.
      const names = domainSets(i);
      sets.push(`set ${names.v4} { type ipv4_addr; flags timeout; }`, `set ${names.v6} { type ipv6_addr; flags timeout; }`);
      const [v4, v6] = rule.action === 'allow' ? ['goto admit4', 'goto admit6'] : ['goto refuse', 'goto refuse'];
      chain.push(`ip daddr @${names.v4} ${portMatch(rule)}${v4}`, `ip6 daddr @${names.v6} ${portMatch(rule)}${v6}`);
    } else {
      const cidrs = rules.slice(i, end).map((r) => r.cidr!);
      const v4 = mergeRanges(cidrs.filter((c) => !c.includes(':')), false);
      const v6 = mergeRanges(cidrs.filter((c) => c.includes(':')), true);
      for (const v of verdict(rule.action)) {
        if (v4.length > 0) chain.push(`ip daddr ${v4.length === 1 ? v4[0] : `{ ${v4.join(', ')} }`} ${portMatch(rule)}${v}`);
        if (v6.length > 0) chain.push(`ip6 daddr ${v6.length === 1 ? v6[0] : `{ ${v6.join(', ')} }`} ${portMatch(rule)}${v}`);
      }
    }
    i = end;
  }
  chain.push(...verdict(policy.defaultAction));
  const refuse = ['meta l4proto tcp reject with tcp reset', 'reject with icmpx type admin-prohibited'];
  return { sets, chain, refuse, chains };
}

/** An entry of the effective view: what the kernel enforces now. */
export interface EffectiveRule {
  action: PolicyAction;
  protocol: PolicyProtocol;
  ports?: Array<number | string>;
  cidr: string;
  domain?: string;
  expiresAt?: string;
}
