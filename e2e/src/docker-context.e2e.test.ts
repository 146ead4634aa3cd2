/**
 * The `berth` docker context the desktop app writes (electron/src/docker-context.ts), read by the real docker
 * CLI against a real berthd: `docker --context berth version` and a container run reach that engine, with
 * HOME in a temporary folder; the current context stays the user's.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { loadHarness, ROOT, type Engine } from './support.js';

const harness = await loadHarness();
const contextModule = (await import(pathToFileURL(path.join(ROOT, 'electron', 'dist', 'src', 'docker-context.js')).href)) as {
  writeDockerContext(socketPath: string, configDir: string): Promise<string | undefined>;
};

describe('the berth docker context', { timeout: 120_000 }, () => {
  let engine: Engine;
  let home: string;

  before(async () => {
    engine = await harness.startEngine();
    await engine.loadBusybox();
    home = mkdtempSync(path.join(os.tmpdir(), 'berth-e2e-context-'));
  });

  after(async () => {
    await engine?.cleanup();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  it('reaches the engine it names, from the docker CLI, without becoming the current context', async () => {
    const dockerConfig = path.join(home, '.docker');
    mkdirSync(dockerConfig);
    const config = JSON.stringify({ currentContext: 'default' });
    writeFileSync(path.join(dockerConfig, 'config.json'), config);
    const file = await contextModule.writeDockerContext(engine.socket, dockerConfig);
    assert.ok(file);
    assert.equal(await contextModule.writeDockerContext(engine.socket, dockerConfig), undefined, 'written once');
    const env = { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^DOCKER_(CONFIG|HOST|CONTEXT)$/.test(k))), HOME: home };
    const docker = async (args: string[]) => (await promisify(execFile)('docker', args, { env, encoding: 'utf8', timeout: 60_000 })).stdout;
    assert.match(await docker(['--context', 'berth', 'version', '--format', '{{.Server.Platform.Name}} {{.Server.APIVersion}}']), /Berth.* 1\.53/);
    assert.equal(await docker(['--context', 'berth', 'run', '--rm', 'busybox', 'echo', 'through the context']), 'through the context\n');
    assert.match(await docker(['context', 'ls', '--format', '{{.Name}} {{.Current}} {{.DockerEndpoint}}']), new RegExp(`^berth false unix://${engine.socket}$`, 'm'));
    assert.equal(readFileSync(path.join(dockerConfig, 'config.json'), 'utf8'), config);
  });
});
