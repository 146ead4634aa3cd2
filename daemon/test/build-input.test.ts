/**
 * POST /build with what clients may send: contexts compressed with gzip, bzip2, xz and zstd; bad input (paths
 * escaping the context, a Dockerfile that does not parse, a missing COPY source, bad parameters) answered
 * with clear errors and no image; a build cancelled by the client; POST /build/prune.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import { describe, it } from 'node:test';
import { buildLines, compress, contextTar, streamText, writeContext } from './build-support.js';
import { eventually, useEngine } from './harness.js';

describe('build input', () => {
  const engine = useEngine();

  const post = async (query: string, body: Buffer, headers: Record<string, string> = {}) =>
    engine.request('POST', `/v1.41/build?${query}`, { body, headers: { 'content-type': 'application/x-tar', ...headers }, timeoutMs: 300_000 });
  const imageExists = async (name: string) => (await engine.request('GET', `/images/${name}/json`)).status === 200;

  for (const how of ['identity', 'gzip', 'bzip2', 'xz', 'zstd'] as const) {
    it(`builds a context compressed with ${how}`, async () => {
      const body = compress(await contextTar({ Dockerfile: 'FROM busybox\nCOPY f /f\nCMD ["cat", "/f"]\n', f: `${how}\n` }), how);
      const r = await post(`t=comp:${how}`, body);
      assert.equal(r.status, 200);
      const lines = buildLines(r.text);
      assert.ok(!lines.some((l) => l.error), r.text);
      assert.ok(lines.some((l) => typeof l.aux?.ID === 'string'));
      assert.match(streamText(lines), new RegExp(`Successfully tagged comp:${how}`));
      assert.equal(await engine.dockerOk(['run', '--rm', `comp:${how}`]), `${how}\n`);
    });
  }

  it('refuses a context whose entries escape it, before any step, writing nothing outside', async () => {
    const body = await contextTar({ Dockerfile: 'FROM busybox\nCOPY . /\n', '../escaped.txt': 'x', 'a/../../escaped2.txt': 'y' });
    const r = await post('t=escape:1', body);
    assert.equal(r.status, 400, r.text);
    assert.match(r.json().message, /points outside the context/);
    assert.equal(await imageExists('escape:1'), false);
    const found = execFileSync('find', [engine.root, '-name', 'escaped*.txt'], { encoding: 'utf8' });
    assert.equal(found, '');
    // Nothing of the refused build stays under the data root.
    assert.deepEqual(execFileSync('ls', [path.join(engine.dataRoot, 'build', 'tmp')], { encoding: 'utf8' }), '');
  });

  it('links in the context never lead outside it: not when unpacking, not when copying', async () => {
    const outside = path.join(engine.root, 'outside');
    execFileSync('mkdir', ['-p', outside]);
    execFileSync('sh', ['-c', `echo host-secret > ${outside}/secret`]);
    // Entries below a link to a host folder are refused, and nothing is made there.
    const through = await post('t=links:1', await contextTar({ Dockerfile: 'FROM busybox\n', link: { symlink: outside }, 'link/sub/file': 'x' }));
    assert.equal(through.status, 400, through.text);
    assert.match(through.json().message, /lies below a link or a file/);
    assert.deepEqual(execFileSync('ls', [outside], { encoding: 'utf8' }), 'secret\n');
    const hard = await post('t=links:2', await contextTar({ Dockerfile: 'FROM busybox\n', link: { symlink: outside }, stolen: { hardlink: 'link/secret' } }));
    assert.equal(hard.status, 400, hard.text);
    // A link to an absolute path is followed inside the context, as in a container.
    for (const [line, files] of [
      ['COPY abs /abs', { abs: { symlink: `${outside}/secret` } }],
      ['COPY dir/secret /copied', { dir: { symlink: outside } }],
    ] as const) {
      const r = await post('t=links:3', await contextTar({ Dockerfile: `FROM busybox\n${line}\n`, ...files }));
      const last = buildLines(r.text).pop()!;
      assert.match(last.error ?? '', /file not found in build context|link to a missing file/, r.text);
    }
    assert.equal(await imageExists('links:3'), false);
  });

  it('a Dockerfile with an unknown instruction fails before step 1 with the line, through the CLI too', async () => {
    const body = await contextTar({ Dockerfile: 'FROM busybox\nRUN true\nFOO bar\n' });
    const r = await post('t=syntax:1', body);
    assert.equal(r.status, 400);
    assert.match(r.json().message, /dockerfile parse error on line 3: unknown instruction: FOO/);
    const dir = await writeContext(path.join(engine.root, 'syntax'), { Dockerfile: 'FROM busybox\nFOO bar\n' });
    const cli = await engine.docker(['build', '-t', 'syntax:2', dir]);
    assert.notEqual(cli.code, 0);
    assert.match(cli.stderr, /unknown instruction: FOO/);
    assert.doesNotMatch(cli.stdout, /Step 1/);
    for (const [dockerfile, message] of [
      ['FROM busybox\nCOPY onlyone\n', /COPY requires at least two arguments/],
      ['FROM busybox\nCOPY --bogus=1 a b\n', /unknown flag: bogus/],
      ['FROM busybox\nENV\n', /ENV requires at least one argument/],
      ['RUN true\n', /first instruction must be FROM/],
      ['FROM busybox\nSHELL sh -c\n', /SHELL requires the arguments to be in JSON form/],
      ['FROM busybox\nHEALTHCHECK WHAT true\n', /Unknown type "WHAT" in HEALTHCHECK/],
    ] as const) {
      const bad = await post('t=syntax:3', await contextTar({ Dockerfile: dockerfile }));
      assert.equal(bad.status, 400, dockerfile);
      assert.match(bad.json().message, message);
    }
    assert.equal(await imageExists('syntax:1'), false);
    assert.equal(await imageExists('syntax:3'), false);
  });

  it('a missing COPY source is a clear in-band error and tags nothing', async () => {
    const r = await post('t=missing:1', await contextTar({ Dockerfile: 'FROM busybox\nRUN echo first\nCOPY nothere.txt /x\n' }));
    assert.equal(r.status, 200);
    const lines = buildLines(r.text);
    const last = lines[lines.length - 1];
    assert.match(last.error, /COPY failed: file not found in build context or excluded by \.dockerignore: stat nothere\.txt: file does not exist/);
    assert.deepEqual(last.errorDetail, { message: last.error });
    assert.equal(await imageExists('missing:1'), false);
    const cli = await engine.docker(['build', '-t', 'missing:2', await writeContext(path.join(engine.root, 'missing'), { Dockerfile: 'FROM busybox\nCOPY a*.txt /x/\n' })]);
    assert.equal(cli.code, 1);
    assert.match(cli.stderr, /COPY failed: file not found in build context/);
  });

  it('bad parameters and missing files answer 400 and the daemon keeps serving', async () => {
    const ok = await contextTar({ Dockerfile: 'FROM busybox\n' });
    for (const [query, message] of [
      ['buildargs=notjson', /query parameter buildargs must be a JSON object/],
      ['labels=%5B1%5D', /query parameter labels must be a JSON object/],
      ['dockerfile=https%3A%2F%2Fexample.com%2FDockerfile', /not a URL/],
      ['dockerfile=Other.dockerfile', /Cannot locate specified Dockerfile: Other.dockerfile/],
      ['dockerfile=..%2FDockerfile', /must be within the build context/],
      ['remote=https%3A%2F%2Fexample.com%2Frepo.git', /remote build contexts/],
      ['memory=-5', /memory must be at least 0/],
      ['t=Bad%20Name', /invalid reference format|repository name/],
    ] as const) {
      const r = await post(query, ok);
      assert.ok(r.status === 400 || r.status === 200, `${query}: ${r.status}`);
      const text = r.status === 400 ? r.json().message : buildLines(r.text).pop()?.error;
      assert.match(text, message, query);
    }
    const garbage = await post('t=garbage:1', Buffer.from('this is not a tar archive at all, just some bytes'.repeat(20)));
    assert.equal(garbage.status, 400);
    assert.match(garbage.json().message, /invalid build context|Cannot locate specified Dockerfile/);
    const missingBase = await post('t=nobase:1', await contextTar({ Dockerfile: 'FROM localhost:1/no/such:image\n' }));
    assert.match(buildLines(missingBase.text).pop()?.error ?? missingBase.text, /localhost:1/);
    const platform = await post('t=plat:1', await contextTar({ Dockerfile: 'FROM --platform=linux/s390x busybox\n' }));
    assert.match(buildLines(platform.text).pop()?.error ?? platform.text, /platform linux\/s390x is not supported/);
    assert.equal((await engine.request('GET', '/_ping')).status, 200);
  });

  it('a build cancelled by the client stops its RUN container, removes it and tags nothing', async () => {
    const body = await contextTar({ Dockerfile: 'FROM busybox\nRUN echo started && sleep 600\n' });
    await new Promise<void>((resolve, reject) => {
      const req = http.request({ socketPath: engine.socket, method: 'POST', path: '/v1.41/build?t=cancel:1', headers: { 'content-type': 'application/x-tar' } }, (res) => {
        let seen = '';
        res.on('data', (chunk: Buffer) => {
          seen += chunk.toString();
          // Cut once the RUN container runs (its first output line).
          if (seen.includes('{"stream":"started\\n"}')) {
            req.destroy();
            resolve();
          }
        });
        res.on('error', () => undefined);
      });
      req.on('error', (err) => {
        if (!(err as NodeJS.ErrnoException).code?.includes('ECONNRESET')) reject(err);
      });
      req.end(body);
    });
    await eventually(async () => {
      assert.equal((await engine.dockerOk(['ps', '-a', '--format', '{{.ID}} {{.Command}} {{.Status}}'])).trim(), '');
      return true;
    }, 60_000);
    assert.equal(await imageExists('cancel:1'), false);
  });

  it('POST /build/prune removes the images only the build cache holds', async () => {
    const dir = await writeContext(path.join(engine.root, 'prune'), { Dockerfile: 'FROM busybox\nRUN echo one > /one\nLABEL x=1\nRUN echo two > /two\n' });
    await engine.dockerOk(['build', '-t', 'prune:1', dir]);
    const parent = (await engine.dockerOk(['image', 'inspect', '-f', '{{.Parent}}', 'prune:1'])).trim();
    const grandparent = (await engine.request('GET', `/v1.45/images/${parent}/json`)).json().Parent as string;
    // While the image is tagged, its parents are kept (they are its layers' history).
    const kept = await engine.request('POST', '/v1.45/build/prune');
    assert.equal(kept.status, 200);
    assert.equal(await imageExists('prune:1'), true);
    await engine.dockerOk(['rmi', '--no-prune', 'prune:1']);
    const r = await engine.request('POST', '/v1.45/build/prune?all=1');
    assert.equal(r.status, 200);
    const result = r.json();
    // The untagged intermediates (RUN echo one, LABEL) go; the RUN one's layer held 4 bytes.
    assert.deepEqual([...result.CachesDeleted].sort(), [parent, grandparent].sort(), JSON.stringify(result));
    assert.equal(result.SpaceReclaimed, 4);
    assert.equal(await imageExists(parent), false);
    // The base image stays.
    assert.equal(await imageExists('busybox:latest'), true);
    const bad = await engine.request('POST', `/v1.45/build/prune?filters=${encodeURIComponent('{"bogus":["1"]}')}`);
    assert.equal(bad.status, 400);
    // A build after the prune runs its steps again.
    const again = await engine.dockerOk(['build', '-t', 'prune:2', dir]);
    assert.match(again, /Running in/);
  });
});
