import assert from 'node:assert/strict';
import { test } from 'node:test';
import { agentSocketPath } from '../host/remote/connection.js';
import { agentPipePath, parseWslList, parseWslNames, wslCommands, wslConfig } from './wsl.js';

const config = {
  name: 'berth',
  stateDir: 'C:\\Users\\me\\AppData\\Local\\Berth',
  image: { arch: 'amd64' as const, kernel: 'k', initrd: 'i', rootfsTar: 'C:\\cache\\rootfs.tar' },
  resources: { cpus: 4, memoryMiB: 6144, diskGiB: 128 },
  shares: [],
};

test('WSL2: import of the rootfs tar, the agent on wsl.exe stdio, terminate, resize', () => {
  const c = wslCommands(config);
  assert.deepEqual(c.import, ['--import', 'berth', 'C:\\Users\\me\\AppData\\Local\\Berth\\distro', 'C:\\cache\\rootfs.tar', '--version', '2']);
  assert.deepEqual(c.agent, ['--distribution', 'berth', '--user', 'root', '--exec', '/usr/lib/berth/wsl-agent']);
  assert.deepEqual(c.terminate, ['--terminate', 'berth']);
  assert.deepEqual(c.resize, ['--manage', 'berth', '--resize', '128GB']);
  // Names only, in any language: `--list --quiet` and `--list --running --quiet`.
  assert.deepEqual(c.list, ['--list', '--quiet']);
  assert.deepEqual(c.listRunning, ['--list', '--running', '--quiet']);
  assert.deepEqual(c.unregister, ['--unregister', 'berth']);
  assert.equal(agentPipePath('berth'), '\\\\.\\pipe\\berth-agent-berth');
  // The endpoint the driver reports (`npipe:////./pipe/...`) is the pipe again for the daemon's --agent.
  assert.equal(agentSocketPath(`npipe://${agentPipePath('berth').replace(/\\/g, '/')}`), agentPipePath('berth'));
  assert.throws(() => wslCommands({ ...config, image: { ...config.image, rootfsTar: undefined } }), /--rootfs-tar/);
});

test('WSL2: .wslconfig gets the resources and keeps the rest', () => {
  assert.equal(wslConfig(config.resources), '[wsl2]\r\nprocessors=4\r\nmemory=6144MB\r\n');
  const existing = '[wsl2]\r\nmemory=2GB\r\nswap=0\r\n\r\n[experimental]\r\nautoMemoryReclaim=gradual\r\n';
  assert.equal(wslConfig(config.resources, existing), '[wsl2]\r\nswap=0\r\n\r\nprocessors=4\r\nmemory=6144MB\r\n[experimental]\r\nautoMemoryReclaim=gradual\r\n');
  assert.equal(wslConfig(config.resources, '[boot]\nsystemd=true\n'), '[boot]\r\nsystemd=true\r\n\r\n[wsl2]\r\nprocessors=4\r\nmemory=6144MB\r\n');
});

test('WSL2: wsl --list --verbose in UTF-16LE', () => {
  const text = '  NAME      STATE           VERSION\r\n* Ubuntu    Running         2\r\n  berth     Stopped         2\r\n';
  const rows = parseWslList(Buffer.from(text, 'utf16le'));
  assert.deepEqual(rows, [
    { name: 'Ubuntu', state: 'Running', version: 2, isDefault: true },
    { name: 'berth', state: 'Stopped', version: 2, isDefault: false },
  ]);
  assert.deepEqual(parseWslList(''), []);
});

test('WSL2: distribution names from --list --quiet, in UTF-16LE or with WSL_UTF8', () => {
  assert.deepEqual(parseWslNames(Buffer.from('\uFEFFUbuntu\r\nberth\r\n', 'utf16le')), ['Ubuntu', 'berth']);
  assert.deepEqual(parseWslNames(Buffer.from('Ubuntu\nberth\n', 'utf8')), ['Ubuntu', 'berth']);
  assert.deepEqual(parseWslNames(''), []);
});
