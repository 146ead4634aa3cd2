import assert from 'node:assert/strict';
import { test } from 'node:test';
import { kernelPackageOf, parsePrintUris } from './image.js';

test("apt's --print-uris lines, with and without a hash", () => {
  const text = [
    "'http://deb.debian.org/debian/pool/main/c/crun/crun_1.8.1-1%2bdeb12u1_amd64.deb' crun_1.8.1-1+deb12u1_amd64.deb 289288 MD5Sum:236faa6c3f9c2f36f6057c144e5a82ba",
    "'http://deb.debian.org/debian-security/pool/updates/main/x/xz-utils/liblzma5_5.4.1-1%2bdeb12u2_amd64.deb' liblzma5_5.4.1-1+deb12u2_amd64.deb 205796 ",
    'W: something else',
  ].join('\n');
  assert.deepEqual(parsePrintUris(text), [
    { url: 'http://deb.debian.org/debian/pool/main/c/crun/crun_1.8.1-1%2bdeb12u1_amd64.deb', file: 'crun_1.8.1-1+deb12u1_amd64.deb', size: 289288, hash: 'MD5Sum:236faa6c3f9c2f36f6057c144e5a82ba' },
    { url: 'http://deb.debian.org/debian-security/pool/updates/main/x/xz-utils/liblzma5_5.4.1-1%2bdeb12u2_amd64.deb', file: 'liblzma5_5.4.1-1+deb12u2_amd64.deb', size: 205796, hash: '' },
  ]);
});

test('the kernel package behind the meta package', () => {
  assert.equal(kernelPackageOf('Package: linux-image-arm64\nVersion: 6.1.176-1\nDepends: linux-image-6.1.0-50-arm64 (= 6.1.176-1)\n'), 'linux-image-6.1.0-50-arm64');
  assert.throws(() => kernelPackageOf('Package: x\n'), /no linux-image/);
});
