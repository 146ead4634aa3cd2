import { InvalidParameter } from '../../../errors.js';

/**
 * The runtime could not start the container's command: not found (exit code 127) or not executable (126).
 * A configuration error of the container (400), as Docker answers it; `exitCode` is what Docker records.
 */
export class ContainerCommandError extends InvalidParameter {
  constructor(
    message: string,
    readonly exitCode: 126 | 127,
  ) {
    super(message);
  }
}

/** Classifies the runtime's error text of a failed create/start. */
export function runtimeStartError(text: string): Error {
  const lower = text.toLowerCase();
  // crun words it "executable file `X` not found in $PATH"; clients recognise Docker's wording (the docker
  // CLI exits 127 on "executable file not found"), so the message says it that way.
  const crunNotFound = /executable file `([^`]*)` not found in \$PATH/.exec(text);
  if (crunNotFound) return new ContainerCommandError(`exec: "${crunNotFound[1]}": executable file not found in $PATH`, 127);
  if (lower.includes('executable file not found') || lower.includes('no such file or directory')) {
    return new ContainerCommandError(text, 127);
  }
  if (lower.includes('permission denied')) return new ContainerCommandError(text, 126);
  if (lower.includes('not a directory')) {
    return new ContainerCommandError(
      `${text}: Are you trying to mount a directory onto a file (or vice-versa)? Check if the specified host path exists and is the expected type`,
      127,
    );
  }
  return new Error(text);
}
