/**
 * Errors across the agent protocol: an error crosses as its class name, message and own fields, and comes
 * out on the other side as an instance of the same class when this side knows it (the engine's error
 * classes), so that a NotFound in the agent is a 404 at the daemon. Other errors become plain Errors that
 * keep their name and fields (a system error's `code`, `errno`, `syscall`, `path`).
 */
import * as engineErrors from '../../errors.js';

export type ErrorFields = Record<string, unknown>;

const known = new Map<string, new (message: string) => Error>();
for (const value of Object.values(engineErrors)) {
  if (typeof value === 'function' && value.prototype instanceof Error) known.set(value.name, value as new (message: string) => Error);
}

/** Makes errors of `Class` cross as themselves (for classes beyond the engine's own). */
export function registerErrorClass(Class: new (message: string) => Error): void {
  known.set(Class.name, Class);
}

export function encodeError(err: Error): { name: string; message: string; fields: ErrorFields } {
  const fields: ErrorFields = {};
  for (const key of Object.keys(err)) {
    if (key === 'name' || key === 'message' || key === 'stack' || key === 'cause') continue;
    fields[key] = (err as unknown as Record<string, unknown>)[key];
  }
  return { name: err.name, message: err.message, fields };
}

export function decodeError(name: string, message: string, fields: ErrorFields, cause?: unknown): Error {
  const Class = known.get(name);
  let err: Error;
  if (Class) {
    err = Object.create(Class.prototype) as Error;
    Object.defineProperty(err, 'message', { value: message, writable: true, configurable: true });
    // The engine's classes carry their name as an own field, as their constructor sets it.
    (err as { name: string }).name = name;
  } else {
    err = new Error(message);
    if (name !== 'Error') Object.defineProperty(err, 'name', { value: name, writable: true, configurable: true, enumerable: false });
  }
  Object.assign(err, fields);
  if (cause !== undefined) Object.defineProperty(err, 'cause', { value: cause, writable: true, configurable: true });
  Object.defineProperty(err, 'stack', { value: `${name}: ${message}\n    at (the agent)`, writable: true, configurable: true });
  return err;
}
