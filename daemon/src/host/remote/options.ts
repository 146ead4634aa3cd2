/**
 * The agent protocol's session (session.ts): the version, the flow-control window, the hello, and what a
 * session is given.
 */

export const PROTOCOL_VERSION = 1;
export const INITIAL_WINDOW = 256 * 1024;

export interface Hello {
  protocol: number;
  /** The software version of the side that sent it (the agent's: berthd's version). */
  version: string;
  /** Chosen by the client for each connection; the server echoes it, so a stale answer is told apart. */
  session: string;
  [field: string]: unknown;
}

/** Runs a call of the peer's. `target` is the method's name; a rejection crosses as a typed error. */
export type CallHandler = (target: string, args: unknown[], signal: AbortSignal) => unknown;

/** A type that crosses as data: `encode` gives something encodable, `decode` the value again. */
export interface CustomType {
  name: string;
  test(value: unknown): boolean;
  encode(value: any): unknown;
  decode(data: any): unknown;
}

export interface SessionOptions {
  role: 'client' | 'server';
  version: string;
  /** More fields of this side's hello (the agent's boot id, its kernel...). */
  hello?: Record<string, unknown>;
  handler?: CallHandler;
  types?: CustomType[];
}
