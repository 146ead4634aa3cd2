/**
 * The save and load throughput benchmark, measured side by side in one run on this machine:
 *
 *   (a) `docker save big:1 -o FILE` of a ~100 MB image (busybox plus random, incompressible files, made with
 *       `docker import`)
 *   (b) `docker load -i FILE` of that archive (the image removed first, so that its layer is unpacked again)
 *   (c) the reference: `cat FILE > COPY` of the same bytes (read and written once, through the page cache)
 *
 * in interleaved rounds, then MiB/s of each (from the p50 times) and the ratios to cat (target: save and load
 * at least 200 MiB/s).
 *
 *   node daemon/dist/bench/saveload.js [--mb 100] [--rounds 5] [--json] [--check] [--verbose]
 *
 * It starts a real berthd in a temporary root and removes everything it started when it ends.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tar from 'tar-stream';
import { Engine } from '../test/harness.js';
import { commonOptions, parseBenchArgs, positiveInt, runMain, withEngine, type CommonOptions } from './cli.js';
import { fmt, msSince, summarize } from './stats.js';

export const TARGET_MIB_PER_S = 200;

interface Options extends CommonOptions {
  mb: number;
  rounds: number;
}

function parseOptions(argv: string[]): Options {
  const values = parseBenchArgs(argv, { mb: { type: 'string' }, rounds: { type: 'string' } });
  return { mb: positiveInt(values, 'mb', 100), rounds: positiveInt(values, 'rounds', 5), ...commonOptions(values) };
}

/** A root filesystem tar of `mb` MB of random files (10 MB each), streamed to `file`. */
async function writeRandomRootfs(file: string, mb: number): Promise<void> {
  const pack = tar.pack();
  const out = (await fs.open(file, 'w')).createWriteStream();
  const done = new Promise<void>((resolve, reject) => {
    out.on('finish', () => resolve());
    out.on('error', reject);
  });
  pack.pipe(out);
  const entry = (header: Partial<tar.Header> & { name: string }, body: Buffer | string = '') =>
    new Promise<void>((resolve, reject) => pack.entry(header, body, (err) => (err ? reject(err) : resolve())));
  await entry({ name: 'data/', type: 'directory', mode: 0o755 });
  for (let i = 0; i * 10 < mb; i++) {
    const size = Math.min(10, mb - i * 10) * 1024 * 1024;
    await entry({ name: `data/random-${i}.bin`, mode: 0o644, size }, randomBytes(size));
  }
  pack.finalize();
  await done;
}

function run(cmd: string, args: string[], env: Record<string, string> = {}, stdoutFile?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    void (async () => {
      const out = stdoutFile ? await fs.open(stdoutFile, 'w') : undefined;
      const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', out ? out.fd : 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('error', reject);
      child.on('close', (code) => {
        void out?.close();
        if (code === 0) resolve();
        else reject(new Error(`${cmd} ${args.join(' ')} exited ${code}: ${stderr}`));
      });
    })().catch(reject);
  });
}

async function main(): Promise<number> {
  const opts = parseOptions(process.argv.slice(2));
  const engine = new Engine({ verbose: opts.verbose });
  return withEngine(engine, async () => {
    const loadBefore = os.loadavg()[0];
    const env = { DOCKER_HOST: engine.host, DOCKER_CONFIG: engine.dockerConfig };
    const rootfs = path.join(engine.root, 'rootfs.tar');
    await writeRandomRootfs(rootfs, opts.mb);
    await run('docker', ['import', rootfs, 'big:1'], env);
    await fs.rm(rootfs);
    const saved = path.join(engine.root, 'saved.tar');
    const copy = path.join(engine.root, 'copy.tar');
    const save: number[] = [];
    const load: number[] = [];
    const cat: number[] = [];
    // One untimed round first: the page cache and the daemon warm up.
    await run('docker', ['save', 'big:1', '-o', saved], env);
    await run('cat', [saved], {}, copy);
    for (let round = 0; round < opts.rounds; round++) {
      await fs.rm(saved, { force: true });
      let t = process.hrtime.bigint();
      await run('docker', ['save', 'big:1', '-o', saved], env);
      save.push(msSince(t));
      await run('docker', ['rmi', 'big:1'], env);
      t = process.hrtime.bigint();
      await run('docker', ['load', '-q', '-i', saved], env);
      load.push(msSince(t));
      await fs.rm(copy, { force: true });
      t = process.hrtime.bigint();
      await run('cat', [saved], {}, copy);
      cat.push(msSince(t));
    }
    const bytes = (await fs.stat(saved)).size;
    const mib = bytes / (1024 * 1024);
    const rate = (ms: number) => mib / (ms / 1000);
    const s = summarize(save);
    const l = summarize(load);
    const c = summarize(cat);
    const figures = {
      archiveMiB: mib,
      saveMiBps: rate(s.p50),
      loadMiBps: rate(l.p50),
      catMiBps: rate(c.p50),
      saveMs: s,
      loadMs: l,
      catMs: c,
      target: TARGET_MIB_PER_S,
      loadAverage: { before: loadBefore, after: os.loadavg()[0] },
    };
    if (opts.json) console.log(JSON.stringify(figures, null, 2));
    else {
      console.log(`docker save / docker load of a ${fmt(mib)} MiB image, ${opts.rounds} interleaved rounds (p50)`);
      console.log(`(a) docker save -o FILE       ${fmt(s.p50).padStart(8)} ms  ${fmt(figures.saveMiBps).padStart(8)} MiB/s  (${fmt(figures.saveMiBps / figures.catMiBps, 2)} of cat)`);
      console.log(`(b) docker load -i FILE       ${fmt(l.p50).padStart(8)} ms  ${fmt(figures.loadMiBps).padStart(8)} MiB/s  (${fmt(figures.loadMiBps / figures.catMiBps, 2)} of cat)`);
      console.log(`(c) cat FILE > COPY (ref.)    ${fmt(c.p50).padStart(8)} ms  ${fmt(figures.catMiBps).padStart(8)} MiB/s`);
      console.log(`target: save and load at least ${TARGET_MIB_PER_S} MiB/s`);
      console.log(`load average (1 min) ${fmt(loadBefore, 2)} before, ${fmt(figures.loadAverage.after, 2)} after, on ${os.cpus().length} CPUs`);
    }
    const ok = figures.saveMiBps >= TARGET_MIB_PER_S && figures.loadMiBps >= TARGET_MIB_PER_S;
    return opts.check && !ok ? 1 : 0;
  });
}

runMain(main);
