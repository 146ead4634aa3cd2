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
      assert.equal(JSON.parse(readFileSync(file, 'utf8')).version, 3);
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

  it('reads a version 1 file, and keeps a TCP engine with its TLS files', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-settings-'));
    try {
      const file = path.join(dir, 'settings.json');
      writeFileSync(file, JSON.stringify({ version: 1, engine: { mode: 'socket', socketPath: '/run/old.sock' }, theme: 'dark' }));
      const store = new SettingsStore(file, defaultSettings(dir));
      const old = await store.load();
      assert.equal(old.engine.mode, 'socket');
      assert.equal(old.engine.socketPath, '/run/old.sock');
      assert.equal(old.engine.tcp.port, 2376);
      await store.update({ engine: { mode: 'tcp', tcp: { host: 'engine.example', port: 2376, tls: true, ca: '/etc/berth/ca.pem', cert: '/etc/berth/cert.pem', key: '/etc/berth/key.pem' } } });
      const again = await new SettingsStore(file, defaultSettings(dir)).load();
      assert.deepEqual(again.engine.tcp, { host: 'engine.example', port: 2376, tls: true, ca: '/etc/berth/ca.pem', cert: '/etc/berth/cert.pem', key: '/etc/berth/key.pem' });
      assert.equal(again.engine.socketPath, '/run/old.sock', 'the socket stays for a switch back');
      assert.equal(again.theme, 'dark');
      // A partial patch of tcp keeps its other fields.
      await store.update({ engine: { tcp: { port: 2377 } } });
      assert.equal(store.value.engine.tcp.host, 'engine.example');
      assert.equal(store.value.engine.tcp.port, 2377);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a patch it would otherwise have to replace: relative TLS paths, bad ports and hosts, unknown modes', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-settings-'));
    try {
      const file = path.join(dir, 'settings.json');
      const store = new SettingsStore(file, defaultSettings(dir));
      await store.load();
      await assert.rejects(store.update({ engine: { tcp: { ca: 'ca.pem' } } }), /ca file must be an absolute path/);
      await assert.rejects(store.update({ engine: { tcp: { port: 70000 } } }), /invalid port/);
      await assert.rejects(store.update({ engine: { tcp: { host: 'user@host/x' } } }), /invalid host/);
      await assert.rejects(store.update({ engine: { mode: 'ssh' as never } }), /unknown engine mode/);
      await assert.rejects(store.update({ engine: { socketPath: 'engine.sock' } }), /absolute/);
      assert.equal(existsSync(file), false, 'nothing written');
      await store.update({ engine: { tcp: { host: '[::1]', ca: '' } } });
      assert.equal(store.value.engine.tcp.host, '[::1]');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("keeps the VM's resources, reads a version 2 file with the defaults for them, and refuses resources out of range", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-settings-'));
    try {
      const file = path.join(dir, 'settings.json');
      writeFileSync(file, JSON.stringify({ version: 2, engine: { mode: 'embedded', socketPath: '/run/a.sock' }, theme: 'light' }));
      const store = new SettingsStore(file, defaultSettings(dir));
      const old = await store.load();
      assert.deepEqual(old.vm, { cpus: 2, memoryMiB: 2048, diskGiB: 64 });
      assert.equal(old.theme, 'light');
      await store.update({ vm: { cpus: 4, memoryMiB: 6144 } });
      assert.deepEqual(store.value.vm, { cpus: 4, memoryMiB: 6144, diskGiB: 64 });
      const again = new SettingsStore(file, defaultSettings(dir));
      assert.deepEqual((await again.load()).vm, { cpus: 4, memoryMiB: 6144, diskGiB: 64 });
      await assert.rejects(store.update({ vm: { cpus: 0 } }), /the VM's CPUs must be a whole number from 1 to 64/);
      await assert.rejects(store.update({ vm: { memoryMiB: 100 } }), /memory \(MiB\) must be a whole number from 512/);
      await assert.rejects(store.update({ vm: { diskGiB: 1.5 } }), /disk size \(GiB\)/);
      assert.deepEqual(store.value.vm, { cpus: 4, memoryMiB: 6144, diskGiB: 64 }, 'a refused patch changes nothing');
      // A hand-edited file with a bad value keeps the others.
      writeFileSync(file, JSON.stringify({ version: 3, vm: { cpus: 'many', memoryMiB: 1024, diskGiB: 20 } }));
      assert.deepEqual((await again.load()).vm, { cpus: 2, memoryMiB: 1024, diskGiB: 20 });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
