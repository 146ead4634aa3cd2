import { spawn } from 'node:child_process';

export class CommandError extends Error {
  constructor(
    message: string,
    readonly stderr: string,
    readonly exitCode: number | null,
  ) {
    super(message);
    this.name = 'CommandError';
  }
}

/**
 * Runs a tool to completion, feeding `input` on stdin, and resolves with its stdout. A non-zero exit is a
 * CommandError carrying the tool's stderr.
 */
export function run(command: string, args: string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.on('error', (e) => reject(new CommandError(`${command}: ${e.message}`, '', null)));
    child.on('close', (code) => {
      const stderr = Buffer.concat(err).toString('utf8').trim();
      if (code === 0) resolve(Buffer.concat(out).toString('utf8'));
      else reject(new CommandError(`${command} ${args.join(' ')} failed (exit ${code}): ${stderr}`, stderr, code));
    });
    child.stdin.on('error', () => {
      /* the tool may exit before reading everything; its exit status tells */
    });
    child.stdin.end(input ?? '');
  });
}
