/**
 * The facts of the machine containers run on that the engine's checks read at once (resource limits, the
 * capability bounding set, the machine id, the block IO controls), handed over from the Host's probe at composition
 * (useMachineFacts). Until then (unit tests) nothing is known: no limit, every capability and block IO
 * control, no machine id.
 */
import type { ProbeHost } from '../host/host.js';

export type MachineFacts = Pick<ProbeHost, 'rlimits' | 'capabilityBoundingSet' | 'machineId' | 'blkio'>;

/** Until the probe is given, every block IO control counts as there (nothing is discarded). */
const UNKNOWN: MachineFacts = { rlimits: {}, machineId: '', blkio: { weight: true, weightDevice: true, throttle: true } };

let facts: MachineFacts = UNKNOWN;
let rlimits: Map<string, { soft: number; hard: number }> | undefined;

/** Sets the facts of the machine (once, at composition); each is read at its first use. */
export function useMachineFacts(given: MachineFacts): void {
  facts = given;
  rlimits = undefined;
}

export function machineFacts(): MachineFacts {
  return facts;
}

/** The resource limits containers may be given, by RLIMIT name. */
export function hostRlimits(): ReadonlyMap<string, { soft: number; hard: number }> {
  return (rlimits ??= new Map(Object.entries(facts.rlimits)));
}

/** Whether capability number `bit` is in the bounding set (true when the set is unknown). */
export function capabilityHeld(bit: number): boolean {
  const hex = facts.capabilityBoundingSet;
  if (hex === undefined) return true;
  return ((BigInt(`0x${hex}`) >> BigInt(bit)) & 1n) === 1n;
}
