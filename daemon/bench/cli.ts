/** The command line every benchmark shares: --json, --check, --verbose, number checks, and the exit code. */

import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { Engine } from '../test/harness.js';
import { fmt, msSince } from './stats.js';

type OptionsConfig = NonNullable<ParseArgsConfig['options']>;

/** The flags of every benchmark: figures as JSON, exit 1 on a missed target, the daemon's log shown. */
export interface CommonOptions {
  json: boolean;
  check: boolean;
  verbose: boolean;
}

const COMMON = { json: { type: 'boolean' }, check: { type: 'boolean' }, verbose: { type: 'boolean' } } as const;

/** The usage lines of the common flags. */
export const COMMON_USAGE = `      --json           print the figures as JSON
      --check          exit 1 when a figure misses its target
      --verbose        show the daemon's log
`;

/** Parses `argv` strictly: the benchmark's own `options` and the common flags. Throws on bad input. */
export function parseBenchArgs<O extends OptionsConfig>(argv: string[], options: O) {
  return parseArgs({ args: argv, strict: true, options: { ...options, ...COMMON } }).values;
}

/** The common flags out of parsed values. */
export function commonOptions(values: { json?: boolean; check?: boolean; verbose?: boolean }): CommonOptions {
  return { json: values.json === true, check: values.check === true, verbose: values.verbose === true };
}

/** `--name` as a positive whole number (digits only), `fallback` when it is not given. */
export function positiveInt<V extends object>(values: V, name: keyof V & string, fallback: number): number {
  const v = values[name] as string | undefined;
  if (v === undefined) return fallback;
  if (!/^\d+$/.test(v) || Number(v) < 1) throw new Error(`--${name} needs a positive whole number, got ${JSON.stringify(v)}`);
  return Number(v);
}

/** `--name` as an integer of at least `min`, `fallback` when it is not given. */
export function intAtLeast<V extends object>(values: V, name: keyof V & string, fallback: number, min: number): number {
  const value = values[name] as string | undefined;
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) throw new Error(`--${name} wants an integer >= ${min}, got ${JSON.stringify(value)}`);
  return n;
}

/** `--runtime`: crun (the default) or runc. */
export function runtimeOption(value: string | undefined): 'crun' | 'runc' {
  const runtime = value ?? 'crun';
  if (runtime !== 'crun' && runtime !== 'runc') throw new Error(`--runtime wants crun or runc, got ${JSON.stringify(runtime)}`);
  return runtime;
}

/** Runs a benchmark's main and exits with its code; a failure prints its message and exits with `failCode`. */
export function runMain(main: () => Promise<number>, failCode = 2): void {
  main().then(
    (code) => process.exit(code),
    (err) => {
      console.error(err instanceof Error ? err.message : err);
      process.exit(failCode);
    },
  );
}

/**
 * Starts `engine`, runs `body`, then `cleanup` (the engine's own by default), also on Ctrl-C, which then exits
 * 130.
 */
export async function withEngine<T>(engine: Engine, body: () => Promise<T>, cleanup: () => Promise<void> = () => engine.cleanup()): Promise<T> {
  const onSignal = () => void cleanup().then(() => process.exit(130));
  process.once('SIGINT', onSignal);
  try {
    await engine.start();
    return await body();
  } finally {
    process.off('SIGINT', onSignal);
    await cleanup();
  }
}

/** A benchmark that builds a report: its usage text, flags (undefined for --help), run, text form and missed targets. */
export interface ReportBenchmark<O extends CommonOptions, R extends { errors: Record<string, string> }> {
  usage: string;
  parseOptions(argv: string[]): O | undefined;
  runBenchmark(opts: O, progress: (line: string) => void): Promise<R>;
  formatReport(report: R): string;
  missedTargets(report: R): string[];
}

/** The main of a report benchmark: 2 for bad flags or not root, 1 for an error or (with --check) a missed target. */
export async function reportMain<O extends CommonOptions, R extends { errors: Record<string, string> }>(argv: string[], bench: ReportBenchmark<O, R>): Promise<number> {
  let opts: O | undefined;
  try {
    opts = bench.parseOptions(argv);
  } catch (err) {
    process.stderr.write(`bench: ${(err as Error).message}\n\n${bench.usage}`);
    return 2;
  }
  if (!opts) {
    process.stdout.write(bench.usage);
    return 0;
  }
  if (process.getuid?.() !== 0) {
    process.stderr.write('bench: run as root (it starts a daemon and containers)\n');
    return 2;
  }
  const started = process.hrtime.bigint();
  const report = await bench.runBenchmark(opts, (line) => process.stderr.write(`bench: ${line}\n`));
  process.stderr.write(`bench: done in ${fmt(msSince(started) / 1000)} s\n`);
  process.stdout.write(opts.json ? JSON.stringify(report, null, 2) + '\n' : bench.formatReport(report));
  if (Object.keys(report.errors).length) return 1;
  return opts.check && bench.missedTargets(report).length ? 1 : 0;
}
