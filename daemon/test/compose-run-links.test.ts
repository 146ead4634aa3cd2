/**
 * Debian's docker-compose 1.29 (API 1.41) against a real berthd: `run` of a service whose containers are up
 * links the one-off container to them (HostConfig.Links and the endpoint's Links on the project's network)
 * and succeeds; the one-off container reaches the other service by its link alias through the embedded DNS.
 * Images come from the busybox fixture; nothing is pulled.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { runCommand, startEngine, tmpdir, type Engine } from './harness.js';

const haveCompose = spawnSync('docker-compose', ['version'], { stdio: 'ignore' }).status === 0;

const COMPOSE_FILE = `version: "3.7"
services:
  db:
    image: busybox:latest
    command: ["sh", "-c", "mkdir -p /www && echo hello-from-db > /www/index.html && exec httpd -f -p 8080 -h /www"]
  app:
    image: busybox:latest
    command: ["sleep", "300"]
    links:
      - "db:database"
`;

describe('docker-compose run with links', { skip: !haveCompose && 'docker-compose is not installed (scripts/install-deps.sh installs it)' }, () => {
  let engine: Engine;
  let dir: string;
  const project = `lnk${process.pid}`;

  before(async () => {
    engine = await startEngine();
    await engine.loadBusybox();
    dir = tmpdir();
    await fs.writeFile(path.join(dir, 'docker-compose.yml'), COMPOSE_FILE);
  });
  after(async () => {
    if (engine && dir) await compose(['down', '-t', '0']).catch(() => undefined);
    await engine?.cleanup();
    if (dir) await fs.rm(dir, { recursive: true, force: true });
  });

  const compose = (args: string[]) =>
    runCommand('docker-compose', ['-p', project, ...args], {
      cwd: dir,
      timeoutMs: 120_000,
      env: { DOCKER_HOST: engine.host, DOCKER_CONFIG: engine.dockerConfig },
    });

  test('run of a service whose containers are up links to them and reaches the other service by its alias', async () => {
    const up = await compose(['up', '-d']);
    assert.equal(up.code, 0, up.stderr + up.stdout);
    const ps = await engine.dockerOk(['ps', '--format', '{{.Names}}']);
    assert.match(ps, new RegExp(`^${project}_db_1$`, 'm'));
    assert.match(ps, new RegExp(`^${project}_app_1$`, 'm'));

    // The one-off container links to the running db (alias "database") and to app's own container.
    const run = await compose(['run', '--rm', 'app', 'sh', '-c', 'for i in 1 2 3 4 5; do wget -q -O - http://database:8080/ && exit 0; sleep 1; done; exit 1']);
    assert.equal(run.code, 0, run.stderr + run.stdout);
    assert.match(run.stdout, /hello-from-db/);
    // --rm: the one-off container is gone.
    assert.doesNotMatch(await engine.dockerOk(['ps', '-a', '--format', '{{.Names}}']), /_run_/);

    const down = await compose(['down', '-t', '0']);
    assert.equal(down.code, 0, down.stderr + down.stdout);
    assert.equal((await engine.dockerOk(['ps', '-aq'])).trim(), '');
  });
});
