import {
  Conflict, Forbidden, InvalidParameter, NotAcceptable, NotFound, NotImplemented, NotModified,
  TooLarge, Unauthorized, Unavailable,
} from '../engine/errors.js';

/** The one place where an error class becomes an HTTP status. Anything unclassified is a 500. */
export function statusOf(err: unknown): number {
  if (err instanceof NotFound) return 404;
  if (err instanceof Conflict) return 409;
  if (err instanceof InvalidParameter) return 400;
  if (err instanceof NotModified) return 304;
  if (err instanceof Forbidden) return 403;
  if (err instanceof Unauthorized) return 401;
  if (err instanceof NotAcceptable) return 406;
  if (err instanceof Unavailable) return 503;
  if (err instanceof NotImplemented) return 501;
  if (err instanceof TooLarge) return 413;
  return 500;
}
