import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { defaultSettings, SettingsStore } from '../src/settings.js';

describe('settings', () => {
  it('persists the socket path, engine mode and theme, and reads them back', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-settings-'));
    try {
      const file = path.join(dir, 'settings.json');
      const store = new SettingsStore(file, defaultSettings(dir));
      assert.deepEqual(await store.load(), defaultSettings(dir));
      await store.update({ engine: { mode: 'socket', socketPath: '/run/berth.sock' }, theme: 'dark' });
      const again = new SettingsStore(file, defaultSettings(dir));
      const loaded = await again.load();
      assert.equal(loaded.engine.mode, 'socket');
      assert.equal(loaded.engine.socketPath, '/run/berth.sock');
      assert.equal(loaded.theme, 'dark');
      assert.equal(JSON.parse(readFileSync(file, 'utf8')).version, 1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('keeps valid fields of a damaged file and sets a corrupt one aside', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-settings-'));
    try {
      const file = path.join(dir, 'settings.json');
      writeFileSync(file, JSON.stringify({ engine: { mode: 'teleport', socketPath: 'relative.sock' }, theme: 'light' }));
      const loaded = await new SettingsStore(file, defaultSettings(dir)).load();
      assert.equal(loaded.engine.mode, 'embedded');
      assert.equal(loaded.engine.socketPath, path.join(dir, 'engine.sock'));
      assert.equal(loaded.theme, 'light');
      writeFileSync(file, '{not json');
      assert.deepEqual(await new SettingsStore(file, defaultSettings(dir)).load(), defaultSettings(dir));
      assert.ok(existsSync(`${file}.corrupt`));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
