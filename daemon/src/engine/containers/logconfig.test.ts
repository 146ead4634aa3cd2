import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidParameter } from '../../errors.js';
import { verifyLogConfig } from './logconfig.js';

test('an empty or missing Type is json-file, with the Config given', () => {
  assert.deepEqual(verifyLogConfig({ Type: '', Config: { 'max-size': '1m' } }), { Type: 'json-file', Config: { 'max-size': '1m' } });
  assert.deepEqual(verifyLogConfig(undefined), { Type: 'json-file', Config: {} });
  assert.deepEqual(verifyLogConfig({ Type: 'local', Config: null }), { Type: 'local', Config: {} });
  assert.deepEqual(verifyLogConfig({ Type: 'none', Config: { anything: 'x' } }), { Type: 'none', Config: { anything: 'x' } });
  assert.deepEqual(verifyLogConfig({ Type: 'json-file', Config: { mode: 'non-blocking', 'max-buffer-size': '4m', tag: '{{.Name}}' } }).Config.mode, 'non-blocking');
});

test('refusals carry Docker words', () => {
  const cases: Array<[unknown, string]> = [
    [{ Type: 'gelfx' }, 'error looking up logging plugin gelfx: plugin "gelfx" not found'],
    [{ Type: 'json-file', Config: { colour: 'red' } }, "unknown log opt 'colour' for json-file log driver"],
    [{ Type: 'local', Config: { colour: 'red' } }, "unknown log opt 'colour' for log driver local"],
    [{ Config: { mode: 'fast' } }, 'logger: logging mode not supported: fast'],
    [{ Config: { 'max-buffer-size': '1m' } }, "logger: max-buffer-size option is only supported with 'mode=non-blocking'"],
    [{ Config: { mode: 'non-blocking', 'max-buffer-size': 'lots' } }, "error parsing option max-buffer-size: invalid size: 'lots'"],
    [{ Config: ['x'] }, 'invalid value for HostConfig.LogConfig.Config: expected a map of strings'],
  ];
  for (const [config, message] of cases) {
    assert.throws(() => verifyLogConfig(config), (err: unknown) => err instanceof InvalidParameter && (err as Error).message === message, JSON.stringify(config));
  }
});
