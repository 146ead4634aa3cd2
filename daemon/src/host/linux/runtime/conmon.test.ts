import { test } from 'node:test';
import assert from 'node:assert/strict';
import { conmonArgs, parseSyncMessage, type ConmonOptions } from './conmon.js';
import { execConmonArgs } from './exec.js';
import { runtimeStartError, ContainerCommandError } from './errors.js';
import { RuntimeLayout, UNIX_PATH_MAX, checkId } from './layout.js';

const base: ConmonOptions = {
  id: 'c'.repeat(64),
  socketKey: 'c'.repeat(16),
  runtimePath: '/usr/bin/crun',
  runtimeState: '/run/berth/runtime',
  bundle: '/var/lib/berth/runtime/ccc',
  containerPidFile: '/run/berth/conmon/ccc/pid',
  conmonPidFile: '/run/berth/conmon/ccc/conmon.pid',
  exitDir: '/run/berth/exits',
  persistDir: '/var/lib/berth/runtime/ccc/persist',
  socketDir: '/run/berth/sock',
  logPath: '/var/lib/berth/containers/ccc/ccc-json.log',
  tty: false,
  openStdin: false,
  stdinOnce: false,
};

function flagValue(args: string[], flag: string): string | undefined {
  const i = args.indexOf(flag);
  return i < 0 ? undefined : args[i + 1];
}

test('conmon args name the container, runtime, bundle, files and the runtime root', () => {
  const args = conmonArgs(base);
  assert.equal(flagValue(args, '--api-version'), '1');
  assert.equal(flagValue(args, '-c'), base.id);
  assert.equal(flagValue(args, '-u'), base.socketKey);
  assert.equal(flagValue(args, '-r'), '/usr/bin/crun');
  assert.equal(flagValue(args, '-b'), base.bundle);
  assert.equal(flagValue(args, '-p'), base.containerPidFile);
  assert.equal(flagValue(args, '--conmon-pidfile'), base.conmonPidFile);
  assert.equal(flagValue(args, '--exit-dir'), '/run/berth/exits');
  assert.equal(flagValue(args, '--persist-dir'), base.persistDir);
  assert.equal(flagValue(args, '--socket-dir-path'), '/run/berth/sock');
  assert.equal(flagValue(args, '-l'), `k8s-file:${base.logPath}`);
  assert.equal(flagValue(args, '--runtime-arg'), '--root=/run/berth/runtime');
  for (const flag of ['-t', '-i', '--leave-stdin-open']) assert.ok(!args.includes(flag), `${flag} without tty or stdin`);
  assert.ok(args.includes('--no-sync-log'), 'the log is not synced at exit');
});

test('conmon args for tty, open stdin and StdinOnce', () => {
  assert.ok(conmonArgs({ ...base, tty: true }).includes('-t'));
  const keepOpen = conmonArgs({ ...base, openStdin: true, stdinOnce: false });
  assert.ok(keepOpen.includes('-i') && keepOpen.includes('--leave-stdin-open'));
  const once = conmonArgs({ ...base, openStdin: true, stdinOnce: true });
  assert.ok(once.includes('-i') && !once.includes('--leave-stdin-open'));
  // With a TTY, the end of an attached client never closes the container's stdin (docker run -it, detach).
  const onceTty = conmonArgs({ ...base, tty: true, openStdin: true, stdinOnce: true });
  assert.ok(onceTty.includes('-i') && onceTty.includes('--leave-stdin-open'));
  assert.equal(flagValue(conmonArgs({ ...base, logPath: undefined }), '-l'), 'none:');
});

test('sync messages: a pid, or the runtime error text', () => {
  assert.deepEqual(parseSyncMessage('{"data": 4242}'), { pid: 4242 });
  assert.deepEqual(parseSyncMessage('{"data": -1, "message": "exec: \\"nope\\": executable file not found in $PATH\\n"}'), {
    error: 'exec: "nope": executable file not found in $PATH',
  });
  assert.match((parseSyncMessage('{"data": -1}') as { error: string }).error, /failed to create/);
  assert.match((parseSyncMessage('not json') as { error: string }).error, /unreadable/);
});

test('runtime errors map to command errors with Docker exit codes', () => {
  const notFound = runtimeStartError('exec: "nope": executable file not found in $PATH');
  assert.ok(notFound instanceof ContainerCommandError && notFound.exitCode === 127);
  const denied = runtimeStartError('exec /etc/passwd: permission denied');
  assert.ok(denied instanceof ContainerCommandError && denied.exitCode === 126);
  const other = runtimeStartError('cgroups in hybrid mode not supported');
  assert.ok(!(other instanceof ContainerCommandError));
});

test('layout keeps the attach socket short and refuses ids that could climb out of their folder', () => {
  const layout = new RuntimeLayout('/var/lib/berth', '/run/berth');
  const id = 'a'.repeat(64);
  assert.equal(layout.attachSocket(id), `/run/berth/sock/${'a'.repeat(16)}/attach`);
  assert.ok(layout.attachSocket(id).length < UNIX_PATH_MAX);
  assert.equal(layout.exitFile(id), `/run/berth/exits/${id}`);
  for (const bad of ['', '..', '../x', 'a/b', '.hidden', 'a b']) assert.throws(() => checkId(bad), /invalid container id/);
});

test('exec sessions run conmon in exec mode, attached, without a log, with their own exit dir', () => {
  const env = { conmonPath: '/usr/bin/conmon', runtimePath: '/usr/bin/crun', runtimeState: '/run/berth/runtime', execDir: '/run/berth/execs', socketDir: '/run/berth/sock' };
  const args = conmonArgs({ ...base });
  assert.ok(!args.includes('-e'));
  const exec = execConmonArgs(env, { containerId: base.id, execId: 'e'.repeat(64), process: {}, tty: true, openStdin: true }, '/run/berth/execs/eeee', 'eeee');
  assert.equal(flagValue(exec, '-c'), base.id);
  assert.equal(flagValue(exec, '-u'), 'eeee');
  assert.equal(flagValue(exec, '--exec-process-spec'), '/run/berth/execs/eeee/process.json');
  assert.equal(flagValue(exec, '--exit-dir'), '/run/berth/execs/eeee/exits');
  assert.equal(flagValue(exec, '-l'), 'none:');
  for (const flag of ['-e', '--exec-attach', '-t', '-i']) assert.ok(exec.includes(flag), flag);
});
