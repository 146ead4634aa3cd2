/**
 * The Linux container runtime with real conmon and crun/runc, as root: logs, exit codes, signals, attach
 * with stdin, tty resize, survival of the daemon's object, and a cleanup that leaves nothing behind.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { LinuxContainerRuntime } from '../src/host/linux/runtime/runtime.js';
import { ContainerCommandError } from '../src/host/linux/runtime/errors.js';
import { attachUsesAddon } from '../src/host/linux/runtime/attach.js';
import { mountsUnder } from '../src/host/linux/runtime/rootfs.js';
import type { ContainerIO, LogRecord } from '../src/host/host.js';
import { makeSandbox, minimalSpec, readUntil, type RuntimeSandbox } from './runtime-support.js';

const preferred = (process.env.BERTH_TEST_RUNTIME as 'crun' | 'runc' | undefined) ?? 'crun';
const canRun = process.getuid?.() === 0 && existsSync('/bin/busybox') && existsSync('/usr/bin/conmon');

let counter = 0;
const newId = () => `${process.pid.toString(16)}${(counter++).toString(16).padStart(4, '0')}`.padEnd(64, 'a');

async function collectLog(rt: LinuxContainerRuntime, logPath: string): Promise<LogRecord[]> {
  const out: LogRecord[] = [];
  for await (const rec of rt.readLog(logPath, { follow: false, signal: new AbortController().signal })) out.push(rec);
  return out;
}

describe('linux container runtime (conmon + OCI runtime)', { skip: !canRun && 'needs root, /bin/busybox and conmon' }, () => {
  let box: RuntimeSandbox;
  let rt: LinuxContainerRuntime;

  before(() => {
    box = makeSandbox();
    rt = new LinuxContainerRuntime({ dataRoot: box.dataRoot, execRoot: box.execRoot, runtime: preferred });
  });
  after(() => {
    rt?.close();
    box?.cleanup();
  });

  async function run(args: string[], io: Partial<ContainerIO> = {}, opts: { tty?: boolean } = {}) {
    const id = newId();
    await rt.mountRootfs(id, [box.layer]);
    const logPath = path.join(box.root, `${id.slice(0, 12)}.log`);
    const fullIo: ContainerIO = { tty: false, openStdin: false, stdinOnce: false, logPath, ...io };
    const { pid } = await rt.start(id, minimalSpec(args, { tty: opts.tty ?? fullIo.tty }), fullIo);
    return { id, pid, logPath };
  }

  async function remove(id: string) {
    await rt.cleanup(id);
    await rt.removeContainerFiles(id);
  }

  test('output reaches the log and the exit code is the process exit status', async () => {
    const { id, pid, logPath } = await run(['sh', '-c', 'echo hello; echo oops >&2; printf partial; exit 3']);
    assert.ok(pid > 0);
    const exit = await rt.waitExit(id);
    assert.equal(exit.exitCode, 3);
    assert.equal(exit.oomKilled, false);
    assert.ok(exit.finishedAtNano > BigInt(Date.now() - 60_000) * 1_000_000n);
    const records = await collectLog(rt, logPath);
    const stdout = records.filter((r) => r.stream === 'stdout').map((r) => r.data.toString() + (r.complete ? '\n' : '')).join('');
    const stderr = records.filter((r) => r.stream === 'stderr').map((r) => r.data.toString() + (r.complete ? '\n' : '')).join('');
    assert.equal(stdout, 'hello\npartial');
    assert.equal(stderr, 'oops\n');
    assert.equal(records.find((r) => r.data.toString() === 'partial')?.complete, false);
    assert.ok(records[0].timeNano > 0n);
    assert.equal((await rt.isRunning(id)).running, false);
    await remove(id);
  });

  test('death by SIGKILL gives exit code 137', async () => {
    const { id } = await run(['sleep', '1000']);
    assert.equal((await rt.isRunning(id)).running, true);
    await rt.signal(id, 9);
    const exit = await rt.waitExit(id);
    assert.equal(exit.exitCode, 137);
    await remove(id);
  });

  test('a container killed by the OOM killer reports oomKilled', async () => {
    const id = newId();
    await rt.mountRootfs(id, [box.layer]);
    const spec = minimalSpec(['sh', '-c', 'x=a; while true; do x=$x$x; done']) as { linux: Record<string, unknown> };
    spec.linux.resources = { memory: { limit: 16 << 20, swap: 16 << 20 } };
    spec.linux.cgroupsPath = `/berth-runtime-test-${id.slice(0, 12)}`;
    await rt.start(id, spec, { tty: false, openStdin: false, stdinOnce: false, logPath: path.join(box.root, 'oom.log') });
    const exit = await rt.waitExit(id);
    assert.equal(exit.exitCode, 137);
    assert.equal(exit.oomKilled, true);
    await remove(id);
  });

  test('a missing executable is a command error with exit code 127', async () => {
    const id = newId();
    await rt.mountRootfs(id, [box.layer]);
    const io: ContainerIO = { tty: false, openStdin: false, stdinOnce: false, logPath: path.join(box.root, 'missing.log') };
    await assert.rejects(rt.start(id, minimalSpec(['/bin/no-such-command']), io), (err: unknown) => {
      assert.ok(err instanceof ContainerCommandError, `expected ContainerCommandError, got ${String(err)}`);
      assert.equal(err.exitCode, 127);
      assert.match(err.message, /no-such-command/);
      return true;
    });
    await remove(id);
    assert.deepEqual(await rt.listRuntimeContainers(), []);
  });

  test('the afterCreate hook runs with the pid before the process starts', async () => {
    const id = newId();
    await rt.mountRootfs(id, [box.layer]);
    const logPath = path.join(box.root, 'hook.log');
    let hookPid = 0;
    let logAtHook = '';
    const { pid } = await rt.start(id, minimalSpec(['echo', 'started']), { tty: false, openStdin: false, stdinOnce: false, logPath }, {
      async afterCreate(p) {
        hookPid = p;
        await new Promise((r) => setTimeout(r, 100));
        logAtHook = await fs.readFile(logPath, 'utf8').catch(() => '');
      },
    });
    assert.equal(hookPid, pid);
    assert.equal(logAtHook, '', 'the process must not run before the hook returned');
    assert.equal((await rt.waitExit(id)).exitCode, 0);
    assert.match(await fs.readFile(logPath, 'utf8'), /stdout F started\n/);
    await remove(id);
  });

  test('a failing afterCreate hook aborts the start and leaves no runtime state', async () => {
    const id = newId();
    await rt.mountRootfs(id, [box.layer]);
    const io: ContainerIO = { tty: false, openStdin: false, stdinOnce: false, logPath: path.join(box.root, 'hookfail.log') };
    await assert.rejects(
      rt.start(id, minimalSpec(['sleep', '1000']), io, { afterCreate: async () => Promise.reject(new Error('no network')) }),
      /no network/,
    );
    assert.equal((await rt.isRunning(id)).running, false);
    await rt.cleanup(id);
    assert.ok(!(await rt.listRuntimeContainers()).includes(id));
    await rt.removeContainerFiles(id);
  });

  test('attach receives output and delivers stdin; closing stdin ends cat (StdinOnce)', async () => {
    const { id } = await run(['cat'], { openStdin: true, stdinOnce: true });
    const streams = await rt.attach(id);
    streams.input.write('hello through stdin\n');
    const text = await readUntil(streams.output, (t) => t.includes('hello through stdin\n'));
    assert.equal(text, 'hello through stdin\n');
    streams.input.end();
    const exit = await rt.waitExit(id);
    assert.equal(exit.exitCode, 0);
    streams.close();
    await remove(id);
  });

  test('stdin stays open across detach without StdinOnce', async () => {
    const { id } = await run(['cat'], { openStdin: true, stdinOnce: false });
    const first = await rt.attach(id);
    first.input.write('one\n');
    await readUntil(first.output, (t) => t.includes('one\n'));
    first.input.end();
    first.close();
    await new Promise((r) => setTimeout(r, 200));
    assert.equal((await rt.isRunning(id)).running, true, 'cat must keep running after the client left');
    const second = await rt.attach(id);
    second.input.write('two\n');
    await readUntil(second.output, (t) => t.includes('two\n'));
    second.close();
    // SIGTERM would be ignored: cat is the namespace's init and has no handler for it.
    await rt.signal(id, 9);
    assert.equal((await rt.waitExit(id)).exitCode, 137);
    await remove(id);
  });

  test('an attach whose output nobody reads holds the output back instead of buffering it without bound', async () => {
    const { id } = await run(['busybox', 'yes', 'flood'], { noLog: true });
    const streams = await rt.attach(id);
    await new Promise((r) => setTimeout(r, 500));
    if (attachUsesAddon()) {
      // Backpressure: the socket stopped reading, conmon (and the container) wait.
      assert.ok(streams.output.readableLength <= 2048, `buffered ${streams.output.readableLength} packets`);
      const text = await readUntil(streams.output, (t) => t.length > 100_000);
      assert.match(text, /(flood\n){1000}/, "the output flows again once read (it may start mid-line)");
    } else {
      // The fallback binding cannot pause (past 8192 buffered packets it detaches): only check the flow.
      const text = await readUntil(streams.output, (t) => t.length > 100_000);
      assert.match(text, /(flood\n){1000}/);
    }
    streams.close();
    assert.equal((await rt.isRunning(id)).running, true, 'the container is not affected');
    // Closing from inside a data handler, while packets keep coming, must be safe too.
    for (let i = 0; i < 5; i++) {
      const again = await rt.attach(id);
      await new Promise<void>((resolve) => {
        again.output.once('data', () => {
          again.close();
          resolve();
        });
      });
    }
    await new Promise((r) => setTimeout(r, 100));
    await rt.signal(id, 9);
    assert.equal((await rt.waitExit(id)).exitCode, 137);
    await remove(id);
  });

  test('tty mode: output through the terminal and resize seen by stty', async () => {
    const { id } = await run(['sh'], { tty: true, openStdin: true, stdinOnce: false });
    const streams = await rt.attach(id);
    await rt.resize(id, 33, 101);
    streams.input.write('stty size\n');
    await readUntil(streams.output, (t) => t.includes('33 101'));
    await rt.resize(id, 20, 60);
    streams.input.write('stty size; exit 4\n');
    await readUntil(streams.output, (t) => t.includes('20 60'));
    assert.equal((await rt.waitExit(id)).exitCode, 4);
    streams.close();
    await remove(id);
  });

  test('a container outlives the runtime object; a new instance finds it and waits for its exit', async () => {
    const { id, pid } = await run(['sh', '-c', 'while [ ! -e /tmp/stop ]; do sleep 0.1; done; echo done; exit 5']);
    rt.close();
    const second = new LinuxContainerRuntime({ dataRoot: box.dataRoot, execRoot: box.execRoot, runtime: preferred });
    try {
      assert.deepEqual(await second.isRunning(id), { running: true, pid });
      assert.ok((await second.listRuntimeContainers()).includes(id));
      const waiting = second.waitExit(id);
      await fs.writeFile(path.join(second.layout.merged(id), 'tmp', 'stop'), '');
      const exit = await waiting;
      assert.equal(exit.exitCode, 5);
      // A third instance, after the exit, still reads it from conmon's exit file.
      const third = new LinuxContainerRuntime({ dataRoot: box.dataRoot, execRoot: box.execRoot, runtime: preferred });
      assert.equal((await third.waitExit(id)).exitCode, 5);
      third.close();
      await second.cleanup(id);
      await second.removeContainerFiles(id);
    } finally {
      second.close();
      rt = new LinuxContainerRuntime({ dataRoot: box.dataRoot, execRoot: box.execRoot, runtime: preferred });
    }
  });

  test('layers are given bottom-first: the upper one wins, and writes stay in the container', async () => {
    const upperLayer = path.join(box.root, 'layer-top');
    await fs.mkdir(path.join(upperLayer, 'etc'), { recursive: true });
    await fs.writeFile(path.join(upperLayer, 'etc', 'motd'), 'from the top layer\n');
    await fs.writeFile(path.join(box.layer, 'etc', 'motd'), 'from the bottom layer\n');
    const id = newId();
    const merged = await rt.mountRootfs(id, [box.layer, upperLayer]);
    assert.equal(await fs.readFile(path.join(merged, 'etc', 'motd'), 'utf8'), 'from the top layer\n');
    assert.equal((await rt.readFileFromLayers([box.layer, upperLayer], '/etc/motd'))?.toString(), 'from the top layer\n');
    const logPath = path.join(box.root, 'layers.log');
    await rt.start(id, minimalSpec(['sh', '-c', 'cat /etc/motd; echo changed > /etc/motd; rm /bin/true']), { tty: false, openStdin: false, stdinOnce: false, logPath });
    assert.equal((await rt.waitExit(id)).exitCode, 0);
    assert.match(await fs.readFile(logPath, 'utf8'), /stdout F from the top layer\n/);
    assert.equal(await fs.readFile(path.join(upperLayer, 'etc', 'motd'), 'utf8'), 'from the top layer\n', 'layers are never written');
    assert.ok(existsSync(path.join(box.layer, 'bin', 'true')));
    assert.equal(await fs.readFile(path.join(merged, 'etc', 'motd'), 'utf8'), 'changed\n');
    // Mounting again is a no-op; unmount and mount again keeps the container's writes.
    assert.equal(await rt.mountRootfs(id, [box.layer, upperLayer]), merged);
    await rt.cleanup(id);
    await rt.unmountRootfs(id);
    assert.equal(existsSync(path.join(merged, 'etc')), false);
    await rt.mountRootfs(id, [box.layer, upperLayer]);
    assert.equal(await fs.readFile(path.join(merged, 'etc', 'motd'), 'utf8'), 'changed\n');
    assert.equal(existsSync(path.join(merged, 'bin', 'true')), false);
    await rt.removeContainerFiles(id);
    await fs.rm(path.join(box.layer, 'etc', 'motd'));
  });

  test('the same container starts again right after its exit, with a working attach socket', async () => {
    const id = newId();
    await rt.mountRootfs(id, [box.layer]);
    const logPath = path.join(box.root, 'again.log');
    for (let round = 0; round < 3; round++) {
      await rt.start(id, minimalSpec(['true']), { tty: false, openStdin: false, stdinOnce: false, logPath });
      assert.equal((await rt.waitExit(id)).exitCode, 0);
      await rt.cleanup(id);
    }
    await rt.start(id, minimalSpec(['cat']), { tty: false, openStdin: true, stdinOnce: true, logPath });
    const streams = await rt.attach(id);
    streams.input.write('again\n');
    await readUntil(streams.output, (t) => t.includes('again\n'));
    streams.input.end();
    assert.equal((await rt.waitExit(id)).exitCode, 0);
    streams.close();
    await remove(id);
  });

  test('exec runs a process in the container: output, stdin, exit code, tty resize, missing command', async () => {
    const { id } = await run(['sleep', '1000']);
    const proc = (args: string[]) => ({ args, env: ['PATH=/bin'], cwd: '/', user: { uid: 0, gid: 0 } });
    // The short sleep before exit: conmon's exec mode can drop output written in the instant before the
    // process exits (seen about once in 40 runs); this test is about the plumbing, not that race.
    const session = await rt.exec(id, `e1${id.slice(0, 20)}`, proc(['sh', '-c', 'echo out; echo err >&2; read x; echo got $x; sleep 0.1; exit 6']), { tty: false, openStdin: true });
    assert.ok(session.pid > 0);
    const seen: string[] = [];
    session.streams.output.on('data', (r: { stream: string; data: Buffer }) => seen.push(`${r.stream}:${r.data.toString()}`));
    session.streams.input.write('hello\n');
    assert.equal(await session.exit, 6);
    assert.deepEqual(seen.filter((x) => x.startsWith('stderr')), ['stderr:err\n']);
    assert.equal(seen.filter((x) => x.startsWith('stdout')).map((x) => x.slice(7)).join(''), 'out\ngot hello\n');
    session.streams.close();
    await rt.releaseExec(`e1${id.slice(0, 20)}`);

    const tty = await rt.exec(id, `e2${id.slice(0, 20)}`, proc(['sh']), { tty: true, openStdin: true });
    await tty.resize(25, 77);
    tty.streams.input.write('stty size; exit 2\n');
    await readUntil(tty.streams.output, (t) => t.includes('25 77'));
    assert.equal(await tty.exit, 2);
    tty.streams.close();
    await rt.releaseExec(`e2${id.slice(0, 20)}`);

    await assert.rejects(rt.exec(id, `e3${id.slice(0, 20)}`, proc(['no-such-tool']), { tty: false, openStdin: false }), (err: unknown) => {
      assert.ok(err instanceof ContainerCommandError);
      assert.equal(err.exitCode, 127);
      return true;
    });
    assert.equal((await rt.isRunning(id)).running, true, 'the container keeps running');
    await rt.signal(id, 9);
    await rt.waitExit(id);
    await assert.rejects(rt.exec(id, `e4${id.slice(0, 20)}`, proc(['true']), { tty: false, openStdin: false }), /not running/);
    await remove(id);
    assert.deepEqual(await fs.readdir(path.join(box.execRoot, 'execs')), []);
  });

  test('cleanup and removal leave no mount, runtime state or files', async () => {
    const { id } = await run(['true']);
    assert.equal((await rt.waitExit(id)).exitCode, 0);
    assert.ok((await rt.listRuntimeContainers()).includes(id));
    await rt.cleanup(id);
    assert.ok(!(await rt.listRuntimeContainers()).includes(id));
    await rt.removeContainerFiles(id);
    assert.deepEqual(await mountsUnder(path.join(box.dataRoot, 'runtime')), []);
    assert.equal(existsSync(rt.layout.containerDir(id)), false);
    assert.equal(existsSync(rt.layout.exitFile(id)), false);
    assert.equal(existsSync(rt.layout.conmonFiles(id)), false);
  });
});
