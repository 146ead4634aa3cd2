/**
 * The pull benchmark, measured side by side in one run on this machine:
 *
 *   (a) `POST /images/create?fromImage=...` of a ~200 MB image of 5 gzip layers (each a mix of random,
 *       incompressible data and compressible text files) from a local registry (Debian's docker-registry
 *       on 127.0.0.1), until the progress stream ends; the image is removed between rounds
 *   (b) the reference: the same blobs fetched with `curl` and unpacked with `tar -xz`, three at a time
 *       (dockerd's download concurrency, also the engine's)
 *
 * in interleaved rounds, then the median of each and the ratio (a)/(b) (target: at most 1.5).
 *
 *   node daemon/dist/bench/pull.js [--rounds 3] [--mb 200] [--json] [--check] [--verbose]
 *
 * It starts a real berthd and a registry in temporary roots and removes everything when it ends.
 */
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream, promises as fs } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { pathToFileURL } from 'node:url';
import { createGzip } from 'node:zlib';
import tar from 'tar-stream';
import { Engine, httpRequest } from '../test/harness.js';
import { putManifest, startRegistry, type TestRegistry } from '../test/registry-support.js';
import { commonOptions, parseBenchArgs, positiveInt, runMain, withEngine, type CommonOptions } from './cli.js';
import { fmt, msSince, summarize } from './stats.js';

export const TARGET_RATIO = 1.5;
const LAYERS = 5;
const REPO = 'bench/pull';

interface Options extends CommonOptions {
  rounds: number;
  mb: number;
}

function parseOptions(argv: string[]): Options {
  const values = parseBenchArgs(argv, { rounds: { type: 'string' }, mb: { type: 'string' } });
  return { rounds: positiveInt(values, 'rounds', 3), mb: positiveInt(values, 'mb', 200), ...commonOptions(values) };
}

interface BuiltLayer {
  file: string;
  digest: string;
  size: number;
  diffId: string;
}

/** Writes one layer: half random files, half compressible text; gzip on the way to `file`. */
async function buildLayer(dir: string, index: number, bytes: number): Promise<BuiltLayer> {
  const pack = tar.pack();
  const diffHash = createHash('sha256');
  const blobHash = createHash('sha256');
  let size = 0;
  const file = path.join(dir, `layer${index}.tar.gz`);
  const gzip = createGzip();
  pack.on('data', (c: unknown) => {
    diffHash.update(c as Buffer);
  });
  gzip.on('data', (c: Buffer) => {
    blobHash.update(c);
    size += c.length;
  });
  const writing = pipeline(pack, gzip, createWriteStream(file));
  const entry = (name: string, content: Buffer) =>
    new Promise<void>((resolve, reject) => pack.entry({ name, mode: 0o644, mtime: new Date(0) }, content, (err) => (err ? reject(err) : resolve())));
  await new Promise<void>((resolve, reject) => pack.entry({ name: `layer${index}/`, type: 'directory', mode: 0o755, mtime: new Date(0) }, (err) => (err ? reject(err) : resolve())));
  const half = Math.floor(bytes / 2);
  // Incompressible: a few large random files.
  for (let written = 0, n = 0; written < half; n++) {
    const chunk = Math.min(4 * 1024 * 1024, half - written);
    await entry(`layer${index}/random-${n}.bin`, randomBytes(chunk));
    written += chunk;
  }
  // Compressible: many small text files (log-like lines).
  for (let written = 0, n = 0; written < bytes - half; n++) {
    const lines: string[] = [];
    for (let i = 0; i < 400; i++) lines.push(`${new Date(1_700_000_000_000 + n * 1000 + i).toISOString()} INFO worker-${i % 7} processed request ${n * 400 + i} in ${(i * 7) % 113} ms`);
    const content = Buffer.from(lines.join('\n'));
    await entry(`layer${index}/text/${String(n).padStart(5, '0')}.log`, content);
    written += content.length;
  }
  pack.finalize();
  await writing;
  return { file, digest: `sha256:${blobHash.digest('hex')}`, size, diffId: `sha256:${diffHash.digest('hex')}` };
}

/** Uploads a blob from a file (POST, then PUT with the streamed body). */
async function uploadFile(registry: TestRegistry, file: string, digest: string, size: number): Promise<void> {
  const location = await new Promise<string>((resolve, reject) => {
    const req = http.request(`http://${registry.host}/v2/${REPO}/blobs/uploads/`, { method: 'POST', headers: { 'Content-Length': '0' } }, (res) => {
      res.resume();
      if (res.statusCode !== 202) reject(new Error(`upload start ${res.statusCode}`));
      else resolve(String(res.headers.location));
    });
    req.on('error', reject);
    req.end();
  });
  const url = new URL(location, `http://${registry.host}/`);
  url.searchParams.set('digest', digest);
  await new Promise<void>((resolve, reject) => {
    const req = http.request(url, { method: 'PUT', headers: { 'Content-Length': String(size), 'Content-Type': 'application/octet-stream' } }, (res) => {
      res.resume();
      if (res.statusCode !== 201) reject(new Error(`upload ${res.statusCode}`));
      else resolve();
    });
    req.on('error', reject);
    createReadStream(file).pipe(req);
  });
}

function run(cmd: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`${cmd} exited ${code}: ${err}`))));
  });
}

/** curl | tar -xz per blob, three at a time. */
async function referencePull(registry: TestRegistry, layers: BuiltLayer[], dest: string): Promise<number> {
  await fs.rm(dest, { recursive: true, force: true });
  await fs.mkdir(dest, { recursive: true });
  const started = process.hrtime.bigint();
  let next = 0;
  const worker = async () => {
    while (next < layers.length) {
      const i = next++;
      const dir = path.join(dest, String(i));
      await fs.mkdir(dir);
      await run('sh', ['-c', `curl -sSf "http://${registry.host}/v2/${REPO}/blobs/${layers[i].digest}" | tar -xzf - -C "${dir}"`]);
    }
  };
  await Promise.all([worker(), worker(), worker()]);
  return msSince(started);
}

async function berthPull(engine: Engine, registry: TestRegistry): Promise<number> {
  const started = process.hrtime.bigint();
  const res = await httpRequest(engine.socket, 'POST', `/images/create?fromImage=${encodeURIComponent(`${registry.host}/${REPO}`)}&tag=v1`, { timeoutMs: 600_000 });
  const ms = msSince(started);
  if (res.status !== 200 || res.text.includes('"error"')) throw new Error(`pull failed: ${res.status} ${res.text.slice(-500)}`);
  return ms;
}

async function main(): Promise<number> {
  const opts = parseOptions(process.argv.slice(2));
  const work = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-pull-bench-'));
  const engine = new Engine({ verbose: opts.verbose });
  let registry: TestRegistry | undefined;
  const cleanup = async () => {
    await engine.cleanup();
    await registry?.stop();
    await fs.rm(work, { recursive: true, force: true });
  };
  return withEngine(engine, async () => {
    registry = await startRegistry();
    const layers = await prepareImage(registry, work, opts.mb);
    const loadBefore = os.loadavg()[0];
    const compressed = layers.reduce((s, l) => s + l.size, 0);

    const berth: number[] = [];
    const reference: number[] = [];
    const dest = path.join(work, 'reference');
    for (let round = 0; round < opts.rounds; round++) {
      reference.push(await referencePull(registry, layers, dest));
      await fs.rm(dest, { recursive: true, force: true });
      berth.push(await berthPull(engine, registry));
      await engine.dockerOk(['rmi', `${registry.host}/${REPO}:v1`]);
    }
    const b = summarize(berth);
    const r = summarize(reference);
    const ratio = b.p50 / r.p50;
    if (opts.json) {
      const loadAverage = { before: loadBefore, after: os.loadavg()[0] };
      console.log(JSON.stringify({ uncompressedMB: opts.mb, compressedBytes: compressed, berth: b, curlTar: r, ratioP50: ratio, target: TARGET_RATIO, loadAverage }, null, 2));
    } else {
      console.log(`pull of a ${opts.mb} MB image (${LAYERS} gzip layers, ${(compressed / 1e6).toFixed(1)} MB compressed) from a local registry, ${opts.rounds} interleaved rounds (ms)`);
      console.log(`${''.padEnd(36)} ${'p50'.padStart(8)} ${'min'.padStart(8)} ${'max'.padStart(8)}`);
      console.log(`${'(a) berth POST /images/create'.padEnd(36)} ${fmt(b.p50).padStart(8)} ${fmt(b.min).padStart(8)} ${fmt(b.max).padStart(8)}`);
      console.log(`${'(b) curl | tar -xz, 3 at a time'.padEnd(36)} ${fmt(r.p50).padStart(8)} ${fmt(r.min).padStart(8)} ${fmt(r.max).padStart(8)}`);
      console.log(`ratio of p50s (a)/(b): ${fmt(ratio, 2)} (target at most ${TARGET_RATIO})`);
      console.log(`load average (1 min) ${fmt(loadBefore, 2)} before, ${fmt(os.loadavg()[0], 2)} after, on ${os.cpus().length} CPUs`);
    }
    return opts.check && !(ratio <= TARGET_RATIO) ? 1 : 0;
  }, cleanup);
}

/** Builds the image's layers under `work` and pushes the image to `registry` as bench/pull:v1. */
export async function prepareImage(registry: TestRegistry, work: string, mb: number): Promise<BuiltLayer[]> {
  const perLayer = Math.floor((mb * 1024 * 1024) / LAYERS);
  const layers: BuiltLayer[] = [];
  for (let i = 0; i < LAYERS; i++) layers.push(await buildLayer(work, i, perLayer));
  for (const l of layers) await uploadFile(registry, l.file, l.digest, l.size);
  const config = Buffer.from(
    JSON.stringify({
      architecture: process.arch === 'x64' ? 'amd64' : process.arch,
      os: 'linux',
      config: { Cmd: ['sh'] },
      rootfs: { type: 'layers', diff_ids: layers.map((l) => l.diffId) },
      history: layers.map(() => ({ created_by: 'bench layer' })),
    }),
  );
  const configDigest = `sha256:${createHash('sha256').update(config).digest('hex')}`;
  const configFile = path.join(work, 'config.json');
  await fs.writeFile(configFile, config);
  await uploadFile(registry, configFile, configDigest, config.length);
  await putManifest(
    registry,
    REPO,
    'v1',
    {
      schemaVersion: 2,
      mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
      config: { mediaType: 'application/vnd.docker.container.image.v1+json', digest: configDigest, size: config.length },
      layers: layers.map((l) => ({ mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip', digest: l.digest, size: l.size })),
    },
    'application/vnd.docker.distribution.manifest.v2+json',
  );
  return layers;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  runMain(main);
}
