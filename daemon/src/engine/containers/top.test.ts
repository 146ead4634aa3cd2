import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { filterPsTable, parsePsArgs } from './top.js';

const TABLE = `UID          PID    PPID  C STIME TTY          TIME CMD
root           1       0  0 02:00 ?        00:00:01 /sbin/init
root         410       1  0 02:01 ?        00:00:00 sh -c sleep 600 & sleep 700; true
root         412     410  0 02:01 ?        00:00:00 sleep 600
root         999       1  0 02:01 ?        00:00:00 other process
`;

describe('top', () => {
  test('keeps the rows of the given pids, the command column whole', () => {
    assert.deepEqual(filterPsTable(TABLE, [410, 412]), {
      Titles: ['UID', 'PID', 'PPID', 'C', 'STIME', 'TTY', 'TIME', 'CMD'],
      Processes: [
        ['root', '410', '1', '0', '02:01', '?', '00:00:00', 'sh -c sleep 600 & sleep 700; true'],
        ['root', '412', '410', '0', '02:01', '?', '00:00:00', 'sleep 600'],
      ],
    });
  });

  test('no PID column is an error that says so', () => {
    assert.throws(() => filterPsTable('COMMAND\nsh\n', [1]), /PID/);
  });

  test('ps_args: -ef by default, split on spaces, anything but options refused', () => {
    assert.deepEqual(parsePsArgs(undefined), ['-ef']);
    assert.deepEqual(parsePsArgs(''), ['-ef']);
    assert.deepEqual(parsePsArgs('-o pid,comm'), ['-o', 'pid,comm']);
    assert.deepEqual(parsePsArgs('aux'), ['aux']);
    assert.throws(() => parsePsArgs('-ef; rm -rf /'), /ps_args/);
    assert.throws(() => parsePsArgs('$(id)'), /ps_args/);
  });
});
