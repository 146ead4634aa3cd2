/**
 * The cost of the agent protocol, measured side by side in one run on this machine:
 *
 *   (a) `run --rm true` over the API (create + start + wait + delete, `NetworkMode: none`, one kept-alive
 *       connection) to a daemon whose Host is remote: `berthd --agent` driving a `berthd agent` on a unix socket
 *   (b) the same to a daemon with its own LinuxHost
 *
 * in interleaved rounds, then p50 and p90 of each and the ratio (a)/(b) of the p50s (target: at most 1.3).
 *
 *   node daemon/dist/bench/remote.js [-n 50] [--rounds 5] [--warmup 3] [--json] [--check] [--verbose]
 *
 * It starts both daemons and the agent in temporary roots and removes everything it started when it ends.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { once } from 'node:events';
import { BERTHD, Engine, eventually, httpRequest, unmountUnder } from '../test/harness.js';
import { killContainers } from '../test/runtime-support.js';
import { commonOptions, parseBenchArgs, positiveInt, runMain, withEngine, type CommonOptions } from './cli.js';
import { fmt, msSince, summarize, type Summary } from './stats.js';

export const TARGET_RATIO = 1.3;

interface Options extends CommonOptions {
  iterations: number;
  rounds: number;
  warmup: number;
}

function parseOptions(argv: string[]): Options {
  const values = parseBenchArgs(argv, {
    iterations: { type: 'string', short: 'n' },
    rounds: { type: 'string' },
    warmup: { type: 'string' },
  });
  return {
    iterations: positiveInt(values, 'iterations', 50),
    rounds: positiveInt(values, 'rounds', 5),
    warmup: positiveInt(values, 'warmup', 3),
    ...commonOptions(values),
  };
}

/** create + start + wait + delete of `true` over the API. */
async function apiRun(engine: Engine, agent: http.Agent): Promise<number> {
  const started = process.hrtime.bigint();
  const created = await httpRequest(engine.socket, 'POST', '/containers/create', { body: { Image: 'busybox', Cmd: ['true'], HostConfig: { NetworkMode: 'none' } }, agent });
  if (created.status !== 201) throw new Error(`create answered ${created.status}: ${created.text}`);
  const id = created.json().Id as string;
  const start = await httpRequest(engine.socket, 'POST', `/containers/${id}/start`, { agent });
  if (start.status !== 204) throw new Error(`start answered ${start.status}: ${start.text}`);
  const wait = await httpRequest(engine.socket, 'POST', `/containers/${id}/wait`, { agent });
  if (wait.status !== 200 || wait.json().StatusCode !== 0) throw new Error(`wait answered ${wait.status}: ${wait.text}`);
  const removed = await httpRequest(engine.socket, 'DELETE', `/containers/${id}`, { agent });
  if (removed.status !== 204) throw new Error(`delete answered ${removed.status}: ${removed.text}`);
  return msSince(started);
}

async function main(): Promise<number> {
  const opts = parseOptions(process.argv.slice(2));
  const local = new Engine({ verbose: opts.verbose });
  // The agent's socket and roots lie in the remote daemon's temporary folder, named once it exists.
  const remoteArgs: string[] = [];
  const remote = new Engine({ verbose: opts.verbose, args: remoteArgs });
  const agentSocket = path.join(remote.root, 'agent.sock');
  const agentExecRoot = path.join(remote.root, 'ax');
  remoteArgs.push('--agent', `unix://${agentSocket}`);
  let agentProcess: ChildProcess | undefined;
  const cleanup = async () => {
    await remote.stop().catch(() => undefined);
    if (agentProcess && agentProcess.exitCode === null && agentProcess.signalCode === null) {
      const exited = once(agentProcess, 'exit');
      agentProcess.kill('SIGTERM');
      await exited;
    }
    killContainers(path.join(agentExecRoot, 'runtime'));
    unmountUnder(remote.root);
    await remote.cleanup();
    await local.cleanup();
  };
  return withEngine(local, async () => {
    agentProcess = spawn(process.execPath, [BERTHD, 'agent', '--socket', agentSocket, '--data-root', path.join(remote.root, 'agent-data'), '--exec-root', agentExecRoot], { stdio: ['ignore', 'ignore', opts.verbose ? 'inherit' : 'ignore'] });
    await eventually(() => existsSync(agentSocket), 20_000);
    await remote.start();
    await local.loadBusybox();
    await remote.loadBusybox();
    const localAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const remoteAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const viaRemote: number[] = [];
    const viaLocal: number[] = [];
    try {
      for (let i = 0; i < opts.warmup; i++) {
        await apiRun(remote, remoteAgent);
        await apiRun(local, localAgent);
      }
      const perRound = Math.ceil(opts.iterations / opts.rounds);
      for (let round = 0; round < opts.rounds; round++) {
        for (let i = 0; i < perRound && viaRemote.length < opts.iterations; i++) viaRemote.push(await apiRun(remote, remoteAgent));
        for (let i = 0; i < perRound && viaLocal.length < opts.iterations; i++) viaLocal.push(await apiRun(local, localAgent));
      }
    } finally {
      localAgent.destroy();
      remoteAgent.destroy();
    }
    const r = summarize(viaRemote);
    const l = summarize(viaLocal);
    const ratio = r.p50 / l.p50;
    if (opts.json) {
      console.log(JSON.stringify({ remoteHost: r, linuxHost: l, ratioP50: ratio, target: TARGET_RATIO }, null, 2));
    } else {
      const row = (name: string, s: Summary) => `${name.padEnd(40)} ${fmt(s.p50).padStart(8)} ${fmt(s.p90).padStart(8)} ${fmt(s.min).padStart(8)} ${fmt(s.max).padStart(8)}`;
      console.log(`run --rm true over the API (create, start, wait, delete), ${opts.iterations} each, ${opts.rounds} interleaved rounds (ms)`);
      console.log(`${''.padEnd(40)} ${'p50'.padStart(8)} ${'p90'.padStart(8)} ${'min'.padStart(8)} ${'max'.padStart(8)}`);
      console.log(row('(a) through the remote Host (agent)', r));
      console.log(row('(b) through LinuxHost', l));
      console.log(`ratio of p50s (a)/(b): ${fmt(ratio, 2)} (target at most ${TARGET_RATIO})`);
    }
    return opts.check && !(ratio <= TARGET_RATIO) ? 1 : 0;
  }, cleanup);
}

runMain(main);
