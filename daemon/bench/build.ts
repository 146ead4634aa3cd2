/**
 * The build benchmark, measured side by side in one run on this machine: a 10-step Dockerfile (FROM busybox,
 * three RUN steps, two COPY steps of a 1 MB context, and config steps)
 *
 *   (a) built cold (nocache=1) over the API: the reference each round
 *   (b) built again with every step in the cache, over the API (POST /build with the same context)
 *   (c) the same cached build through the docker CLI (`DOCKER_BUILDKIT=0 docker build`), as a user runs it
 *
 * in interleaved rounds, then the p50 of each (target: the cached build under 0.5 s).
 *
 *   node daemon/dist/bench/build.js [--rounds 5] [--json] [--check] [--verbose]
 *
 * It starts a real berthd in a temporary root and removes everything it started when it ends.
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { contextTar, writeContext } from '../test/build-support.js';
import { Engine } from '../test/harness.js';
import { commonOptions, parseBenchArgs, positiveInt, runMain, withEngine, type CommonOptions } from './cli.js';
import { fmt, msSince, summarize, type Summary } from './stats.js';

export const TARGET_CACHED_MS = 500;

const DOCKERFILE = `FROM busybox
ARG LEVEL=1
ENV APP=/app
WORKDIR /app
COPY data.bin /app/
COPY conf/ /app/conf/
RUN echo "level $LEVEL" > /app/level.txt
RUN cat /app/conf/a.conf /app/conf/b.conf > /app/all.conf
RUN wc -c /app/data.bin > /app/size.txt
CMD ["cat", "/app/level.txt"]
`;

function parseOptions(argv: string[]): CommonOptions & { rounds: number } {
  const values = parseBenchArgs(argv, { rounds: { type: 'string' } });
  return { rounds: positiveInt(values, 'rounds', 5), ...commonOptions(values) };
}

async function main(): Promise<number> {
  const opts = parseOptions(process.argv.slice(2));
  const engine = new Engine({ verbose: opts.verbose });
  return withEngine(engine, async () => {
    await engine.loadBusybox();
    const files = { Dockerfile: DOCKERFILE, 'data.bin': randomBytes(1 << 20), 'conf/a.conf': 'a=1\n', 'conf/b.conf': 'b=2\n' };
    const body = await contextTar(files);
    const dir = await writeContext(path.join(engine.root, 'context'), files);
    const build = async (query: string): Promise<number> => {
      const t = process.hrtime.bigint();
      const r = await engine.request('POST', `/v1.41/build?t=bench:1&${query}`, { body, headers: { 'content-type': 'application/x-tar' }, timeoutMs: 300_000 });
      const ms = msSince(t);
      if (r.status !== 200 || r.text.includes('"error"')) throw new Error(`build failed: ${r.status} ${r.text}`);
      if (query === '' && (r.text.match(/Using cache/g) ?? []).length !== 9) throw new Error(`the cached build missed the cache:\n${r.text}`);
      return ms;
    };
    const cli = async (): Promise<number> => {
      const t = process.hrtime.bigint();
      const out = await engine.dockerOk(['build', '-t', 'bench:1', dir], { timeoutMs: 300_000 });
      const ms = msSince(t);
      if ((out.match(/Using cache/g) ?? []).length !== 9) throw new Error(`the cached CLI build missed the cache:\n${out}`);
      return ms;
    };
    // Untimed: the first build fills the cache; the CLI's context (the same files) hits it too.
    await build('nocache=1');
    await build('');
    await cli();
    const cold: number[] = [];
    const cached: number[] = [];
    const cachedCli: number[] = [];
    for (let round = 0; round < opts.rounds; round++) {
      cold.push(await build('nocache=1'));
      cached.push(await build(''));
      cachedCli.push(await cli());
    }
    const a = summarize(cold);
    const b = summarize(cached);
    const c = summarize(cachedCli);
    if (opts.json) console.log(JSON.stringify({ coldApi: a, cachedApi: b, cachedCli: c, targetCachedMs: TARGET_CACHED_MS }, null, 2));
    else {
      const row = (name: string, s: Summary) => `${name.padEnd(40)} ${fmt(s.p50).padStart(8)} ${fmt(s.p90).padStart(8)} ${fmt(s.min).padStart(8)} ${fmt(s.max).padStart(8)}`;
      console.log(`a 10-step build (3 RUN, 2 COPY of 1 MiB), ${opts.rounds} interleaved rounds (ms)`);
      console.log(`${''.padEnd(40)} ${'p50'.padStart(8)} ${'p90'.padStart(8)} ${'min'.padStart(8)} ${'max'.padStart(8)}`);
      console.log(row('(a) cold build, API (reference)', a));
      console.log(row('(b) cached build, API', b));
      console.log(row('(c) cached build, docker CLI', c));
      console.log(`cached/cold p50: ${fmt(b.p50 / a.p50, 3)}; target: cached build under ${TARGET_CACHED_MS} ms (API ${fmt(b.p50)}, CLI ${fmt(c.p50)})`);
    }
    return opts.check && !(b.p50 < TARGET_CACHED_MS && c.p50 < TARGET_CACHED_MS) ? 1 : 0;
  });
}

runMain(main);
