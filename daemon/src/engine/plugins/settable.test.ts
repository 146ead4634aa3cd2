import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidParameter } from '../../errors.js';
import { checkConfig, settingsFrom, type PluginRecord } from './config.js';
import { applySettings } from './settable.js';

function plugin(): PluginRecord {
  const config = checkConfig({
    Interface: { Types: ['docker.volumedriver/1.0'], Socket: 'p.sock' },
    Mounts: [
      { Name: 'data', Settable: ['source'], Source: '/a', Destination: '/data', Type: 'bind' },
      { Name: 'two', Settable: ['source', 'destination'], Source: '/b', Destination: '/b', Type: 'bind' },
    ],
    Linux: { Devices: [{ Name: 'disk', Settable: ['path'], Path: '/dev/null' }] },
    Env: [{ Name: 'A', Settable: ['value'], Value: '1' }, { Name: 'B', Value: '2' }],
    Args: { Name: 'args', Settable: ['value'], Value: ['-v'] },
  });
  return { Id: 'a'.repeat(64), Name: 'p:latest', Enabled: false, Settings: settingsFrom(config), PluginReference: '', Config: config };
}

test('mounts, devices, env and args are set as their config declares', () => {
  const p = plugin();
  const s = applySettings(p, ['data.source=/x', 'disk=/dev/zero', 'A=3', 'args=-q -z', 'two.source=/y']);
  assert.deepEqual((s.Mounts as any[]).map((m) => m.Source), ['/x', '/y']);
  assert.deepEqual((s.Devices as any[]).map((d) => d.Path), ['/dev/zero']);
  assert.deepEqual(s.Env, ['A=3', 'B=2']);
  assert.deepEqual(s.Args, ['-q', '-z']);
  assert.deepEqual((p.Settings.Mounts as any[]).map((m) => m.Source), ['/a', '/b'], 'the record is left alone');
});

test('what is not settable, not found or ambiguous is refused', () => {
  const p = plugin();
  for (const [arg, message] of [
    ['B=3', /"B" is not settable/],
    ['data.destination=/z', /"data.destination" is not settable/],
    ['two=/z', /more than one field is settable/],
    ['disk.path=/etc/shadow', /under \/dev/],
    ['nope=1', /setting "nope" not found/],
    ['=1', /expected name=value/],
  ] as const) {
    assert.throws(() => applySettings(p, [arg]), (err: unknown) => err instanceof InvalidParameter && message.test((err as Error).message), arg);
  }
});
