import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseExecConfig } from './exec.js';

describe('exec create body', () => {
  test('a command as a list or a string, with defaults', () => {
    assert.deepEqual(parseExecConfig({ Cmd: ['sh', '-c', 'echo hi'] }), {
      OpenStdin: false, OpenStdout: false, OpenStderr: false, Tty: false, DetachKeys: '', User: '', Privileged: false,
      Env: [], WorkingDir: '', Cmd: ['sh', '-c', 'echo hi'], ConsoleSize: null,
    });
    assert.deepEqual(parseExecConfig({ Cmd: 'ls  -l /' }).Cmd, ['ls', '-l', '/']);
  });

  test('refuses bad values with a message naming the field', () => {
    assert.throws(() => parseExecConfig(undefined), /needs a JSON body/);
    assert.throws(() => parseExecConfig({ Cmd: [] }), /No exec command specified/);
    assert.throws(() => parseExecConfig({ Cmd: [1] }), /Cmd/);
    assert.throws(() => parseExecConfig({ Cmd: ['true'], Tty: 'yes' }), /Tty/);
    assert.throws(() => parseExecConfig({ Cmd: ['true'], Env: ['=x'] }), /environment variable/);
    assert.throws(() => parseExecConfig({ Cmd: ['true'], WorkingDir: 'tmp' }), /absolute path/);
    assert.throws(() => parseExecConfig({ Cmd: ['true'], User: 'a:b:c' }), /User/);
    assert.throws(() => parseExecConfig({ Cmd: ['true'], ConsoleSize: [1] }), /ConsoleSize/);
  });

  test('keeps user forms, environment and console size', () => {
    const c = parseExecConfig({ Cmd: ['id'], User: '1000:1000', Env: ['A=1'], ConsoleSize: [24, 80], Tty: true, AttachStdin: true });
    assert.equal(c.User, '1000:1000');
    assert.deepEqual(c.Env, ['A=1']);
    assert.deepEqual(c.ConsoleSize, [24, 80]);
    assert.equal(c.OpenStdin, true);
  });
});
