/**
 * Error classes shared by every layer (engine, host, api). Each class stands for one kind of failure; the
 * api layer maps the class to an HTTP status in one place (api/httpstatus.ts). Code decides by class, never
 * by message text.
 */
export class EngineError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The object asked for does not exist (404). */
export class NotFound extends EngineError {}
/** The request conflicts with the object's state (409). */
export class Conflict extends EngineError {}
/** A parameter or body field is malformed or out of range (400). */
export class InvalidParameter extends EngineError {}
/**
 * A path of the daemon's machine that the machine containers run on does not see: outside every folder
 * shared with the VM (400, as other bad input).
 */
export class NotShared extends InvalidParameter {}
/** Nothing to do: the object is already in the requested state (304). */
export class NotModified extends EngineError {}
/** The operation is not permitted for this object (403). */
export class Forbidden extends EngineError {}
/** Credentials are missing or were refused (401). */
export class Unauthorized extends EngineError {}
/** The operation cannot be carried out in this context, e.g. not attachable (406). */
export class NotAcceptable extends EngineError {}
/** The service or a dependency is not available right now (503). */
export class Unavailable extends EngineError {}
/**
 * The node is not part of a swarm, or not a manager of one (503; API 1.24 answered 406, which api/compat.ts
 * holds as a version difference).
 */
export class NotInSwarm extends Unavailable {}
/** The feature is not implemented by this engine (501). */
export class NotImplemented extends EngineError {}
/** The request body is larger than the engine accepts (413). */
export class TooLarge extends EngineError {}

/**
 * A program of the machine that the Host ran as a stream stage failed: it could not be run (`missing` when
 * it is not installed; `detail` says why), or it ended with `exitCode`, and `detail` is what it wrote on
 * stderr. The engine says what that means for its request.
 */
export class ToolFailure extends EngineError {
  constructor(
    readonly tool: string,
    readonly failure: { missing?: boolean; exitCode?: number | null; detail: string },
    options?: { cause?: unknown },
  ) {
    super(failure.exitCode === undefined ? `cannot run ${tool}: ${failure.detail}` : `${tool} exited ${failure.exitCode}: ${failure.detail}`, options);
  }
}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
