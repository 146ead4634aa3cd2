/**
 * docker build (the classic builder, DOCKER_BUILDKIT=0) through the real CLI and dockerode: a multi-stage
 * Dockerfile using every instruction, the cache, .dockerignore, ONBUILD triggers, --target, -f, -q,
 * --no-cache, and a failing RUN.
 */
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { compress, contextTar, writeContext } from './build-support.js';
import { startEngine, type Engine } from './harness.js';

const ARCH = process.arch === 'x64' ? 'amd64' : process.arch;

describe('build', () => {
  let engine: Engine;
  let server: http.Server;
  let port = 0;

  before(async () => {
    engine = await startEngine();
    await engine.loadBusybox();
    server = http.createServer((req, res) => {
      if (req.url === '/remote.txt') {
        res.writeHead(200, { 'content-type': 'text/plain', 'last-modified': 'Mon, 01 Jan 2024 00:00:00 GMT' });
        res.end('remote content\n');
      } else {
        res.writeHead(404);
        res.end();
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    server?.close();
    await engine?.cleanup();
  });

  const ctx = (name: string) => path.join(engine.root, name);
  const run = (image: string, ...cmd: string[]) => engine.dockerOk(['run', '--rm', '-u', '0', '--entrypoint', '', image, ...cmd]);

  const multiStage = () => `# a comment
ARG BASE=busybox
FROM --platform=$BUILDPLATFORM \${BASE} AS builder
ARG MSG
ARG UNSET
RUN echo "msg=\${MSG:-none} unset=\${UNSET:-default} alt=\${MSG:+set}" > /built.txt
RUN ["sh", "-c", "echo exec-form > /exec.txt"]
RUN <<EOF
echo heredoc-line-1 > /heredoc.txt
echo heredoc-line-2 >> /heredoc.txt
EOF
RUN echo "proxy=$HTTP_PROXY" > /proxy.txt && \\
    echo continued >> /proxy.txt

FROM scratch AS files
COPY --from=builder /built.txt /exec.txt /heredoc.txt /out/

FROM busybox
LABEL org.example.one="1" two=2
EXPOSE 8080 9000/udp
ENV K1=v1 K3="quoted value"
ENV K2 value with spaces
WORKDIR /work
WORKDIR sub
COPY --from=files /out/ ./from-files/
COPY --from=0 /proxy.txt /proxy.txt
COPY --from=busybox /etc/passwd /passwd-copy
COPY --chown=app:app --chmod=640 data.txt /owned.txt
ADD files.tar.gz /unpacked/
ADD http://127.0.0.1:${port}/remote.txt /downloaded/
USER app
SHELL ["/bin/sh", "-c"]
STOPSIGNAL SIGUSR1
HEALTHCHECK --interval=30s --timeout=5s --retries=2 CMD true
VOLUME /data
ONBUILD ENV TRIGGERED=yes
ONBUILD LABEL triggered=yes
ENTRYPOINT ["sh", "-c"]
CMD ["cat /work/sub/from-files/built.txt"]
`;

  it('builds a multi-stage Dockerfile that uses every instruction', async () => {
    const archive = compress(await contextTar({ 'inside/hello.txt': 'from the archive\n' }), 'gzip');
    await writeContext(ctx('multi'), { Dockerfile: multiStage(), 'data.txt': 'data\n', 'files.tar.gz': archive });
    const out = await engine.dockerOk(['build', '-t', 'multi:1', '--build-arg', 'MSG=hi', '--build-arg', 'HTTP_PROXY=http://proxy.invalid:3128', ctx('multi')], { timeoutMs: 300_000 });
    assert.match(out, /Step 1\/\d+ : FROM --platform=\$BUILDPLATFORM \$\{BASE\} AS builder/);
    assert.match(out, / ---> Running in [0-9a-f]{12}/);
    assert.match(out, /Removing intermediate container [0-9a-f]{12}/);
    assert.match(out, /Successfully built [0-9a-f]{12}/);
    assert.match(out, /Successfully tagged multi:1/);
    assert.doesNotMatch(out, /were not consumed/);

    // Default entrypoint and command.
    assert.equal(await engine.dockerOk(['run', '--rm', 'multi:1']), 'msg=hi unset=default alt=set\n');
    assert.equal(await run('multi:1', 'cat', '/work/sub/from-files/exec.txt'), 'exec-form\n');
    assert.equal(await run('multi:1', 'cat', '/work/sub/from-files/heredoc.txt'), 'heredoc-line-1\nheredoc-line-2\n');
    // The proxy build arg reached RUN without an ARG line.
    assert.equal(await run('multi:1', 'cat', '/proxy.txt'), 'proxy=http://proxy.invalid:3128\ncontinued\n');
    assert.match(await run('multi:1', 'cat', '/passwd-copy'), /^app:x:1000:1000/m);
    assert.equal(await run('multi:1', 'stat', '-c', '%u:%g %a', '/owned.txt'), '1000:1000 640\n');
    assert.equal(await run('multi:1', 'cat', '/unpacked/inside/hello.txt'), 'from the archive\n');
    assert.equal(await run('multi:1', 'cat', '/downloaded/remote.txt'), 'remote content\n');
    assert.equal(await run('multi:1', 'stat', '-c', '%a', '/downloaded/remote.txt'), '600\n');
    assert.equal(await run('multi:1', 'pwd'), '/work/sub\n');
    assert.equal(await engine.dockerOk(['run', '--rm', '--entrypoint', 'id', 'multi:1', '-u']), '1000\n');

    const [inspect] = JSON.parse(await engine.dockerOk(['image', 'inspect', 'multi:1']));
    const c = inspect.Config;
    assert.equal(c.Labels['org.example.one'], '1');
    assert.equal(c.Labels.two, '2');
    assert.deepEqual(Object.keys(c.ExposedPorts).sort(), ['8080/tcp', '9000/udp']);
    assert.ok(c.Env.includes('K1=v1'));
    assert.ok(c.Env.includes('K2=value with spaces'));
    assert.ok(c.Env.includes('K3=quoted value'));
    assert.ok(!c.Env.some((e: string) => e.startsWith('HTTP_PROXY') || e.startsWith('MSG')));
    assert.equal(c.WorkingDir, '/work/sub');
    assert.equal(c.User, 'app');
    assert.equal(c.StopSignal, 'SIGUSR1');
    assert.deepEqual(c.Healthcheck.Test, ['CMD-SHELL', 'true']);
    assert.equal(c.Healthcheck.Interval, 30_000_000_000);
    assert.equal(c.Healthcheck.Timeout, 5_000_000_000);
    assert.equal(c.Healthcheck.Retries, 2);
    assert.deepEqual(c.Volumes, { '/data': {} });
    assert.deepEqual(c.OnBuild, ['ENV TRIGGERED=yes', 'LABEL triggered=yes']);
    assert.deepEqual(c.Entrypoint, ['sh', '-c']);
    assert.deepEqual(c.Cmd, ['cat /work/sub/from-files/built.txt']);
    assert.deepEqual(c.Shell, ['/bin/sh', '-c']);
    assert.equal(inspect.Architecture, ARCH);

    // Config-only steps add no layer; the history has Docker's lines, without the proxy value.
    const history = (await engine.dockerOk(['history', '--no-trunc', '--format', '{{.CreatedBy}}|{{.Size}}', 'multi:1'])).trim().split('\n');
    assert.ok(history.some((h) => /^\/bin\/sh -c #\(nop\) {2}EXPOSE 8080\/tcp 9000\/udp\|0B$/.test(h)), history.join('\n'));
    assert.ok(history.some((h) => /#\(nop\) COPY file:[0-9a-f]{64} in \/owned.txt/.test(h)), history.join('\n'));
    assert.ok(!history.some((h) => h.includes('proxy.invalid')));
    const layers = inspect.RootFS.Layers.length;
    assert.equal(layers, 1 /* busybox */ + 2 /* WORKDIR /work, then sub */ + 6 /* COPY and ADD */);
  });

  it('a second build is served from the cache: Using cache for every step and the same image id', async () => {
    const args = ['build', '-t', 'multi:2', '--build-arg', 'MSG=hi', '--build-arg', 'HTTP_PROXY=http://proxy.invalid:3128', ctx('multi')];
    const first = (await engine.dockerOk(['image', 'inspect', '-f', '{{.Id}}', 'multi:1'])).trim();
    const out = await engine.dockerOk(args, { timeoutMs: 300_000 });
    const steps = out.match(/^Step \d+\/\d+ : .*$/gm)!;
    const nonFrom = steps.filter((s) => !/ : FROM /.test(s));
    assert.equal((out.match(/^ ---> Using cache$/gm) ?? []).length, nonFrom.length, out);
    assert.doesNotMatch(out, /Running in/);
    const second = (await engine.dockerOk(['image', 'inspect', '-f', '{{.Id}}', 'multi:2'])).trim();
    assert.equal(second, first);
    // A changed source file misses the cache from its COPY on.
    await fs.writeFile(path.join(ctx('multi'), 'data.txt'), 'changed\n');
    const changed = await engine.dockerOk([...args.slice(0, 2), 'multi:3', ...args.slice(3)], { timeoutMs: 300_000 });
    const after = changed.split(/^Step \d+\/\d+ : COPY --chown/m)[1];
    assert.doesNotMatch(after, /Using cache/);
    assert.notEqual((await engine.dockerOk(['image', 'inspect', '-f', '{{.Id}}', 'multi:3'])).trim(), first);
    // --no-cache runs every step again.
    const nocache = await engine.dockerOk(['build', '--no-cache', '-t', 'multi:4', '--target', 'builder', '--build-arg', 'MSG=x', '--build-arg', 'HTTP_PROXY=y', ctx('multi')], { timeoutMs: 300_000 });
    assert.doesNotMatch(nocache, /Using cache/);
  });

  it('ONBUILD triggers run when the image is used as a base; --target, -f and -q', async () => {
    await writeContext(ctx('child'), {
      'build/Child.dockerfile': 'FROM multi:1\nRUN echo child\n',
      'Dockerfile': 'FROM busybox AS one\nLABEL stage=one\nFROM busybox AS two\nLABEL stage=two\n',
    });
    const out = await engine.dockerOk(['build', '-f', path.join(ctx('child'), 'build/Child.dockerfile'), '-t', 'child:1', ctx('child')], { timeoutMs: 300_000 });
    assert.match(out, /# Executing 2 build triggers/);
    const [inspect] = JSON.parse(await engine.dockerOk(['image', 'inspect', 'child:1']));
    assert.ok(inspect.Config.Env.includes('TRIGGERED=yes'));
    assert.equal(inspect.Config.Labels.triggered, 'yes');
    assert.equal(inspect.Config.OnBuild ?? null, null);

    const target = await engine.dockerOk(['build', '--target', 'one', '-t', 'target:1', ctx('child')]);
    assert.doesNotMatch(target, /stage=two/);
    assert.equal((await engine.dockerOk(['image', 'inspect', '-f', '{{index .Config.Labels "stage"}}', 'target:1'])).trim(), 'one');
    const missing = await engine.docker(['build', '--target', 'nope', ctx('child')]);
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /failed to reach build target nope/);

    const quiet = await engine.dockerOk(['build', '-q', '-t', 'quiet:1', ctx('child')]);
    assert.match(quiet.trim(), /^sha256:[0-9a-f]{64}$/);
    assert.equal(quiet.trim(), (await engine.dockerOk(['image', 'inspect', '-f', '{{.Id}}', 'quiet:1'])).trim());
  });

  it('.dockerignore is honoured: ignored files cannot be copied, exceptions can', async () => {
    await writeContext(ctx('ignore'), {
      Dockerfile: 'FROM busybox\nCOPY . /ctx/\nRUN find /ctx -type f | sort\n',
      '.dockerignore': '# comment\nsecret.txt\n**/*.log\n!keep/important.log\nDockerfile\n',
      'secret.txt': 'secret\n',
      'logs/a.log': 'log\n',
      'logs/deep/b.log': 'log\n',
      'keep/important.log': 'important\n',
      'kept.txt': 'kept\n',
    });
    await engine.dockerOk(['build', '-t', 'ignore:1', ctx('ignore')]);
    const files = await run('ignore:1', 'find', '/ctx', '-type', 'f');
    // The Dockerfile is excluded too (it is read, then removed from the context, as dockerd does).
    assert.deepEqual(files.trim().split('\n').sort(), ['/ctx/.dockerignore', '/ctx/keep/important.log', '/ctx/kept.txt']);

    // The daemon applies it too (a client that sends everything).
    const body = await contextTar({
      Dockerfile: 'FROM busybox\nCOPY secret.txt /\n',
      '.dockerignore': 'secret.txt\n',
      'secret.txt': 'secret\n',
    });
    const r = await engine.request('POST', '/v1.41/build?t=ignore:2', { body, headers: { 'content-type': 'application/x-tar' } });
    assert.equal(r.status, 200);
    assert.match(r.text, /COPY failed: file not found in build context or excluded by \.dockerignore: stat secret\.txt/);
    assert.equal((await engine.request('GET', '/images/ignore:2/json')).status, 404);
  });

  it('a failing RUN reports the command and its exit code in the stream; no image is tagged', async () => {
    await writeContext(ctx('fail'), { Dockerfile: 'FROM busybox\nRUN echo before-failure\nRUN exit 3\nRUN echo never\n' });
    const r = await engine.docker(['build', '--force-rm', '-t', 'fail:1', ctx('fail')]);
    assert.equal(r.code, 3, r.stderr + r.stdout);
    assert.match(r.stdout, /before-failure/);
    assert.match(r.stderr, /The command '\/bin\/sh -c exit 3' returned a non-zero code: 3/);
    assert.doesNotMatch(r.stdout, /never/);
    assert.equal((await engine.docker(['image', 'inspect', 'fail:1'])).code, 1);
    // --force-rm: no container left behind.
    assert.equal((await engine.dockerOk(['ps', '-aq'])).trim(), '');

    const api = await engine.request('POST', '/v1.41/build?t=fail:2', {
      body: await contextTar({ Dockerfile: 'FROM busybox\nRUN false\n' }),
      headers: { 'content-type': 'application/x-tar' },
    });
    assert.equal(api.status, 200);
    const last = JSON.parse(api.text.trim().split('\n').pop()!);
    assert.deepEqual(last.errorDetail, { code: 1, message: "The command '/bin/sh -c false' returned a non-zero code: 1" });
    assert.equal(last.error, "The command '/bin/sh -c false' returned a non-zero code: 1");
  });

  it("a step's stderr comes in bright red (ESC[91m ... ESC[0m), its stdout as it is", async () => {
    const r = await engine.request('POST', '/v1.41/build?t=colours:1', {
      body: await contextTar({ Dockerfile: 'FROM busybox\nRUN echo to-out && echo to-err >&2\n' }),
      headers: { 'content-type': 'application/x-tar' },
    });
    assert.equal(r.status, 200, r.text);
    const streams = r.text.trim().split('\n').map((l) => JSON.parse(l)).map((m) => m.stream as string | undefined).filter((t): t is string => !!t);
    assert.ok(streams.includes('to-out\n'), JSON.stringify(streams));
    assert.ok(streams.includes('\x1b[91mto-err\n\x1b[0m'), JSON.stringify(streams));
    assert.ok(!streams.some((t) => t.includes('to-out') && t.includes('\x1b[')), JSON.stringify(streams));
    await engine.dockerOk(['rmi', 'colours:1']);
  });

  it('a build that needs BuildKit (RUN --mount) answers 200 with the error in the stream, which dockerode reads', async () => {
    const dockerfile = 'FROM busybox\nRUN echo first\nRUN --mount=type=cache,target=/cache echo cached\n';
    const api = await engine.request('POST', '/v1.41/build?t=mount:1', {
      body: await contextTar({ Dockerfile: dockerfile }),
      headers: { 'content-type': 'application/x-tar' },
    });
    assert.equal(api.status, 200, api.text);
    const messages = api.text.trim().split('\n').map((l) => JSON.parse(l));
    assert.ok(messages.some((m) => /Step 3\/3 : RUN --mount=type=cache,target=\/cache echo cached/.test(m.stream ?? '')), api.text);
    const last = messages[messages.length - 1];
    assert.match(last.error, /the --mount option requires BuildKit/);

    const docker = engine.dockerode();
    const stream = await docker.buildImage(Readable.from([await contextTar({ Dockerfile: dockerfile })]), { t: 'mount:2' });
    const output = await new Promise<any[]>((resolve, reject) => docker.modem.followProgress(stream, (err, res) => (err ? reject(err) : resolve(res))));
    assert.ok(output.some((m) => /the --mount option requires BuildKit/.test(m.error ?? '')), JSON.stringify(output));
    assert.equal((await engine.request('GET', '/images/mount:2/json')).status, 404);
  });

  it('dockerode buildImage builds a context stream with build args and labels', async () => {
    const docker = engine.dockerode();
    const tarball = compress(await contextTar({ Dockerfile: 'FROM busybox\nARG WHO\nRUN echo "hello $WHO" > /hello\nCMD ["cat", "/hello"]\n' }), 'gzip');
    const stream = await docker.buildImage(Readable.from([tarball]), { t: 'dockerode:1', buildargs: { WHO: 'dockerode' }, labels: { via: 'dockerode' } });
    const output = await new Promise<any[]>((resolve, reject) => docker.modem.followProgress(stream, (err, res) => (err ? reject(err) : resolve(res))));
    assert.ok(output.some((m) => m.aux?.ID?.startsWith('sha256:')));
    assert.ok(!output.some((m) => m.error), JSON.stringify(output));
    assert.equal(await engine.dockerOk(['run', '--rm', 'dockerode:1']), 'hello dockerode\n');
    assert.equal((await engine.dockerOk(['image', 'inspect', '-f', '{{index .Config.Labels "via"}}', 'dockerode:1'])).trim(), 'dockerode');
  });
});
