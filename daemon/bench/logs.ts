/**
 * The logs throughput benchmark, measured side by side in one run on this machine:
 *
 *   (a) `GET /containers/{id}/logs?stdout=1&stderr=1` (multiplexed frames, one per line as Docker sends them,
 *       no tty) of a container that wrote `--mb` MB of lines and exited, read by a plain HTTP client that
 *       discards the bytes (curl; node:http where there is no curl)
 *   (b) the reference: `cat` of the container's log file (conmon's k8s-file, the bytes Berth reads) to
 *       /dev/null
 *
 * in interleaved rounds, then the payload MiB/s of each (the bytes the container wrote: the same figure for
 * both, so that the log file's per-line prefix does not favour the reference) and the ratio (a)/(b). Target:
 * (a) at least 150 MiB/s. Then the variants that must stay correct and fast, each checked for its content:
 * `timestamps=1` (every line starts with its time), `tail=N` (exactly the last N lines, without reading the
 * file from the start), `since=<the middle>` (only the second half) and `until=<the middle>`.
 *
 *   node daemon/dist/bench/logs.js [--mb 200] [--rounds 3] [--tail 1000] [--json] [--check] [--verbose]
 *
 * It starts a real berthd in a temporary root and removes everything it started when it ends.
 */
import { spawn, spawnSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import http from 'node:http';
import { Engine, httpRequest } from '../test/harness.js';
import { commonOptions, parseBenchArgs, positiveInt, runMain, withEngine, type CommonOptions } from './cli.js';
import { fmt, msSince, percentile } from './stats.js';

export const TARGET_MIBS = 150;

const MiB = 1024 * 1024;
/** The container's line: 99 bytes and a newline. */
const LINE = 'berth logs benchmark line 0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 01234';

interface Options extends CommonOptions {
  mb: number;
  rounds: number;
  tail: number;
}

function parseOptions(argv: string[]): Options {
  const values = parseBenchArgs(argv, { mb: { type: 'string' }, rounds: { type: 'string' }, tail: { type: 'string' } });
  return {
    mb: positiveInt(values, 'mb', 200),
    rounds: positiveInt(values, 'rounds', 3),
    tail: positiveInt(values, 'tail', 1000),
    ...commonOptions(values),
  };
}

interface Read {
  ms: number;
  /** Bytes of the response body (frames included). */
  bytes: number;
  /** Payload bytes (frame headers left out) and frames: counted only when the frames are followed. */
  payload: number;
  frames: number;
  /** The payload, kept only when asked for (the small variants). */
  text?: string;
}

/**
 * GET of a logs URL with a plain HTTP client; the frames are followed (to count the payload) unless `parse` is
 * false (the timed reads: the client only discards), and their bytes discarded unless `keep`.
 */
function readLogs(socket: string, url: string, keep = false, parse = true): Promise<Read> {
  const started = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: socket, path: url, method: 'GET', agent: false }, (res) => {
      if (res.statusCode !== 200) {
        reject(new Error(`GET ${url} answered ${res.statusCode}`));
        res.resume();
        return;
      }
      let bytes = 0;
      let payload = 0;
      let frames = 0;
      // Frame parser state: bytes of the header still wanted, or of the payload left in this frame.
      const header = Buffer.alloc(8);
      let headerHave = 0;
      let frameLeft = 0;
      const kept: Buffer[] = [];
      res.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        if (!parse) return;
        let i = 0;
        while (i < chunk.length) {
          if (frameLeft > 0) {
            const n = Math.min(frameLeft, chunk.length - i);
            if (keep) kept.push(chunk.subarray(i, i + n));
            payload += n;
            frameLeft -= n;
            i += n;
            continue;
          }
          const n = Math.min(8 - headerHave, chunk.length - i);
          chunk.copy(header, headerHave, i, i + n);
          headerHave += n;
          i += n;
          if (headerHave === 8) {
            if (header[0] !== 1 && header[0] !== 2) {
              res.destroy();
              reject(new Error(`bad frame header ${header.toString('hex')} at byte ${bytes - chunk.length + i - 8}`));
              return;
            }
            frameLeft = header.readUInt32BE(4);
            headerHave = 0;
            frames++;
          }
        }
      });
      res.on('end', () => resolve({ ms: msSince(started), bytes, payload, frames, text: keep ? Buffer.concat(kept).toString('latin1') : undefined }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * A timed read by curl (a client that costs little CPU, so that the figure is the engine's on a busy machine),
 * or by `readLogs` without following the frames where there is no curl.
 */
function readLogsDiscarding(socket: string, url: string): Promise<Read> {
  if (!hasCurl) return readLogs(socket, url, false, false);
  const started = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    const child = spawn('curl', ['-sS', '--fail', '--unix-socket', socket, '-o', '/dev/null', '-w', '%{size_download}', `http://engine${url}`], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve({ ms: msSince(started), bytes: Number(out), payload: 0, frames: 0 }) : reject(new Error(`curl exited ${code}`))));
  });
}

const hasCurl = spawnSync('curl', ['--version'], { stdio: 'ignore' }).status === 0;

/** The read of median time among `rounds` reads of `url` (all checked to have the same size). */
async function medianRead(socket: string, url: string, rounds: number): Promise<Read> {
  const reads: Read[] = [];
  for (let i = 0; i < rounds; i++) reads.push(await readLogsDiscarding(socket, url));
  if (reads.some((r) => r.bytes !== reads[0]!.bytes)) throw new Error(`${url} answered different sizes: ${reads.map((r) => r.bytes).join(', ')}`);
  return reads.sort((x, y) => x.ms - y.ms)[Math.floor((rounds - 1) / 2)]!;
}

/** `cat file > /dev/null`, timed. */
function catFile(file: string): Promise<number> {
  const started = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    const child = spawn('sh', ['-c', 'cat "$1" > /dev/null', 'sh', file], { stdio: ['ignore', 'ignore', 'inherit'] });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(msSince(started)) : reject(new Error(`cat exited ${code}`))));
  });
}

function lines(text: string): string[] {
  const all = text.split('\n');
  if (all[all.length - 1] === '') all.pop();
  return all;
}

async function main(): Promise<number> {
  const opts = parseOptions(process.argv.slice(2));
  const engine = new Engine({ verbose: opts.verbose });
  return withEngine(engine, async () => {
    await engine.loadBusybox();
    const payloadBytes = opts.mb * 1_000_000;
    const expectedLines = Math.floor(payloadBytes / (LINE.length + 1));
    const writtenBytes = expectedLines * (LINE.length + 1);
    // The first half, a pause of two seconds (the time `since` and `until` cut at), the second half.
    const half = Math.floor(expectedLines / 2);
    const script = `yes '${LINE}' | head -n ${half}; sleep 2; yes '${LINE}' | head -n ${expectedLines - half}`;
    const containerId = (await engine.dockerOk(['run', '-d', '--network', 'none', 'busybox', 'sh', '-c', script])).trim();
    const writeStarted = process.hrtime.bigint();
    const waited = await httpRequest(engine.socket, 'POST', `/containers/${containerId}/wait`);
    if (waited.status !== 200 || waited.json().StatusCode !== 0) throw new Error(`the writing container ended with ${waited.status} ${waited.text}`);
    const writeMs = msSince(writeStarted);
    const inspect = (await httpRequest(engine.socket, 'GET', `/containers/${containerId}/json`)).json();
    const logPath = inspect.LogPath as string;
    const logSize = (await fs.stat(logPath)).size;
    const base = `/containers/${containerId}/logs?stdout=1&stderr=1`;

    // Warm-up (page cache) and a full check of the content once.
    // Docker sends one frame per line: every check below counts on it (and on 8-byte headers).
    const first = await readLogs(engine.socket, base);
    if (first.payload !== writtenBytes) throw new Error(`logs returned ${first.payload} payload bytes, the container wrote ${writtenBytes}`);
    if (first.frames !== expectedLines) throw new Error(`logs returned ${first.frames} frames for ${expectedLines} lines`);
    const framed = (n: number, extra = 0) => n * (LINE.length + 1 + 8 + extra);
    await catFile(logPath);

    const api: number[] = [];
    const cat: number[] = [];
    for (let round = 0; round < opts.rounds; round++) {
      const read = await readLogsDiscarding(engine.socket, base);
      if (read.bytes !== framed(expectedLines)) throw new Error(`logs returned ${read.bytes} bytes, expected ${framed(expectedLines)}`);
      api.push(read.ms);
      cat.push(await catFile(logPath));
    }
    const apiMs = percentile(api, 50);
    const catMs = percentile(cat, 50);
    const mibs = (ms: number) => writtenBytes / MiB / (ms / 1000);

    // timestamps=1: the same payload, every line prefixed with its time.
    // `2026-01-01T00:00:00.123456789Z ` before each line: 31 bytes.
    const stamped = await medianRead(engine.socket, `${base}&timestamps=1`, opts.rounds);
    if (stamped.bytes !== framed(expectedLines, 31)) throw new Error(`timestamps=1 returned ${stamped.bytes} bytes, expected ${framed(expectedLines, 31)}`);

    // tail=N: exactly the last N lines.
    const tail = await readLogs(engine.socket, `${base}&tail=${opts.tail}`, true);
    const tailLines = lines(tail.text!);
    if (tailLines.length !== opts.tail || tailLines.some((l) => l !== LINE)) throw new Error(`tail=${opts.tail} returned ${tailLines.length} lines`);

    // since/until at the pause: the second half, the first half. The cut is found from the timestamps.
    const firstStamp = lines((await readLogs(engine.socket, `${base}&timestamps=1&tail=${expectedLines - half}`, true)).text!)[0]!.split(' ')[0]!;
    const cutMs = Date.parse(firstStamp) - 1000;
    const cut = `${Math.floor(cutMs / 1000)}.${String((cutMs % 1000) * 1_000_000).padStart(9, '0')}`;
    const since = await medianRead(engine.socket, `${base}&since=${cut}`, opts.rounds);
    const sinceOk = since.bytes === framed(expectedLines - half);
    const until = await medianRead(engine.socket, `${base}&until=${cut}`, opts.rounds);
    const untilOk = until.bytes === framed(half);

    const result = {
      payloadMiB: writtenBytes / MiB,
      logFileMiB: logSize / MiB,
      lines: expectedLines,
      containerWriteMs: writeMs,
      apiMiBs: mibs(apiMs),
      catMiBs: mibs(catMs),
      ratio: catMs / apiMs,
      target: TARGET_MIBS,
      timestampsMiBs: mibs(stamped.ms),
      tailMs: tail.ms,
      sinceMiBs: mibs(since.ms),
      sinceCorrect: sinceOk,
      untilMiBs: mibs(until.ms),
      untilCorrect: untilOk,
    };
    if (opts.json) {
      console.log(JSON.stringify(result, null, 2));
    } else {
      console.log(`logs of a container that wrote ${fmt(result.payloadMiB)} MiB in ${expectedLines} lines (log file ${fmt(result.logFileMiB)} MiB), median of ${opts.rounds} interleaved rounds, read by ${hasCurl ? 'curl' : 'node:http'}`);
      console.log(`(a) GET /logs?stdout=1&stderr=1 (multiplexed)   ${fmt(result.apiMiBs).padStart(8)} MiB/s  (${fmt(apiMs)} ms)`);
      console.log(`(b) cat of the log file (reference)            ${fmt(result.catMiBs).padStart(8)} MiB/s  (${fmt(catMs)} ms)`);
      console.log(`ratio (a)/(b): ${fmt(result.ratio, 2)}; target (a) at least ${TARGET_MIBS} MiB/s`);
      console.log(`timestamps=1                                   ${fmt(result.timestampsMiBs).padStart(8)} MiB/s of payload`);
      console.log(`tail=${opts.tail}`.padEnd(47) + `${fmt(result.tailMs).padStart(8)} ms (${tailLines.length} lines)`);
      console.log(`since=<the pause> (second half)                ${fmt(result.sinceMiBs).padStart(8)} MiB/s of the whole, ${sinceOk ? 'correct' : 'WRONG'}`);
      console.log(`until=<the pause> (first half)                 ${fmt(result.untilMiBs).padStart(8)} MiB/s of the whole, ${untilOk ? 'correct' : 'WRONG'}`);
    }
    const ok = result.apiMiBs >= TARGET_MIBS && sinceOk && untilOk;
    return opts.check && !ok ? 1 : sinceOk && untilOk ? 0 : 1;
  });
}

runMain(main);
