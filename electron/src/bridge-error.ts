/** The bridge's refusal: the HTTP status the renderer sees, and a message naming what was refused. */
export class BridgeError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}
