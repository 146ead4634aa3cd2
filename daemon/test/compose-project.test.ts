/**
 * A compose project through Debian's docker-compose (1.29, on docker-py) against a real berthd: a service built
 * from a Dockerfile (FROM the busybox fixture image), a dependency with a health check that the service waits
 * for (`depends_on: condition: service_healthy`), a named volume; `up -d` returns once the dependency is
 * healthy, the service reaches it by its name, and `down -v` removes the containers, the network and the volume.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { runCommand, useEngine, type RunResult } from './harness.js';

const COMPOSE = '/usr/bin/docker-compose';
const PROJECT = 'berthcompose';

const engine = useEngine();

const composeFile = `version: "2.4"
services:
  db:
    image: busybox
    command: ["sh", "-c", "mkdir -p /www && echo up >> /data/boots && sleep 2 && echo db-ready > /www/index.html && httpd -f -p 8080 -h /www"]
    healthcheck:
      test: ["CMD-SHELL", "wget -q -O- http://127.0.0.1:8080/ | grep -q db-ready"]
      interval: 1s
      timeout: 2s
      retries: 30
    volumes:
      - dbdata:/data
  app:
    build: ./app
    depends_on:
      db:
        condition: service_healthy
    command: ["sh", "-c", "wget -q -O- http://db:8080/ > /seen 2>&1; sleep 300"]
volumes:
  dbdata:
`;

const dockerfile = `FROM busybox
RUN echo built-by-compose > /built.txt
LABEL purpose=compose-test
`;

describe('a docker-compose project', { skip: existsSync(COMPOSE) ? false : 'docker-compose is not installed' }, () => {
  const compose = (dir: string, args: string[], timeoutMs = 180_000): Promise<RunResult> =>
    runCommand(COMPOSE, ['-p', PROJECT, '-f', path.join(dir, 'docker-compose.yml'), ...args], {
      timeoutMs,
      env: { DOCKER_HOST: engine.host, COMPOSE_DOCKER_CLI_BUILD: '0', DOCKER_BUILDKIT: '0', COMPOSE_INTERACTIVE_NO_CLI: '1', HOME: engine.root },
    });
  const composeOk = async (dir: string, args: string[]): Promise<string> => {
    const r = await compose(dir, args);
    assert.equal(r.code, 0, `docker-compose ${args.join(' ')}:\n${r.stderr}${r.stdout}`);
    return r.stdout;
  };
  const inspect = async (id: string) => (await engine.request('GET', `/containers/${id}/json`)).json();

  test('build, a health-checked dependency, a named volume, up -d, then down -v removes everything', async () => {
    const dir = path.join(engine.root, 'compose-project');
    mkdirSync(path.join(dir, 'app'), { recursive: true });
    writeFileSync(path.join(dir, 'docker-compose.yml'), composeFile);
    writeFileSync(path.join(dir, 'app', 'Dockerfile'), dockerfile);

    await composeOk(dir, ['build']);
    const started = Date.now();
    await composeOk(dir, ['up', '-d']);
    const tookMs = Date.now() - started;

    const ids = (service: string) =>
      engine.request('GET', `/containers/json?all=1&filters=${encodeURIComponent(JSON.stringify({ label: [`com.docker.compose.project=${PROJECT}`, `com.docker.compose.service=${service}`] }))}`).then((r) => r.json() as Array<{ Id: string }>);
    const [db] = await ids('db');
    const [app] = await ids('app');
    assert.ok(db && app, 'both services have a container');
    const dbState = await inspect(db.Id);
    const appState = await inspect(app.Id);
    // up -d returned once the dependency was healthy, and the service started only then.
    assert.equal(dbState.State.Health.Status, 'healthy');
    assert.ok(tookMs >= 2000, `up -d waited for the health check (${tookMs} ms)`);
    const healthyAt = Date.parse(dbState.State.Health.Log.find((l: { ExitCode: number }) => l.ExitCode === 0).End);
    assert.ok(Date.parse(appState.State.StartedAt) >= healthyAt - 50, 'app started after db was healthy');
    assert.equal(appState.State.Running, true);

    // The built image, and the service seeing its dependency by name on the project's network.
    assert.equal(await engine.dockerOk(['exec', app.Id, 'cat', '/built.txt']), 'built-by-compose\n');
    assert.match(await engine.dockerOk(['exec', app.Id, 'cat', '/seen']), /^db-ready/);
    const exec = await composeOk(dir, ['exec', '-T', 'app', 'wget', '-q', '-O-', 'http://db:8080/']);
    assert.match(exec, /^db-ready/);
    const network = `${PROJECT}_default`;
    assert.ok(appState.NetworkSettings.Networks[network], 'app is on the project network');
    const volume = `${PROJECT}_dbdata`;
    assert.equal((await engine.request('GET', `/volumes/${volume}`)).status, 200);
    assert.ok(dbState.Mounts.some((m: { Name?: string; Destination: string }) => m.Name === volume && m.Destination === '/data'));
    assert.equal(await engine.dockerOk(['exec', db.Id, 'cat', '/data/boots']), 'up\n', 'the named volume is mounted');
    const ps = await composeOk(dir, ['ps']);
    assert.match(ps, /healthy/);

    await composeOk(dir, ['down', '-v']);
    assert.deepEqual(await ids('db'), []);
    assert.deepEqual(await ids('app'), []);
    assert.equal((await engine.request('GET', `/networks/${network}`)).status, 404, 'the network is gone');
    assert.equal((await engine.request('GET', `/volumes/${volume}`)).status, 404, 'the volume is gone');
    await engine.dockerOk(['rmi', `${PROJECT}_app`]);
  });
});
