/**
 * Seccomp with a real daemon, crun (and runc) and the docker CLI: the default filter on every container that
 * is not privileged, `--security-opt seccomp=unconfined`, custom profiles read by the CLI from a file, execs
 * under the container's filter, bad profiles refused at create, and crun reusing a compiled filter for the
 * next container with the same profile.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startEngine, type Engine } from './harness.js';

const NO_MKDIR = { defaultAction: 'SCMP_ACT_ALLOW', syscalls: [{ names: ['mkdir', 'mkdirat'], action: 'SCMP_ACT_ERRNO', errnoRet: 1 }] };

function seccompMode(status: string): string {
  const m = /^Seccomp:\s*(\d)/m.exec(status);
  assert.ok(m, `no Seccomp line in ${JSON.stringify(status)}`);
  return m[1];
}

/** The spec crun keeps for a created container (its state root is in the exec root). */
function runtimeSpec(engine: Engine, id: string): { annotations?: Record<string, string>; linux?: { seccomp?: unknown } } {
  return JSON.parse(readFileSync(path.join(engine.execRoot, 'runtime', id, 'config.json'), 'utf8'));
}

describe('seccomp (crun)', () => {
  let engine: Engine;
  let noMkdirFile: string;

  before(async () => {
    engine = await startEngine();
    await engine.loadBusybox();
    noMkdirFile = path.join(engine.root, 'no-mkdir.json');
    writeFileSync(noMkdirFile, JSON.stringify(NO_MKDIR, null, 2));
  });

  after(async () => {
    await engine?.cleanup();
  });

  test('a container runs under the default filter; unconfined and privileged ones under none', async () => {
    assert.equal(seccompMode(await engine.dockerOk(['run', '--rm', 'busybox', 'cat', '/proc/self/status'])), '2');
    assert.equal(seccompMode(await engine.dockerOk(['run', '--rm', '--security-opt', 'seccomp=unconfined', 'busybox', 'cat', '/proc/self/status'])), '0');
    assert.equal(seccompMode(await engine.dockerOk(['run', '--rm', '--security-opt', 'seccomp:unconfined', 'busybox', 'cat', '/proc/self/status'])), '0');
    assert.equal(seccompMode(await engine.dockerOk(['run', '--rm', '--privileged', 'busybox', 'cat', '/proc/self/status'])), '0');
  });

  test('the default filter denies a user namespace, which the capabilities alone allow', async () => {
    const confined = await engine.docker(['run', '--rm', 'busybox', 'unshare', '-U', 'true']);
    assert.notEqual(confined.code, 0);
    assert.match(confined.stderr, /Operation not permitted/);
    const unconfined = await engine.docker(['run', '--rm', '--security-opt', 'seccomp=unconfined', 'busybox', 'unshare', '-U', 'true']);
    assert.equal(unconfined.code, 0, unconfined.stderr);
    // With CAP_SYS_ADMIN the profile lets namespaces be made (the kernel's own checks remain).
    const admin = await engine.docker(['run', '--rm', '--cap-add', 'SYS_ADMIN', 'busybox', 'unshare', '-U', 'true']);
    assert.equal(admin.code, 0, admin.stderr);
    // Ordinary work is untouched: files, a pipe, a child process, sockets.
    const out = await engine.dockerOk(['run', '--rm', 'busybox', 'sh', '-c', 'mkdir -p /a/b && echo hi > /a/b/f && cat /a/b/f | wc -c && (sleep 0.1; echo child) && ps >/dev/null && echo done']);
    assert.match(out, /^3\nchild\ndone\n$/);
  });

  test('a custom profile from a file: mkdir is denied, touch works', async () => {
    const r = await engine.docker(['run', '--rm', '--security-opt', `seccomp=${noMkdirFile}`, 'busybox', 'sh', '-c', 'touch /y && echo touched; mkdir /x']);
    assert.notEqual(r.code, 0);
    assert.match(r.stdout, /touched/);
    assert.match(r.stderr, /mkdir: can't create directory '\/x': Operation not permitted/);
    // The create body carries the profile's JSON, and inspect shows it as given.
    const id = (await engine.dockerOk(['create', '--security-opt', `seccomp=${noMkdirFile}`, 'busybox', 'true'])).trim();
    const [info] = JSON.parse(await engine.dockerOk(['inspect', id]));
    assert.equal(info.HostConfig.SecurityOpt.length, 1);
    assert.deepEqual(JSON.parse(info.HostConfig.SecurityOpt[0].replace(/^seccomp=/, '')), NO_MKDIR);
    await engine.dockerOk(['rm', id]);
  });

  test('docker exec runs under the container\'s filter', async () => {
    const confined = (await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '600'])).trim();
    const custom = (await engine.dockerOk(['run', '-d', '--security-opt', `seccomp=${noMkdirFile}`, 'busybox', 'sleep', '600'])).trim();
    const free = (await engine.dockerOk(['run', '-d', '--security-opt', 'seccomp=unconfined', 'busybox', 'sleep', '600'])).trim();
    try {
      assert.equal(seccompMode(await engine.dockerOk(['exec', confined, 'cat', '/proc/self/status'])), '2');
      // With a terminal (conmon runs the exec) as well as without.
      assert.equal(seccompMode(await engine.dockerOk(['exec', '-t', confined, 'cat', '/proc/self/status'])), '2');
      assert.equal(seccompMode(await engine.dockerOk(['exec', free, 'cat', '/proc/self/status'])), '0');
      const denied = await engine.docker(['exec', custom, 'mkdir', '/x']);
      assert.notEqual(denied.code, 0);
      assert.match(denied.stderr, /Operation not permitted/);
      await engine.dockerOk(['exec', custom, 'touch', '/y']);
    } finally {
      await engine.docker(['rm', '-f', confined, custom, free]);
    }
  });

  test('a bad profile answers 400 at create, naming the problem, and the daemon keeps serving', async () => {
    const create = (SecurityOpt: string[]) => engine.request('POST', '/containers/create', { body: { Image: 'busybox', Cmd: ['true'], HostConfig: { SecurityOpt } } });
    let r = await create(['seccomp={"defaultAction": "SCMP_ACT_ALLOW",']);
    assert.equal(r.status, 400);
    assert.match(r.json().message, /invalid seccomp profile: not valid JSON/);
    r = await create(['seccomp={"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir"],"action":"SCMP_ACT_DENY"}]}']);
    assert.equal(r.status, 400);
    assert.match(r.json().message, /syscalls\[0\]\.action: unknown action "SCMP_ACT_DENY"/);
    r = await create(['selinux=whatever']);
    assert.equal(r.status, 400);
    assert.match(r.json().message, /unknown option "selinux"/);
    // apparmor and labels are accepted (this host runs neither).
    r = await create(['apparmor=unconfined', 'label=disable', 'no-new-privileges']);
    assert.equal(r.status, 201, r.text);
    await engine.request('DELETE', `/containers/${r.json().Id}`);
    // The CLI sends the file's content; a bad action is refused by the daemon.
    const badFile = path.join(engine.root, 'bad-action.json');
    writeFileSync(badFile, JSON.stringify({ defaultAction: 'SCMP_ACT_NOPE' }));
    const cli = await engine.docker(['create', '--security-opt', `seccomp=${badFile}`, 'busybox', 'true']);
    assert.notEqual(cli.code, 0);
    assert.match(cli.stderr, /unknown action "SCMP_ACT_NOPE"/);
    assert.equal((await engine.request('GET', '/_ping')).text, 'OK');
    assert.equal(seccompMode(await engine.dockerOk(['run', '--rm', 'busybox', 'cat', '/proc/self/status'])), '2');
  });

  test('GET /info lists the builtin seccomp profile', async () => {
    const info = (await engine.request('GET', '/info')).json();
    assert.ok(info.SecurityOptions.includes('name=seccomp,profile=builtin'), JSON.stringify(info.SecurityOptions));
  });

  test('crun reuses the compiled filter of an earlier container with the same profile, and it still denies', async () => {
    const first = (await engine.dockerOk(['run', '-d', '--security-opt', `seccomp=${noMkdirFile}`, 'busybox', 'sleep', '600'])).trim();
    const second = (await engine.dockerOk(['run', '-d', '--security-opt', `seccomp=${noMkdirFile}`, 'busybox', 'sleep', '600'])).trim();
    const defaults = [(await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '600'])).trim(), (await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '600'])).trim()];
    try {
      const program = readFileSync(path.join(engine.execRoot, 'runtime', first, 'seccomp.bpf')).toString('base64');
      assert.ok(program.length > 0);
      assert.equal(runtimeSpec(engine, second).annotations?.['run.oci.seccomp_bpf_data'], program);
      // The second container (loaded from the program, not compiled) denies what the profile denies.
      const denied = await engine.docker(['exec', second, 'mkdir', '/x']);
      assert.notEqual(denied.code, 0);
      assert.match(denied.stderr, /Operation not permitted/);
      await engine.dockerOk(['exec', second, 'touch', '/y']);
      assert.equal(seccompMode(await engine.dockerOk(['exec', second, 'cat', '/proc/1/status'])), '2');
      // The default profile: the later container got the program of an earlier one, and still denies.
      const defaultProgram = runtimeSpec(engine, defaults[1]).annotations?.['run.oci.seccomp_bpf_data'];
      assert.equal(defaultProgram, readFileSync(path.join(engine.execRoot, 'runtime', defaults[0], 'seccomp.bpf')).toString('base64'));
      assert.notEqual(defaultProgram, program);
      const userns = await engine.docker(['exec', defaults[1], 'unshare', '-U', 'true']);
      assert.notEqual(userns.code, 0);
      assert.match(userns.stderr, /Operation not permitted/);
      assert.equal(seccompMode(await engine.dockerOk(['exec', defaults[1], 'cat', '/proc/1/status'])), '2');
    } finally {
      await engine.docker(['rm', '-f', first, second, ...defaults]);
    }
  });
});

describe('seccomp (runc)', () => {
  let engine: Engine;

  before(async () => {
    engine = await startEngine({ runtime: 'runc' });
    await engine.loadBusybox();
  });

  after(async () => {
    await engine?.cleanup();
  });

  test('runc applies the default and custom profiles', async () => {
    assert.equal(seccompMode(await engine.dockerOk(['run', '--rm', 'busybox', 'cat', '/proc/self/status'])), '2');
    const userns = await engine.docker(['run', '--rm', 'busybox', 'unshare', '-U', 'true']);
    assert.notEqual(userns.code, 0);
    const file = path.join(engine.root, 'no-mkdir.json');
    writeFileSync(file, JSON.stringify(NO_MKDIR));
    const r = await engine.docker(['run', '--rm', '--security-opt', `seccomp=${file}`, 'busybox', 'sh', '-c', 'touch /y && echo touched; mkdir /x']);
    assert.notEqual(r.code, 0);
    assert.match(r.stdout, /touched/);
    assert.match(r.stderr, /Operation not permitted/);
    assert.equal(seccompMode(await engine.dockerOk(['run', '--rm', '--security-opt', 'seccomp=unconfined', 'busybox', 'cat', '/proc/self/status'])), '0');
  });
});
