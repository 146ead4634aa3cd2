/**
 * No source file of the daemon, the renderer or the Electron shell grows past MAX_LINES: a file that long
 * holds several things, which go to files of their own (one file per verb, STYLE.md). Tests are not
 * counted. The exemptions are listed with their reason; an exempt file that is no longer over the limit
 * fails the test too, so that the list only ever names files that need it.
 */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const MAX_LINES = 450;

/** The repository's root (this file runs from daemon/dist/src). */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

const SOURCE_DIRS = ['daemon/src', 'renderer/src', 'electron/src'];

/** Files allowed over the limit, by path from the repository's root, with why. */
const EXEMPT: Record<string, string> = {
  // A data table: the default seccomp profile's rules.
  'daemon/src/engine/containers/seccomp.ts': 'the default seccomp profile (a data table)',
};

function isSource(name: string): boolean {
  return /\.tsx?$/.test(name) && !/\.test\.tsx?$/.test(name) && !name.endsWith('.d.ts');
}

async function sourceFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  const entries = await fs.readdir(path.join(ROOT, dir), { withFileTypes: true }).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return [];
    throw err;
  });
  for (const entry of entries) {
    const rel = path.posix.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await sourceFiles(rel)));
    else if (entry.isFile() && isSource(entry.name)) out.push(rel);
  }
  return out;
}

/** Lines as `wc -l` counts them, a last line without its newline included. */
function lineCount(text: string): number {
  if (text === '') return 0;
  const newlines = text.split('\n').length - 1;
  return text.endsWith('\n') ? newlines : newlines + 1;
}

test(`no source file is longer than ${MAX_LINES} lines, the listed exemptions aside`, async () => {
  const files = (await Promise.all(SOURCE_DIRS.map(sourceFiles))).flat();
  assert.ok(files.some((f) => f.startsWith('daemon/src/')), `no source file found under ${ROOT}/daemon/src`);
  const lengths = new Map<string, number>();
  for (const file of files) lengths.set(file, lineCount(await fs.readFile(path.join(ROOT, file), 'utf8')));
  const tooLong = [...lengths].filter(([file, lines]) => lines > MAX_LINES && !(file in EXEMPT)).map(([file, lines]) => `${file} (${lines} lines)`);
  assert.deepEqual(tooLong, [], `over ${MAX_LINES} lines: split these along their seams`);
  const stale = Object.keys(EXEMPT).filter((file) => (lengths.get(file) ?? 0) <= MAX_LINES);
  assert.deepEqual(stale, [], `exempt but no longer over ${MAX_LINES} lines (or gone): remove them from EXEMPT`);
});

test('line counting agrees with wc -l', () => {
  assert.equal(lineCount(''), 0);
  assert.equal(lineCount('a\n'), 1);
  assert.equal(lineCount('a\nb'), 2);
  assert.equal(lineCount('a\n\nb\n'), 3);
});
