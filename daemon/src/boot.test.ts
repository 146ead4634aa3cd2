import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

/** The project's modules that importing `file` loads, as paths under dist/src (loader hooks see each one). */
function modulesLoadedBy(file: string): string[] {
  const hooks = `export async function load(url, context, next) { if (url.startsWith('file:')) process.stderr.write('LOADED ' + url + '\\n'); return next(url, context); }`;
  const script = `import { register } from 'node:module'; register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(hooks)})); await import(${JSON.stringify(pathToFileURL(file).href)});`;
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  assert.equal(run.status, 0, run.stderr);
  return [...run.stderr.matchAll(/^LOADED (\S+)$/gm)].map((m) => path.relative(here, fileURLToPath(m[1]!)));
}

test('what berthd loads before it listens stays small: no engine, host or composition module, no dependency', () => {
  const loaded = modulesLoadedBy(path.join(here, 'cli.js'));
  assert.ok(loaded.includes('boot.js') && loaded.includes(path.join('api', 'server.js')), loaded.join(' '));
  const heavy = loaded.filter((m) => m.startsWith('..') || m.startsWith(`engine${path.sep}`) || m.startsWith(`host${path.sep}`) || m === 'daemon.js');
  assert.deepEqual(heavy, [], 'loaded at their first use or once the daemon listens, not before');
  assert.ok(loaded.length <= 20, `${loaded.length} modules before listening: ${loaded.join(' ')}`);
});
