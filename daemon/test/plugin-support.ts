/**
 * Fixture plugins for the tests: plugin contexts (`config.json` and `rootfs/`) around static programs built
 * from C sources in fixtures/plugin, and the runtime state of an enabled plugin.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { DAEMON_DIR } from './harness.js';

export const FIXTURE_DIR = path.join(DAEMON_DIR, 'test', 'fixtures', 'plugin');

/** The volume driver fixture's config (socket fixvol.sock, one settable env value). */
export function volumeDriverConfig(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    Description: 'a volume driver for the tests',
    Documentation: '',
    Interface: { Types: ['docker.volumedriver/1.0'], Socket: 'fixvol.sock' },
    Entrypoint: ['/volplugin'],
    WorkDir: '',
    User: {},
    Network: { Type: 'none' },
    Linux: { Capabilities: null, AllowAllDevices: false, Devices: null },
    PropagatedMount: '',
    IpcHost: false,
    PidHost: false,
    Mounts: null,
    Env: [{ Name: 'VOLPLUGIN_GREETING', Description: 'written into new volumes', Settable: ['value'], Value: 'hello' }],
    Args: { Name: '', Description: '', Settable: null, Value: null },
    ...overrides,
  };
}

/**
 * A plugin context in a new temporary folder: `program` (a C file of fixtures/plugin) built static as
 * `/<binary>` of its root, `config` as config.json, and `files` (path in the root: content) beside it.
 */
export function pluginContext(program: string, binary: string, config: object, files: Record<string, string> = {}): string {
  const context = mkdtempSync('/tmp/bpc-');
  const rootfs = path.join(context, 'rootfs');
  for (const d of ['run/docker/plugins', 'data', 'proc', 'dev', 'sys', 'tmp', 'etc']) mkdirSync(path.join(rootfs, d), { recursive: true });
  const cc = spawnSync('gcc', ['-static', '-O2', '-o', path.join(rootfs, binary), path.join(FIXTURE_DIR, program)], { encoding: 'utf8' });
  assert.equal(cc.status, 0, cc.stderr);
  for (const [file, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(rootfs, file)), { recursive: true });
    writeFileSync(path.join(rootfs, file), content);
  }
  writeFileSync(path.join(context, 'config.json'), JSON.stringify(config));
  return context;
}

/** The OCI runtime's state of an enabled plugin (crun), or undefined when it does not run. */
export function pluginRuntimeState(execRoot: string, id: string): { pid: number; status: string } | undefined {
  const r = spawnSync('crun', ['--root', path.join(execRoot, 'plugins', 'runtime'), 'state', id], { encoding: 'utf8' });
  return r.status === 0 ? JSON.parse(r.stdout) : undefined;
}
