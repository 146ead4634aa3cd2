import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compressionOf, MEDIA, parseManifest, parsePlatform, selectManifest, type ManifestIndex } from './manifest.js';
import { humanSize, progressText } from './progress.js';

const D = (c: string) => `sha256:${c.repeat(64)}`;

describe('manifests', () => {
  it('parses schema 2 and OCI manifests and refuses what it cannot pull', () => {
    const m = parseManifest(
      Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: MEDIA.dockerManifest, config: { mediaType: MEDIA.dockerConfig, digest: D('a'), size: 3 }, layers: [{ mediaType: MEDIA.dockerLayerGzip, digest: D('b'), size: 9 }] })),
      '',
    );
    assert.equal(m.kind, 'image');
    const oci = parseManifest(Buffer.from(JSON.stringify({ schemaVersion: 2, config: { mediaType: MEDIA.ociConfig, digest: D('a'), size: 3 }, layers: [{ mediaType: MEDIA.ociLayerZstd, digest: D('c'), size: 1 }] })), 'application/json');
    assert.equal(oci.mediaType, MEDIA.ociManifest);
    const plain = parseManifest(
      Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: MEDIA.dockerManifest, config: { mediaType: MEDIA.dockerConfig, digest: D('a'), size: 3 }, layers: [{ mediaType: MEDIA.dockerLayer, digest: D('d'), size: 9 }] })),
      '',
    );
    assert.equal(plain.kind, 'image');
    assert.equal(compressionOf(MEDIA.dockerLayer), 'none');
    assert.equal(compressionOf(MEDIA.dockerLayerGzip), 'gzip');
    assert.throws(() => parseManifest(Buffer.from('{"schemaVersion":1,"fsLayers":[]}'), ''), /schema 1/);
    assert.throws(() => parseManifest(Buffer.from('nope'), MEDIA.dockerManifest), /not JSON/);
    assert.throws(
      () => parseManifest(Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: MEDIA.ociManifest, config: { mediaType: 'application/vnd.cncf.helm.config.v1+json', digest: D('a'), size: 3 }, layers: [] })), ''),
      /unsupported image config media type/,
    );
    assert.throws(
      () => parseManifest(Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: MEDIA.ociManifest, config: { mediaType: MEDIA.ociConfig, digest: D('a'), size: 3 }, layers: [{ mediaType: 'text/plain', digest: D('b'), size: 1 }] })), ''),
      /unsupported layer media type "text\/plain"/,
    );
    assert.throws(
      () => parseManifest(Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: MEDIA.ociManifest, config: { mediaType: MEDIA.ociConfig, digest: 'sha512:' + 'a'.repeat(128), size: 3 }, layers: [] })), ''),
      /unsupported digest algorithm/,
    );
  });

  it('selects a platform from an index, arm variants included', () => {
    const index: ManifestIndex = {
      kind: 'index',
      mediaType: MEDIA.ociIndex,
      manifests: [
        { mediaType: MEDIA.ociManifest, digest: D('1'), size: 1, platform: { os: 'linux', architecture: 'amd64' } },
        { mediaType: MEDIA.ociManifest, digest: D('2'), size: 1, platform: { os: 'linux', architecture: 'arm64', variant: 'v8' } },
        { mediaType: MEDIA.ociManifest, digest: D('3'), size: 1, platform: { os: 'linux', architecture: 'arm', variant: 'v6' } },
        { mediaType: MEDIA.ociManifest, digest: D('4'), size: 1, platform: { os: 'unknown', architecture: 'unknown' } },
      ],
    };
    assert.equal(selectManifest(index, parsePlatform('linux/amd64')).digest, D('1'));
    assert.equal(selectManifest(index, parsePlatform('linux/arm64')).digest, D('2'));
    assert.equal(selectManifest(index, parsePlatform('linux/aarch64')).digest, D('2'));
    assert.equal(selectManifest(index, parsePlatform('linux/arm/v7')).digest, D('3'), 'v7 runs v6');
    assert.throws(() => selectManifest(index, parsePlatform('linux/arm/v5')), /no matching manifest for linux\/arm\/v5/);
    assert.throws(() => selectManifest(index, parsePlatform('linux/ppc64le')), /available: linux\/amd64, linux\/arm64\/v8/);
    assert.throws(() => parsePlatform('linux//x'), /invalid platform/);
  });

  it('progress text as the CLI shows it', () => {
    assert.equal(humanSize(512), '512B');
    assert.equal(humanSize(2_097_152), '2.097MB');
    assert.equal(humanSize(1000), '1kB');
    assert.equal(progressText(0, 100), `[>${' '.repeat(50)}]       0B/100B`);
    assert.equal(progressText(50, 100), `[${'='.repeat(25)}>${' '.repeat(25)}]      50B/100B`);
    assert.equal(progressText(100, 100), `[${'='.repeat(50)}>]     100B/100B`);
  });
});
