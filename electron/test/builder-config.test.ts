import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Ajv from 'ajv';
import yaml from 'js-yaml';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..', '..');
const require = createRequire(import.meta.url);

/** electron-builder's own JSON schema of its configuration (app-builder-lib/scheme.json), compiled once. */
let compiled: ReturnType<typeof compile> | undefined;
const validator = () => (compiled ??= compile());
function compile() {
  const schema = JSON.parse(readFileSync(require.resolve('app-builder-lib/scheme.json'), 'utf8'));
  const ajv = new (Ajv as unknown as typeof Ajv.default)({ strict: false, allErrors: true, validateFormats: false });
  return ajv.compile(schema);
}

describe('electron-builder.yml', () => {
  const config = yaml.load(readFileSync(path.join(root, 'electron-builder.yml'), 'utf8')) as Record<string, any>;

  it("is valid against electron-builder's schema", () => {
    const validate = validator();
    assert.equal(validate(config), true, JSON.stringify(validate.errors, null, 2));
  });

  it('packages dmg for macOS, nsis for Windows, AppImage and deb for Linux', () => {
    const targets = (t: unknown) => (Array.isArray(t) ? t : [t]).map((x: any) => (typeof x === 'string' ? x : x.target));
    assert.deepEqual(targets(config.mac.target), ['dmg']);
    assert.deepEqual(targets(config.win.target), ['nsis']);
    assert.deepEqual(targets(config.linux.target).sort(), ['AppImage', 'deb']);
  });

  it('ships the files the app loads at run time', () => {
    assert.equal(config.extraMetadata.main, 'electron/dist/src/main.js');
    for (const needed of ['electron/dist/src/**', 'renderer/dist/**', 'daemon/dist/src/**', 'daemon/native/*/build/Release/*.node']) assert.ok(config.files.includes(needed), needed);
    assert.ok(config.asarUnpack.includes('**/*.node'));
    assert.ok(existsSync(path.join(root, config.icon)), 'the icon');
  });

  it('the schema check catches a broken configuration', () => {
    const validate = validator();
    assert.equal(validate({ ...config, mac: { target: 42 } }), false);
    assert.equal(validate({ ...config, notAnOption: true }), false);
  });
});

describe('the native addons check before packaging', () => {
  const hook = require(path.join(root, 'electron', 'packaging', 'check-addons.cjs')) as {
    checkAddons(context: { arch: number; electronPlatformName: string; packager: { info: { projectDir: string } } }): Promise<string[]>;
    machineOf(head: Buffer): { format: string; arch: string };
  };
  const ARCH = { ia32: 0, x64: 1, armv7l: 2, arm64: 3 } as Record<string, number>;
  const context = (platform: string, arch: number) => ({ arch, electronPlatformName: platform, packager: { info: { projectDir: root } } });

  it('is the hook electron-builder.yml names', () => {
    const config = yaml.load(readFileSync(path.join(root, 'electron-builder.yml'), 'utf8')) as Record<string, any>;
    assert.equal(path.resolve(root, config.beforePack), path.join(root, 'electron', 'packaging', 'check-addons.cjs'));
  });

  it('passes the addons built here for this machine, and refuses them for another architecture or platform', async () => {
    const checked = await hook.checkAddons(context('linux', ARCH[process.arch]!));
    assert.ok(checked.some((f) => f.endsWith('netns.node')), checked.join(', '));
    const other = process.arch === 'arm64' ? ARCH.x64! : ARCH.arm64!;
    await assert.rejects(hook.checkAddons(context('linux', other)), /do not match the package's target \(linux (arm64|x64)\): daemon\/native\/.*\.node is ELF for/);
    await assert.rejects(hook.checkAddons(context('darwin', ARCH[process.arch]!)), /\(darwin .*\): .* is ELF for/);
  });

  it('reads the machine of ELF, Mach-O and PE headers', () => {
    const elf = Buffer.alloc(64);
    elf.writeUInt32BE(0x7f454c46, 0);
    elf.writeUInt16LE(183, 18);
    assert.deepEqual(hook.machineOf(elf), { format: 'ELF', arch: 'arm64' });
    const macho = Buffer.alloc(32);
    macho.writeUInt32LE(0xfeedfacf, 0);
    macho.writeUInt32LE(0x01000007, 4);
    assert.deepEqual(hook.machineOf(macho), { format: 'Mach-O', arch: 'x64' });
    const pe = Buffer.alloc(0x100);
    pe.write('MZ', 0, 'latin1');
    pe.writeUInt32LE(0x80, 0x3c);
    pe.writeUInt32BE(0x50450000, 0x80);
    pe.writeUInt16LE(0xaa64, 0x84);
    assert.deepEqual(hook.machineOf(pe), { format: 'PE', arch: 'arm64' });
    assert.deepEqual(hook.machineOf(Buffer.from('not a binary')), { format: 'unknown', arch: 'unknown' });
  });
});
