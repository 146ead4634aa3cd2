import assert from 'node:assert/strict';
import { test } from 'node:test';
import { compileLinear } from './regexp.js';

test('client patterns match in linear time with Go syntax, and syntax errors are InvalidParameter', () => {
  const nested = compileLinear('(a+)+$', "filter 'name'");
  const started = process.hrtime.bigint();
  assert.equal(nested.test('a'.repeat(30) + '!'), false);
  assert.equal(nested.test('a'.repeat(100_000) + '!'), false);
  assert.ok(process.hrtime.bigint() - started < 2_000_000_000n);
  assert.equal(compileLinear('^web-\\d+', 'x').test('web-12'), true);
  assert.equal(compileLinear('eb', 'x').test('web'), true);
  for (const bad of ['(', '(?=x)', 'a(?!b)', '[z-a]', 'a**', '\\1']) {
    assert.throws(() => compileLinear(bad, "filter 'name'"), { name: 'InvalidParameter', message: /^invalid filter 'name' / });
  }
});
