import {
  Conflict, Forbidden, InvalidParameter, NotAcceptable, NotFound, NotImplemented, NotModified,
  TooLarge, Unauthorized, Unavailable,
} from '../errors.js';

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

/**
 * How an interface writes its errors. `engine`: the Engine API's `{"message"}`. `scim`: SCIM 2.0 errors
 * (RFC 7644 section 3.12) as `application/scim+json`. `control`: the sandbox control interface's
 * `{code, message, details}` with a stable machine code.
 */
export type ErrorStyle = 'engine' | 'scim' | 'control';

export const SCIM_ERROR_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:Error';
export const SCIM_CONTENT_TYPE = 'application/scim+json';

/** The control interface's stable codes, by status. */
const CONTROL_CODES: Record<number, string> = {
  400: 'invalidArgument',
  401: 'unauthenticated',
  403: 'permissionDenied',
  404: 'notFound',
  409: 'failedPrecondition',
  413: 'invalidArgument',
  501: 'unimplemented',
  503: 'unavailable',
};

/** The body and content type of an error in a style; `message` is the error's own text. */
export function errorBody(style: ErrorStyle, status: number, message: string): { body: unknown; contentType: string } {
  switch (style) {
    case 'scim': {
      const body: Record<string, unknown> = { schemas: [SCIM_ERROR_SCHEMA], status: String(status), detail: message };
      // RFC 7644 gives a scimType for 400 only; a malformed value is `invalidValue`.
      if (status === 400) body.scimType = 'invalidValue';
      return { body, contentType: SCIM_CONTENT_TYPE };
    }
    case 'control':
      return { body: { code: CONTROL_CODES[status] ?? (status >= 500 ? 'internal' : 'unknown'), message, details: [] }, contentType: 'application/json' };
    default:
      return { body: { message }, contentType: 'application/json' };
  }
}
