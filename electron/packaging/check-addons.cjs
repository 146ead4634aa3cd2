/**
 * electron-builder's beforePack hook (electron-builder.yml): refuses to package the daemon's native addons
 * (daemon/native/*\/build/Release/*.node, built by node-gyp for the machine that built them) for another
 * platform or architecture than theirs, where they could not be loaded. Build each package on its target.
 */
'use strict';
const fs = require('node:fs');
const path = require('node:path');

/** electron-builder's Arch enum, by value. */
const ARCHES = ['ia32', 'x64', 'armv7l', 'arm64', 'universal'];
const FORMATS = { linux: 'ELF', darwin: 'Mach-O', mas: 'Mach-O', win32: 'PE' };

/** The binary format and machine of a shared object's first bytes, e.g. { format: 'ELF', arch: 'x64' }. */
function machineOf(head) {
  if (head.length >= 20 && head.readUInt32BE(0) === 0x7f454c46) {
    const machine = head.readUInt16LE(18);
    return { format: 'ELF', arch: { 3: 'ia32', 62: 'x64', 40: 'armv7l', 183: 'arm64' }[machine] ?? `machine ${machine}` };
  }
  if (head.length >= 8 && head.readUInt32LE(0) === 0xfeedfacf) {
    const cpu = head.readUInt32LE(4);
    return { format: 'Mach-O', arch: { 0x01000007: 'x64', 0x0100000c: 'arm64' }[cpu] ?? `cpu ${cpu}` };
  }
  if (head.length >= 4 && head.readUInt32BE(0) === 0xcafebabe) return { format: 'Mach-O', arch: 'universal' };
  if (head.length >= 0x40 && head.toString('latin1', 0, 2) === 'MZ') {
    const pe = head.readUInt32LE(0x3c);
    if (head.length >= pe + 6 && head.readUInt32BE(pe) === 0x50450000) {
      const machine = head.readUInt16LE(pe + 4);
      return { format: 'PE', arch: { 0x14c: 'ia32', 0x8664: 'x64', 0xaa64: 'arm64' }[machine] ?? `machine ${machine}` };
    }
  }
  return { format: 'unknown', arch: 'unknown' };
}

function addonsUnder(projectDir) {
  const native = path.join(projectDir, 'daemon', 'native');
  if (!fs.existsSync(native)) return [];
  return fs
    .readdirSync(native)
    .map((name) => path.join(native, name, 'build', 'Release'))
    .filter((dir) => fs.existsSync(dir))
    .flatMap((dir) => fs.readdirSync(dir).filter((f) => f.endsWith('.node')).map((f) => path.join(dir, f)));
}

/** Throws naming each addon that does not match the target; resolves with the addons checked. */
async function checkAddons(context) {
  const projectDir = context.packager?.info?.projectDir ?? context.packager?.projectDir ?? process.cwd();
  const platform = context.electronPlatformName;
  const arch = ARCHES[context.arch] ?? String(context.arch);
  const addons = addonsUnder(projectDir);
  if (addons.length === 0) throw new Error(`no native addons under ${path.join(projectDir, 'daemon', 'native')}: build the daemon first (npm run build -w daemon)`);
  const wrong = [];
  for (const file of addons) {
    const fd = fs.openSync(file, 'r');
    const head = Buffer.alloc(4096);
    const n = fs.readSync(fd, head, 0, head.length, 0);
    fs.closeSync(fd);
    const found = machineOf(head.subarray(0, n));
    const formatOk = found.format === FORMATS[platform];
    const archOk = found.arch === arch || found.arch === 'universal';
    if (!formatOk || !archOk) wrong.push(`${path.relative(projectDir, file)} is ${found.format} for ${found.arch}`);
  }
  if (wrong.length)
    throw new Error(`the daemon's native addons do not match the package's target (${platform} ${arch}): ${wrong.join('; ')}. Build the package on a ${platform} ${arch} machine, after npm run build -w daemon there.`);
  return addons;
}

exports.default = checkAddons;
exports.checkAddons = checkAddons;
exports.machineOf = machineOf;
