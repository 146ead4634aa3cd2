import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { SECCOMP_BPF_ANNOTATION, SeccompProgramCache } from './seccompcache.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'seccompcache-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A container state folder holding `program` as its seccomp.bpf. */
function stateWith(name: string, program: Buffer | undefined): string {
  const state = path.join(dir, name);
  mkdirSync(state, { recursive: true });
  if (program) writeFileSync(path.join(state, 'seccomp.bpf'), program);
  return state;
}

const filter = { defaultAction: 'SCMP_ACT_ERRNO', syscalls: [{ names: ['read'], action: 'SCMP_ACT_ALLOW' }] };
const spec = (seccomp: object | undefined, annotations?: Record<string, string>) => ({ process: {}, annotations, linux: { seccomp } });

describe('seccomp program cache', () => {
  test('the key follows the filter, and is absent when the spec has none or brings its own', () => {
    const cache = new SeccompProgramCache();
    const key = cache.keyOf(spec(filter));
    assert.match(key ?? '', /^[0-9a-f]{64}$/);
    assert.equal(cache.keyOf(spec(structuredClone(filter))), key);
    assert.notEqual(cache.keyOf(spec({ ...filter, defaultErrnoRet: 1 })), key);
    assert.equal(cache.keyOf(spec(undefined)), undefined);
    assert.equal(cache.keyOf(spec(filter, { [SECCOMP_BPF_ANNOTATION]: 'AAAA' })), undefined);
    assert.equal(cache.keyOf(spec(filter, { 'run.oci.seccomp_fail_unknown_syscall': '1' })), undefined);
    assert.equal(cache.keyOf(spec({ ...filter, listenerPath: '/run/x.sock' })), undefined);
    assert.equal(cache.keyOf(spec({ defaultAction: 'SCMP_ACT_ALLOW', syscalls: [{ names: ['mkdir'], action: 'SCMP_ACT_NOTIFY' }] })), undefined);
  });

  test('a learnt program goes to later specs with the same filter as the annotation; other annotations stay', async () => {
    const cache = new SeccompProgramCache();
    const s = spec(filter, { keep: 'me' });
    const key = cache.keyOf(s)!;
    assert.equal(cache.withProgram(s, key), s);
    const program = Buffer.alloc(64, 7);
    await cache.learn(key, stateWith('a', program));
    const out = cache.withProgram(s, key) as { annotations: Record<string, string> };
    assert.deepEqual(out.annotations, { keep: 'me', [SECCOMP_BPF_ANNOTATION]: program.toString('base64') });
    assert.deepEqual(s.annotations, { keep: 'me' });
    assert.equal(cache.withProgram(s, undefined), s);
  });

  test('missing, empty or malformed programs are not learnt', async () => {
    const cache = new SeccompProgramCache();
    const key = cache.keyOf(spec(filter))!;
    await cache.learn(key, stateWith('none', undefined));
    await cache.learn(key, stateWith('empty', Buffer.alloc(0)));
    await cache.learn(key, stateWith('odd', Buffer.alloc(13)));
    assert.equal(cache.has(key), false);
  });

  test('keeps a few programs, the least recently used leave first', async () => {
    const cache = new SeccompProgramCache();
    const keys: string[] = [];
    for (let i = 0; i < 9; i++) {
      const key = cache.keyOf(spec({ ...filter, defaultErrnoRet: i }))!;
      keys.push(key);
      await cache.learn(key, stateWith(`n${i}`, Buffer.alloc(8, i)));
      if (i === 7) cache.withProgram(spec(filter), keys[0]); // keys[0] used again: keys[1] is now the oldest
    }
    assert.equal(cache.size, 8);
    assert.equal(cache.has(keys[0]), true);
    assert.equal(cache.has(keys[1]), false);
    assert.equal(cache.has(keys[8]), true);
  });
});
