/**
 * The facts of the machine containers run on that the engine's checks read at once (resource limits, the
 * capability bounding set, the machine id), handed over from the Host's probe at composition
 * (useMachineFacts). Until then (unit tests) nothing is known: no limit, every capability, no machine id.
 */
import type { ProbeHost } from '../host/host.js';

export type MachineFacts = Pick<ProbeHost, 'rlimits' | 'capabilityBoundingSet' | 'machineId'>;

let facts: MachineFacts = { rlimits: {}, machineId: '' };
let rlimits = new Map<string, { soft: number; hard: number }>();

/** Sets the facts of the machine (once, at composition). */
export function useMachineFacts(given: MachineFacts): void {
  facts = { rlimits: given.rlimits, capabilityBoundingSet: given.capabilityBoundingSet, machineId: given.machineId };
  rlimits = new Map(Object.entries(facts.rlimits));
}

export function machineFacts(): MachineFacts {
  return facts;
}

/** The resource limits containers may be given, by RLIMIT name. */
export function hostRlimits(): ReadonlyMap<string, { soft: number; hard: number }> {
  return rlimits;
}

/** Whether capability number `bit` is in the bounding set (true when the set is unknown). */
export function capabilityHeld(bit: number): boolean {
  const hex = facts.capabilityBoundingSet;
  if (hex === undefined) return true;
  return ((BigInt(`0x${hex}`) >> BigInt(bit)) & 1n) === 1n;
}
