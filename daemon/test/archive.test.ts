/**
 * docker cp (archive HEAD/GET/PUT), export and diff through the docker CLI, dockerode and raw HTTP, on
 * running and stopped containers, across bind mounts; and every known way out of the container root
 * (`..`, absolute and relative links, tar entries with `..` or absolute names, hard links) is tried and
 * shown to read and write nothing outside.
 */
import assert from 'node:assert/strict';
import { existsSync, promises as fs, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import tar from 'tar-stream';
import { expectConforms } from './contract/openapi.js';
import { runCommand, startEngine, type Engine, type HttpResult } from './harness.js';

let engine: Engine;
/** A host file the container must never reach. */
let secret: string;
const SECRET_TEXT = 'host secret: never in a container\n';

before(async () => {
  engine = await startEngine();
  await engine.loadBusybox();
  secret = path.join(engine.root, 'outside', 'secret.txt');
  await fs.mkdir(path.dirname(secret), { recursive: true });
  await fs.writeFile(secret, SECRET_TEXT);
});

after(async () => {
  await engine?.cleanup();
});

type Entry = { name: string; type?: tar.Header['type']; linkname?: string; mode?: number; content?: string };

async function makeTar(entries: Entry[]): Promise<Buffer> {
  const pack = tar.pack();
  const chunks: Buffer[] = [];
  pack.on('data', (c: unknown) => {
    chunks.push(c as Buffer);
  });
  const done = new Promise<void>((resolve) => pack.on('end', () => resolve()));
  for (const e of entries) {
    await new Promise<void>((resolve, reject) => {
      const header = { name: e.name, type: e.type ?? 'file', linkname: e.linkname, mode: e.mode ?? (e.type === 'directory' ? 0o755 : 0o644), mtime: new Date('2024-02-03T04:05:06Z') };
      pack.entry(header, (e.type === 'file' || !e.type ? (e.content ?? '') : undefined) as string, (err) => (err ? reject(err) : resolve()));
    });
  }
  pack.finalize();
  await done;
  return Buffer.concat(chunks);
}

async function readTar(buf: Buffer): Promise<Map<string, { type: string; content: string; linkname?: string | null; mode?: number }>> {
  const out = new Map<string, { type: string; content: string; linkname?: string | null; mode?: number }>();
  const extract = tar.extract();
  const done = (async () => {
    for await (const entry of extract) {
      const chunks: Buffer[] = [];
      for await (const c of entry) chunks.push(c as Buffer);
      out.set(entry.header.name, { type: entry.header.type ?? 'file', content: Buffer.concat(chunks).toString('utf8'), linkname: entry.header.linkname, mode: entry.header.mode });
    }
  })();
  extract.end(buf);
  await done;
  return out;
}

function pathStat(res: HttpResult): { name: string; size: number; mode: number; mtime: string; linkTarget: string } {
  const legacy = res.headers['x-docker-container-path-stat'];
  const spec = res.headers['x-engine-container-path-stat'];
  assert.ok(legacy, 'X-Docker-Container-Path-Stat is sent');
  assert.equal(spec, legacy, 'X-Engine-Container-Path-Stat is sent with the same value');
  return JSON.parse(Buffer.from(String(legacy), 'base64').toString('utf8'));
}

const GO_DIR = 2 ** 31;
const GO_SYMLINK = 2 ** 27;

function archiveUrl(id: string, p: string, extra = ''): string {
  return `/containers/${id}/archive?path=${encodeURIComponent(p)}${extra}`;
}

async function running(args: string[] = []): Promise<string> {
  return (await engine.dockerOk(['run', '-d', ...args, 'busybox', 'sleep', '600'])).trim();
}

async function execOut(id: string, cmd: string): Promise<string> {
  // Through the archive itself, so that these tests do not depend on exec.
  const res = await engine.request('GET', archiveUrl(id, cmd));
  assert.equal(res.status, 200, res.text);
  const files = await readTar(res.body);
  return [...files.values()][0]?.content ?? '';
}

function mergedMounted(id: string): boolean {
  const merged = path.join(engine.dataRoot, 'runtime', id, 'merged');
  return readFileSync('/proc/self/mountinfo', 'utf8').split('\n').some((l) => l.split(' ')[4] === merged);
}

describe('archive: path stat and GET', () => {
  let id: string;
  before(async () => {
    id = await running();
  });

  test('HEAD gives the stat of a file and a folder in both headers', async () => {
    const file = await engine.request('HEAD', archiveUrl(id, '/etc/passwd'));
    assert.equal(file.status, 200);
    const st = pathStat(file);
    assert.equal(st.name, 'passwd');
    assert.equal(st.mode & 0o777, 0o644);
    assert.equal(st.mode & GO_DIR, 0);
    assert.ok(st.size > 0);
    assert.ok(!Number.isNaN(Date.parse(st.mtime)));
    const dir = pathStat(await engine.request('HEAD', archiveUrl(id, 'etc')));
    assert.equal(dir.name, 'etc');
    assert.ok(dir.mode >= GO_DIR, 'the folder bit of Go os.FileMode is set');
  });

  test('a symlink is stated as a link with its resolved target', async () => {
    await engine.dockerOk(['exec', id, 'ln', '-s', '/etc/passwd', '/tmp/pw-link']);
    const st = pathStat(await engine.request('HEAD', archiveUrl(id, '/tmp/pw-link')));
    assert.ok((st.mode & GO_SYMLINK) !== 0);
    assert.equal(st.linkTarget, '/etc/passwd');
  });

  test('GET gives a tar of a file, of a folder, and of a folder\'s contents with /.', async () => {
    const file = await engine.request('GET', archiveUrl(id, '/etc/passwd'));
    assert.equal(file.status, 200);
    assert.equal(file.headers['content-type'], 'application/x-tar');
    const files = await readTar(file.body);
    assert.deepEqual([...files.keys()], ['passwd']);
    assert.match(files.get('passwd')!.content, /^root:x:0:0/);

    const dir = await readTar((await engine.request('GET', archiveUrl(id, '/etc'))).body);
    assert.ok(dir.has('etc/'), [...dir.keys()].join(','));
    assert.ok(dir.has('etc/passwd'));
    const contents = await readTar((await engine.request('GET', archiveUrl(id, '/etc/.'))).body);
    assert.ok(contents.has('passwd') && !contents.has('etc/'), [...contents.keys()].join(','));
  });

  test('status codes: empty path 400, file asserted as folder 400, missing path 404, missing container 404', async () => {
    assert.equal((await engine.request('GET', `/containers/${id}/archive`)).status, 400);
    const asDir = await engine.request('GET', archiveUrl(id, '/etc/passwd/'));
    assert.equal(asDir.status, 400);
    assert.match(asDir.json().message, /not a directory/);
    assert.equal((await engine.request('GET', archiveUrl(id, '/etc/passwd/.'))).status, 400);
    const missing = await engine.request('GET', archiveUrl(id, '/no/such/file'));
    assert.equal(missing.status, 404);
    assert.ok(missing.json().message);
    assert.equal((await engine.request('HEAD', archiveUrl(id, '/nope'))).status, 404);
    assert.equal((await engine.request('GET', archiveUrl('no-such-container', '/etc'))).status, 404);
  });
});

describe('archive: the engine files of a container never started', () => {
  // As in dockerd, whose init layer holds empty /etc/hosts, /etc/hostname and /etc/resolv.conf (mode 0755)
  // until the start bind mounts the engine's files over them.
  test('/etc/hosts, /etc/hostname and /etc/resolv.conf are empty files before the first start, the engine\'s after it', async () => {
    const id = (await engine.dockerOk(['create', '--hostname', 'never-started', 'busybox', 'sleep', '600'])).trim();
    try {
      for (const p of ['/etc/hosts', '/etc/hostname', '/etc/resolv.conf']) {
        const head = await engine.request('HEAD', archiveUrl(id, p));
        assert.equal(head.status, 200, `HEAD ${p}: ${head.status}`);
        const st = pathStat(head);
        assert.equal(st.name, path.posix.basename(p));
        assert.equal(st.size, 0);
        assert.equal(st.mode, 0o755);
        const got = await engine.request('GET', archiveUrl(id, p));
        assert.equal(got.status, 200, `GET ${p}: ${got.text}`);
        const files = await readTar(got.body);
        assert.deepEqual([...files.keys()], [path.posix.basename(p)]);
        assert.equal(files.get(path.posix.basename(p))!.content, '');
      }
      const cli = await engine.docker(['cp', `${id}:/etc/hostname`, '-']);
      assert.equal(cli.code, 0, cli.stderr);
      await engine.dockerOk(['start', id]);
      assert.equal(await execOut(id, '/etc/hostname'), 'never-started\n');
      assert.match(await execOut(id, '/etc/hosts'), /never-started/);
    } finally {
      await engine.docker(['rm', '-f', id]);
    }
  });
});

describe('docker cp', () => {
  test('copies a file and a folder into a running container and back out', async () => {
    const id = await running();
    const src = path.join(engine.root, 'cp-src');
    await fs.mkdir(path.join(src, 'sub'), { recursive: true });
    await fs.writeFile(path.join(src, 'a.txt'), 'alpha\n');
    await fs.writeFile(path.join(src, 'sub', 'b.txt'), 'beta\n');
    await engine.dockerOk(['cp', path.join(src, 'a.txt'), `${id}:/tmp/`]);
    await engine.dockerOk(['cp', src, `${id}:/tmp/tree`]);
    assert.equal((await engine.dockerOk(['exec', id, 'cat', '/tmp/a.txt', '/tmp/tree/sub/b.txt'])), 'alpha\nbeta\n');

    const dest = path.join(engine.root, 'cp-dest');
    await fs.mkdir(dest);
    await engine.dockerOk(['cp', `${id}:/tmp/tree`, path.join(dest, 'tree')]);
    assert.equal(readFileSync(path.join(dest, 'tree', 'sub', 'b.txt'), 'utf8'), 'beta\n');
    await engine.dockerOk(['cp', `${id}:/etc/passwd`, path.join(dest, 'pw')]);
    assert.match(readFileSync(path.join(dest, 'pw'), 'utf8'), /^root:/);
    // stdout as a tar stream
    const streamed = await runCommand('sh', ['-c', `docker cp ${id}:/tmp/a.txt - | tar -xO`], { env: { DOCKER_HOST: engine.host, DOCKER_CONFIG: engine.dockerConfig } });
    assert.equal(streamed.stdout, 'alpha\n');
  });

  test('copies into a stopped container, which sees the file when it starts; its root is unmounted again', async () => {
    const id = (await engine.dockerOk(['create', 'busybox', 'cat', '/data/hello.txt'])).trim();
    const src = path.join(engine.root, 'hello.txt');
    await fs.writeFile(src, 'hello from the host\n');
    assert.equal((await engine.docker(['cp', src, `${id}:/data/hello.txt`])).code, 1, 'the parent folder does not exist yet');
    await engine.dockerOk(['cp', path.join(engine.root, 'outside'), `${id}:/data`]);
    await engine.dockerOk(['cp', src, `${id}:/data/hello.txt`]);
    assert.equal(mergedMounted(id), false, 'the root mounted for the copy is unmounted after it');
    await engine.dockerOk(['start', '-a', id]).then((out) => assert.equal(out, 'hello from the host\n'));
    // and out of the stopped (exited) container
    const out = path.join(engine.root, 'back.txt');
    await engine.dockerOk(['wait', id]);
    await engine.dockerOk(['cp', `${id}:/data/hello.txt`, out]);
    assert.equal(readFileSync(out, 'utf8'), 'hello from the host\n');
    // The CLI may return as soon as it read the end of the archive, before the response itself ended.
    for (let i = 0; i < 40 && mergedMounted(id); i++) await new Promise((r) => setTimeout(r, 50));
    assert.equal(mergedMounted(id), false);
  });

  test('works across a bind mount: reads and writes land in the bind source', async () => {
    const bind = path.join(engine.root, 'bind-src');
    await fs.mkdir(bind);
    await fs.writeFile(path.join(bind, 'in-bind.txt'), 'in the bind\n');
    const id = await running(['-v', `${bind}:/mnt/data`]);
    assert.equal(await execOut(id, '/mnt/data/in-bind.txt'), 'in the bind\n');
    const src = path.join(engine.root, 'to-bind.txt');
    await fs.writeFile(src, 'to the bind\n');
    await engine.dockerOk(['cp', src, `${id}:/mnt/data/`]);
    assert.equal(readFileSync(path.join(bind, 'to-bind.txt'), 'utf8'), 'to the bind\n');
    // a stopped container too
    await engine.dockerOk(['kill', id]);
    await engine.dockerOk(['cp', src, `${id}:/mnt/data/again.txt`]);
    assert.equal(readFileSync(path.join(bind, 'again.txt'), 'utf8'), 'to the bind\n');
  });

  test('a bind whose host path passes through a host symlink is read and written', async () => {
    const real = path.join(engine.root, 'bind-real');
    await fs.mkdir(real);
    await fs.writeFile(path.join(real, 'r.txt'), 'real\n');
    await fs.symlink(real, path.join(engine.root, 'bind-alias'));
    const id = await running(['-v', `${path.join(engine.root, 'bind-alias')}:/alias`]);
    assert.equal(await execOut(id, '/alias/r.txt'), 'real\n');
    const put = await engine.request('PUT', archiveUrl(id, '/alias'), { body: await makeTar([{ name: 'w.txt', content: 'written' }]) });
    assert.equal(put.status, 200, put.text);
    assert.equal(readFileSync(path.join(real, 'w.txt'), 'utf8'), 'written');
    const dir = await readTar((await engine.request('GET', archiveUrl(id, '/alias'))).body);
    assert.ok(dir.has('alias/r.txt') && dir.has('alias/w.txt'), [...dir.keys()].join(','));
  });

  test('dockerode getArchive and putArchive', async () => {
    const id = await running();
    const docker = engine.dockerode();
    const c = docker.getContainer(id);
    await c.putArchive(await makeTar([{ name: 'dode.txt', content: 'dockerode\n' }]), { path: '/tmp' });
    const stream = await c.getArchive({ path: '/tmp/dode.txt' });
    const chunks: Buffer[] = [];
    for await (const chunk of stream) chunks.push(chunk as Buffer);
    assert.equal((await readTar(Buffer.concat(chunks))).get('dode.txt')?.content, 'dockerode\n');
    const until = String(Math.ceil(Date.now() / 1000) + 1);
    const actions = await engine.dockerOk(['events', '--since', '0', '--until', until, '--filter', `container=${id}`, '--format', '{{.Action}}']);
    assert.ok(actions.includes('extract-to-dir') && actions.includes('archive-path'), actions);
  });
});

describe('archive PUT rules', () => {
  test('the target must be an existing folder: a file 400, a missing one 404', async () => {
    const id = await running();
    const body = await makeTar([{ name: 'x.txt', content: 'x' }]);
    const onFile = await engine.request('PUT', archiveUrl(id, '/etc/passwd'), { body, headers: { 'Content-Type': 'application/x-tar' } });
    assert.equal(onFile.status, 400);
    assert.match(onFile.json().message, /not a directory/);
    assert.equal((await engine.request('PUT', archiveUrl(id, '/no/such'), { body })).status, 404);
    assert.equal((await engine.request('PUT', archiveUrl(id, ''), { body })).status, 400);
  });

  test('noOverwriteDirNonDir refuses to replace a folder by a file and the reverse; without it, replaces', async () => {
    const id = await running();
    await engine.request('PUT', archiveUrl(id, '/tmp'), { body: await makeTar([{ name: 'd', type: 'directory' }, { name: 'f', content: 'file' }]) });
    const dirByFile = await engine.request('PUT', archiveUrl(id, '/tmp', '&noOverwriteDirNonDir=1'), { body: await makeTar([{ name: 'd', content: 'now a file' }]) });
    assert.equal(dirByFile.status, 400);
    assert.match(dirByFile.json().message, /cannot overwrite directory/);
    const fileByDir = await engine.request('PUT', archiveUrl(id, '/tmp', '&noOverwriteDirNonDir=true'), { body: await makeTar([{ name: 'f', type: 'directory' }]) });
    assert.equal(fileByDir.status, 400);
    assert.match(fileByDir.json().message, /cannot overwrite non-directory/);
    const replaced = await engine.request('PUT', archiveUrl(id, '/tmp'), { body: await makeTar([{ name: 'd', content: 'now a file' }]) });
    assert.equal(replaced.status, 200);
    assert.equal(await execOut(id, '/tmp/d'), 'now a file');
  });

  test('read-only root filesystem and read-only bind: 403', async () => {
    const bind = path.join(engine.root, 'ro-bind');
    await fs.mkdir(bind, { recursive: true });
    const id = await running(['--read-only', '-v', `${bind}:/ro:ro`, '-v', `${path.join(engine.root, 'outside')}:/rw`]);
    const body = await makeTar([{ name: 'x.txt', content: 'x' }]);
    const rootfs = await engine.request('PUT', archiveUrl(id, '/tmp'), { body });
    assert.equal(rootfs.status, 403);
    assert.match(rootfs.json().message, /read-only/);
    assert.equal((await engine.request('PUT', archiveUrl(id, '/ro'), { body })).status, 403);
    assert.equal(existsSync(path.join(bind, 'x.txt')), false);
    assert.equal((await engine.request('PUT', archiveUrl(id, '/rw'), { body })).status, 200, 'a writable bind in a read-only root');
    assert.equal(readFileSync(path.join(engine.root, 'outside', 'x.txt'), 'utf8'), 'x');
    await fs.rm(path.join(engine.root, 'outside', 'x.txt'));
  });

  test('copyUIDGID gives the files to the container user; without it the archive owner stays', async () => {
    const id = (await engine.dockerOk(['run', '-d', '--user', 'app', 'busybox', 'sleep', '600'])).trim();
    const body = async () => makeTar([{ name: 'owned.txt', content: 'o' }]);
    assert.equal((await engine.request('PUT', archiveUrl(id, '/tmp', '&copyUIDGID=1'), { body: await body() })).status, 200);
    assert.equal((await engine.dockerOk(['exec', id, 'stat', '-c', '%u:%g', '/tmp/owned.txt'])).trim(), '1000:1000');
    assert.equal((await engine.request('PUT', archiveUrl(id, '/tmp'), { body: await body() })).status, 200);
    assert.equal((await engine.dockerOk(['exec', id, 'stat', '-c', '%u:%g', '/tmp/owned.txt'])).trim(), '0:0');
  });
});

describe('archive: nothing outside the container is read or written', () => {
  let id: string;
  let merged: string;
  before(async () => {
    id = await running();
    merged = path.join(engine.dataRoot, 'runtime', id, 'merged');
    await engine.dockerOk(['exec', id, 'ln', '-s', '/', '/tmp/abs-root']);
    await engine.dockerOk(['exec', id, 'ln', '-s', '../../../../../../../../../../..', '/tmp/rel-up']);
    await engine.dockerOk(['exec', id, 'ln', '-s', secret, '/tmp/to-secret']);
  });

  const noSecret = (res: HttpResult) => assert.ok(!res.body.includes(Buffer.from(SECRET_TEXT)), 'the host file never reaches the client');

  test('.. in the path stays at the container root', async () => {
    const up = '../'.repeat(20) + secret.slice(1);
    for (const p of [up, `/tmp/${up}`, `/${up}`]) {
      const res = await engine.request('GET', archiveUrl(id, p));
      assert.equal(res.status, 404, p);
      noSecret(res);
    }
    // /.. of the root is the root itself
    const rootUp = await engine.request('GET', archiveUrl(id, '/../../etc/passwd'));
    assert.equal(rootUp.status, 200);
    assert.match((await readTar(rootUp.body)).get('passwd')!.content, /^root:x:0:0:root/);
  });

  test('absolute and relative symlinks resolve inside the container root', async () => {
    for (const p of [`/tmp/abs-root${secret}`, `/tmp/rel-up${secret}`, '/tmp/to-secret/', '/tmp/to-secret/.']) {
      const res = await engine.request('GET', archiveUrl(id, p));
      assert.equal(res.status, 404, p);
      noSecret(res);
    }
    // A link itself is archived as a link, never followed.
    const link = await engine.request('GET', archiveUrl(id, '/tmp/to-secret'));
    assert.equal(link.status, 200);
    noSecret(link);
    assert.equal((await readTar(link.body)).get('to-secret')?.type, 'symlink');
    // and a link through which the container's own file is read works
    const own = await engine.request('GET', archiveUrl(id, '/tmp/abs-root/etc/passwd'));
    assert.equal(own.status, 200);
    // writing through them lands inside the container
    const put = await engine.request('PUT', archiveUrl(id, '/tmp/abs-root/tmp'), { body: await makeTar([{ name: 'via-link.txt', content: 'in' }]) });
    assert.equal(put.status, 200);
    assert.equal(readFileSync(path.join(merged, 'tmp', 'via-link.txt'), 'utf8'), 'in');
    const putOut = await engine.request('PUT', archiveUrl(id, `/tmp/rel-up${path.dirname(secret)}`), { body: await makeTar([{ name: 'pwned.txt', content: 'x' }]) });
    assert.equal(putOut.status, 404);
    assert.equal(existsSync(path.join(path.dirname(secret), 'pwned.txt')), false);
  });

  test('tar entries with .. are refused and write nothing', async () => {
    const escape = '../'.repeat(30) + path.join(path.dirname(secret).slice(1), 'pwned-dotdot.txt');
    for (const name of [escape, `sub/../../${'../'.repeat(30)}x.txt`]) {
      const res = await engine.request('PUT', archiveUrl(id, '/tmp'), { body: await makeTar([{ name, content: 'pwned' }]) });
      assert.equal(res.status, 400, name);
      assert.match(res.json().message, /\.\./);
    }
    assert.equal(existsSync(path.join(path.dirname(secret), 'pwned-dotdot.txt')), false);
  });

  test('absolute entry names are taken relative to the target folder', async () => {
    const hostTarget = path.join(path.dirname(secret), 'pwned-abs.txt');
    const res = await engine.request('PUT', archiveUrl(id, '/tmp'), { body: await makeTar([{ name: hostTarget, content: 'inside' }]) });
    assert.equal(res.status, 200, res.text);
    assert.equal(existsSync(hostTarget), false);
    assert.equal(readFileSync(path.join(merged, 'tmp', hostTarget.slice(1)), 'utf8'), 'inside');
  });

  test('a symlink in the archive cannot carry later entries outside', async () => {
    for (const linkname of [path.dirname(secret), '../../../../../../../../../..' + path.dirname(secret)]) {
      const res = await engine.request('PUT', archiveUrl(id, '/tmp'), {
        body: await makeTar([
          { name: 'evil', type: 'symlink', linkname },
          { name: 'evil/pwned-link.txt', content: 'pwned' },
        ]),
      });
      assert.equal(res.status, 400, res.text);
      assert.equal(existsSync(path.join(path.dirname(secret), 'pwned-link.txt')), false);
    }
    // A link to a folder of the container leads there, inside the container.
    const res = await engine.request('PUT', archiveUrl(id, '/tmp'), {
      body: await makeTar([
        { name: 'to-etc', type: 'symlink', linkname: '/etc' },
        { name: 'to-etc/from-tar.txt', content: 'via a link of the archive' },
      ]),
    });
    assert.equal(res.status, 200, res.text);
    assert.equal(readFileSync(path.join(merged, 'etc', 'from-tar.txt'), 'utf8'), 'via a link of the archive');
  });

  test('a file replacing a symlink replaces the link, never writes through it', async () => {
    const res = await engine.request('PUT', archiveUrl(id, '/tmp'), { body: await makeTar([{ name: 'to-secret', content: 'overwritten?' }]) });
    assert.equal(res.status, 200);
    assert.equal(readFileSync(secret, 'utf8'), SECRET_TEXT);
    await engine.dockerOk(['exec', id, 'ln', '-sf', secret, '/tmp/to-secret']);
  });

  test('hard links must point inside', async () => {
    for (const linkname of [secret, '../'.repeat(30) + secret.slice(1), `abs-root${secret}`]) {
      const res = await engine.request('PUT', archiveUrl(id, '/tmp'), { body: await makeTar([{ name: 'hl', type: 'link', linkname }]) });
      assert.equal(res.status, 400, linkname);
    }
    assert.equal(statSync(secret).nlink, 1, 'no link to the host file was made');
    assert.equal(readFileSync(secret, 'utf8'), SECRET_TEXT);
    const ok = await engine.request('PUT', archiveUrl(id, '/tmp'), { body: await makeTar([{ name: 'orig.txt', content: 'o' }, { name: 'hl.txt', type: 'link', linkname: 'orig.txt' }]) });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(statSync(path.join(merged, 'tmp', 'hl.txt')).nlink, 2);
  });

  test('a container swapping a folder for a link to the host during copies gets nothing outside', async () => {
    const outsideDir = path.dirname(secret);
    const racer = (await engine.dockerOk(['run', '-d', 'busybox', 'sh', '-c',
      `mkdir -p /race; while :; do rm -rf /race/d; mkdir /race/d; echo decoy > /race/d/secret.txt; usleep 2000; rm -rf /race/d; ln -s ${outsideDir} /race/d; usleep 1000; done`])).trim();
    const before = new Set(await fs.readdir(outsideDir));
    // Copies that went through while /race/d was the container's own folder: they show the race was run, not
    // that every copy was refused. How many land depends on timing, so the rounds go on (up to a bound) until
    // one has.
    let ok = 0;
    // A copy caught by the check ends early (an error answer, or a truncated stream): never with host bytes.
    const attempt = (method: string, url: string, body?: Buffer) => engine.request(method, url, { body }).catch(() => undefined);
    const decoy = Buffer.from('decoy');
    let rounds = 0;
    for (; rounds < 150 || (ok === 0 && rounds < 1500); rounds++) {
      const i = rounds;
      const get = await attempt('GET', archiveUrl(racer, '/race/d/secret.txt'));
      assert.ok(!get?.body.includes(Buffer.from(SECRET_TEXT)), `round ${i}: the host file was read`);
      if (get?.status === 200 && get.body.includes(decoy)) ok++;
      const dirGet = await attempt('GET', archiveUrl(racer, '/race/d/'));
      assert.ok(!dirGet?.body.includes(Buffer.from(SECRET_TEXT)), `round ${i}: the host folder was archived`);
      const put = await attempt('PUT', archiveUrl(racer, '/race/d'), await makeTar([{ name: `raced-${i}.txt`, content: 'raced' }]));
      if (put?.status === 200) ok++;
    }
    assert.ok(ok > 0, `some copies went through between swaps (none in ${rounds} rounds)`);
    assert.deepEqual(new Set(await fs.readdir(outsideDir)), before, 'nothing was created in the host folder');
    assert.equal(readFileSync(secret, 'utf8'), SECRET_TEXT);
    await engine.dockerOk(['rm', '-f', racer]);
  });

  test('a malformed tar is a 400', async () => {
    const res = await engine.request('PUT', archiveUrl(id, '/tmp'), { body: Buffer.alloc(1024, 7) });
    assert.equal(res.status, 400, res.text);
  });
});

describe('export and diff', () => {
  test('docker export streams the merged root filesystem and publishes export', async () => {
    const id = await running();
    await engine.dockerOk(['exec', id, 'sh', '-c', 'echo exported > /exported.txt']);
    const out = path.join(engine.root, 'export.tar');
    await engine.dockerOk(['export', '-o', out, id]);
    const files = await readTar(readFileSync(out));
    assert.equal(files.get('exported.txt')?.content, 'exported\n');
    assert.ok(files.has('bin/busybox'));
    assert.ok(files.has('etc/passwd'));
    const events = await engine.dockerOk(['events', '--since', '0', '--until', String(Math.ceil(Date.now() / 1000) + 1), '--filter', `container=${id}`, '--filter', 'event=export', '--format', '{{.Action}}']);
    assert.equal(events.trim(), 'export');
  });

  test('export of a stopped container', async () => {
    const id = (await engine.dockerOk(['create', 'busybox', 'true'])).trim();
    const res = await engine.request('GET', `/containers/${id}/export`);
    assert.equal(res.status, 200);
    assert.ok((await readTar(res.body)).has('bin/busybox'));
    assert.equal(mergedMounted(id), false);
    assert.equal((await engine.request('GET', '/containers/nope/export')).status, 404);
  });

  test('an export that meets the removal of its container answers the tar or 404, never 500', async () => {
    for (let i = 0; i < 40; i++) {
      const created = await engine.request('POST', '/containers/create', { body: { Image: 'busybox', Cmd: ['true'] } });
      assert.equal(created.status, 201, created.text);
      const id = created.json().Id;
      // Sent together: the export may find the container or not, and the removal may land between its look-up
      // and its turn at the container.
      // A tar already under way may be cut by the removal (the connection ends without its end).
      const [exported, removed] = await Promise.all([
        engine.request('GET', `/containers/${id}/export`).catch((err: NodeJS.ErrnoException) => {
          if (err.code !== 'ECONNRESET') throw err;
          return undefined;
        }),
        engine.request('DELETE', `/containers/${id}`),
      ]);
      assert.equal(removed.status, 204, removed.text);
      if (!exported) continue;
      assert.ok(exported.status === 200 || exported.status === 404, `export: ${exported.status} ${exported.text.slice(0, 300)}`);
      if (exported.status === 404) assert.match(exported.json().message, /No such container/);
    }
  });

  test('docker diff lists added, changed and deleted paths in order', async () => {
    const id = (await engine.dockerOk(['run', '-d', 'busybox', 'sh', '-c', 'mkdir /newdir && echo x > /newdir/f && echo y >> /etc/group && rm /etc/passwd && sleep 600'])).trim();
    let out = '';
    for (let i = 0; i < 50 && !out.includes('/newdir/f'); i++) {
      out = await engine.dockerOk(['diff', id]);
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.deepEqual(out.trim().split('\n'), ['C /etc', 'C /etc/group', 'D /etc/passwd', 'A /newdir', 'A /newdir/f']);
    const json = (await engine.request('GET', `/containers/${id}/changes`)).json();
    assert.deepEqual(json[0], { Path: '/etc', Kind: 0 });
    assert.deepEqual(json[2], { Path: '/etc/passwd', Kind: 2 });
    assert.deepEqual(json[3], { Path: '/newdir', Kind: 1 });
    for (const v of ['1.25', '1.41', '1.53']) {
      await expectConforms(v, 'get', '/containers/{id}/changes', 200, (await engine.request('GET', `/v${v}/containers/${id}/changes`)).json());
    }
  });
});
