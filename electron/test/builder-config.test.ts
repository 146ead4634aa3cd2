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
