/**
 * Times foreground runs of an OCI runtime in this process and prints the samples (ms) as JSON:
 *
 *   node reference-worker.js RUNTIME BUNDLE STATE_ROOT ITERATIONS WARMUP
 *
 * A separate process so that the caller can place it in a mount namespace of its own.
 */
import { timeRuns, type Runtime } from './reference.js';

const [runtime, dir, stateRoot, iterations, warmup] = process.argv.slice(2);
if (runtime !== 'crun' && runtime !== 'runc') {
  process.stderr.write('usage: reference-worker crun|runc BUNDLE STATE_ROOT ITERATIONS WARMUP\n');
  process.exit(2);
}
timeRuns(runtime as Runtime, { dir: dir!, stateRoot: stateRoot! }, Number(iterations), Number(warmup)).then(
  (samples) => process.stdout.write(JSON.stringify(samples) + '\n'),
  (err: Error) => {
    process.stderr.write(`${err.message}\n`);
    process.exit(1);
  },
);
