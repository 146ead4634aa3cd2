/**
 * Records every file a node process loads, for the packaging test: started with
 * `--import <this file's URL>` and BERTH_TRACE_LOADS=<file>, it appends one absolute path a line.
 * ES modules are seen by a load hook (registered from this same file, which then runs again in the hooks
 * thread); CommonJS modules and native addons are in require's cache, written when the process exits.
 */
import { appendFileSync } from 'node:fs';
import { createRequire, register } from 'node:module';
import { fileURLToPath } from 'node:url';
import { isMainThread } from 'node:worker_threads';

let out = process.env.BERTH_TRACE_LOADS;

export function initialize(data: { out: string }): void {
  out = data.out;
}

type NextLoad = (url: string, context: unknown) => Promise<unknown>;
export async function load(url: string, context: unknown, next: NextLoad): Promise<unknown> {
  if (out && url.startsWith('file:')) appendFileSync(out, fileURLToPath(url) + '\n');
  return next(url, context);
}

if (isMainThread && out) {
  register(import.meta.url, { data: { out } });
  const cache = createRequire(import.meta.url).cache;
  process.on('exit', () => appendFileSync(out!, Object.keys(cache).join('\n') + '\n'));
}
