/**
 * HostConfig.Init (`docker run --init`) with a real daemon, crun and the docker CLI: the init binary (tini)
 * runs as PID 1 with the command as its child, forwards the stop signal, reaps orphans, leaves inspect's
 * Path/Args alone and shows in /info and /version; a daemon whose --init-path is wrong refuses to start
 * such containers with a clear error and keeps running the others.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eventually, startEngine, type Engine } from './harness.js';

interface Proc {
  pid: number;
  ppid: number;
  stat: string;
  args: string;
}

/** Parses `ps -o pid,ppid,stat,args` from busybox. */
function parsePs(out: string): Proc[] {
  return out
    .trim()
    .split('\n')
    .slice(1)
    .map((line) => {
      const m = /^\s*(\d+)\s+(\d+)\s+(\S+)\s+(.*)$/.exec(line);
      assert.ok(m, `unexpected ps line ${JSON.stringify(line)}`);
      return { pid: Number(m[1]), ppid: Number(m[2]), stat: m[3]!, args: m[4]!.trim() };
    });
}

const PS = ['ps', '-o', 'pid,ppid,stat,args'];
/** A shell that leaves an orphan (its subshell's `sleep 1` outlives the subshell) and then becomes `sleep 300`. */
const ORPHAN_MAKER = ['sh', '-c', '(sleep 1 &); exec sleep 300'];

describe('HostConfig.Init', () => {
  let engine: Engine;

  before(async () => {
    engine = await startEngine();
    await engine.loadBusybox();
  });

  after(async () => {
    await engine?.cleanup();
  });

  test('with --init, PID 1 is docker-init and the command is its child', async () => {
    const procs = parsePs(await engine.dockerOk(['run', '--rm', '--init', 'busybox', ...PS]));
    const init = procs.find((p) => p.pid === 1);
    assert.ok(init, `no PID 1 in ${JSON.stringify(procs)}`);
    assert.equal(init.args, `/sbin/docker-init -- ${PS.join(' ')}`);
    const ps = procs.find((p) => p.args === PS.join(' '));
    assert.ok(ps, `the command is not running: ${JSON.stringify(procs)}`);
    assert.equal(ps.ppid, 1);
    assert.notEqual(ps.pid, 1);
  });

  test('without --init (and with --init=false) PID 1 is the command', async () => {
    for (const flags of [[], ['--init=false']]) {
      const procs = parsePs(await engine.dockerOk(['run', '--rm', ...flags, 'busybox', ...PS]));
      assert.equal(procs.find((p) => p.pid === 1)?.args, PS.join(' '), JSON.stringify(procs));
      assert.ok(!procs.some((p) => p.args.includes('docker-init')));
    }
  });

  test('inspect keeps the command as Path and Args; HostConfig.Init is true', async () => {
    await engine.dockerOk(['run', '-d', '--name', 'init-inspect', '--init', 'busybox', 'sleep', '300']);
    try {
      const [c] = JSON.parse(await engine.dockerOk(['inspect', 'init-inspect']));
      assert.equal(c.Path, 'sleep');
      assert.deepEqual(c.Args, ['300']);
      assert.equal(c.HostConfig.Init, true);
      // The binary is mounted read-only: the container cannot replace it.
      const write = await engine.docker(['exec', 'init-inspect', 'sh', '-c', 'echo x > /sbin/docker-init']);
      assert.notEqual(write.code, 0);
      assert.match(write.stderr, /Read-only file system/);
    } finally {
      await engine.docker(['rm', '-f', 'init-inspect']);
    }
  });

  test('docker stop of an --init sleep ends it by SIGTERM (exit 143): tini forwards the signal', async () => {
    await engine.dockerOk(['run', '-d', '--name', 'init-stop', '--init', 'busybox', 'sleep', '300']);
    try {
      // A long grace period: were the signal not forwarded, the stop would end in SIGKILL (137).
      await engine.dockerOk(['stop', '-t', '120', 'init-stop'], { timeoutMs: 180_000 });
      const [c] = JSON.parse(await engine.dockerOk(['inspect', 'init-stop']));
      assert.equal(c.State.ExitCode, 143);
    } finally {
      await engine.docker(['rm', '-f', 'init-stop']);
    }
  });

  test('an orphan is reaped under --init, and stays a zombie when the command is PID 1', async () => {
    await engine.dockerOk(['run', '-d', '--name', 'init-reap', '--init', 'busybox', ...ORPHAN_MAKER]);
    await engine.dockerOk(['run', '-d', '--name', 'noinit-reap', 'busybox', ...ORPHAN_MAKER]);
    try {
      // Without init, PID 1 (`sleep 300`) never waits: the orphaned sleep ends and stays a zombie.
      await eventually(async () => {
        const procs = parsePs(await engine.dockerOk(['exec', 'noinit-reap', ...PS]));
        assert.ok(procs.some((p) => p.stat.startsWith('Z')), `no zombie yet: ${JSON.stringify(procs)}`);
        return true;
      });
      // With init, the orphan's end is reaped: only docker-init, `sleep 300` and the exec's ps remain.
      await eventually(async () => {
        const procs = parsePs(await engine.dockerOk(['exec', 'init-reap', ...PS]));
        assert.deepEqual(
          procs.map((p) => p.args).sort(),
          ['/sbin/docker-init -- sh -c (sleep 1 &); exec sleep 300', PS.join(' '), 'sleep 300'].sort(),
        );
        assert.ok(!procs.some((p) => p.stat.startsWith('Z')), JSON.stringify(procs));
        return true;
      });
    } finally {
      await engine.docker(['rm', '-f', 'init-reap', 'noinit-reap']);
    }
  });

  test('exec into an --init container runs beside the init', async () => {
    await engine.dockerOk(['run', '-d', '--name', 'init-exec', '--init', 'busybox', 'sleep', '300']);
    try {
      const procs = parsePs(await engine.dockerOk(['exec', 'init-exec', ...PS]));
      assert.equal(procs.find((p) => p.pid === 1)?.args, '/sbin/docker-init -- sleep 300');
      assert.equal(procs.find((p) => p.args === 'sleep 300')?.ppid, 1);
      assert.equal(await engine.dockerOk(['exec', 'init-exec', 'echo', 'hello']), 'hello\n');
    } finally {
      await engine.docker(['rm', '-f', 'init-exec']);
    }
  });

  test('/info names the init binary and /version lists it as a component', async () => {
    const info = (await engine.request('GET', '/v1.53/info')).json();
    assert.equal(info.InitBinary, 'docker-init');
    assert.equal(typeof info.InitCommit.ID, 'string');
    assert.notEqual(info.InitCommit.ID, 'N/A');
    const version = (await engine.request('GET', '/v1.53/version')).json();
    const init = version.Components.find((c: { Name: string }) => c.Name === 'docker-init');
    assert.ok(init, JSON.stringify(version.Components));
    assert.match(init.Version, /^\d+\.\d+\.\d+/);
  });
});

describe('HostConfig.Init with a missing init binary', () => {
  let engine: Engine;

  before(async () => {
    engine = await startEngine({ args: ['--init-path', '/nonexistent/docker-init'] });
    await engine.loadBusybox();
  });

  after(async () => {
    await engine?.cleanup();
  });

  test('a start with --init answers a clear 500 naming the binary; other containers still run', async () => {
    const run = await engine.docker(['run', '--name', 'no-init', '--init', 'busybox', 'true']);
    assert.notEqual(run.code, 0);
    assert.match(run.stderr, /init.*\/nonexistent\/docker-init.*--init-path/);
    // Created, never started: a start through the API gives the same error, as a 500.
    const start = await engine.request('POST', '/v1.53/containers/no-init/start');
    assert.equal(start.status, 500);
    assert.match(start.json().message, /\/nonexistent\/docker-init/);
    const [c] = JSON.parse(await engine.dockerOk(['inspect', 'no-init']));
    assert.equal(c.State.Status, 'created');
    assert.equal(await engine.dockerOk(['run', '--rm', 'busybox', 'echo', 'still serving']), 'still serving\n');
    const info = (await engine.request('GET', '/v1.53/info')).json();
    assert.equal(info.InitBinary, '/nonexistent/docker-init');
    assert.equal(info.InitCommit.ID, 'N/A');
  });
});
