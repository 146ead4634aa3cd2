import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { InvalidParameter } from '../../errors.js';
import { DEFAULT_CAPABILITIES } from './ocispec.js';
import { NEVER_ALLOWED, convertProfile, defaultSeccomp, hostArch, parseSecurityOptions, seccompFor, type OciSeccomp } from './seccomp.js';

const amd64 = hostArch('x64');
const arm64 = hostArch('arm64');

/** The rules that allow `name` (any arguments). */
function rulesFor(p: OciSeccomp, name: string) {
  return (p.syscalls ?? []).filter((s) => s.names.includes(name));
}

function allowsFreely(p: OciSeccomp, name: string): boolean {
  return rulesFor(p, name).some((s) => s.action === 'SCMP_ACT_ALLOW' && !s.args);
}

describe('default profile', () => {
  const profile = defaultSeccomp(DEFAULT_CAPABILITIES, amd64);

  test('denies with EPERM by default, for the 64-bit, 32-bit and x32 ABIs', () => {
    assert.equal(profile.defaultAction, 'SCMP_ACT_ERRNO');
    assert.equal(profile.defaultErrnoRet, 1);
    assert.deepEqual(profile.architectures, ['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86', 'SCMP_ARCH_X32']);
    assert.deepEqual(defaultSeccomp(DEFAULT_CAPABILITIES, arm64).architectures, ['SCMP_ARCH_AARCH64', 'SCMP_ARCH_ARM']);
  });

  test('allows ordinary calls', () => {
    for (const name of ['read', 'write', 'openat', 'execve', 'mmap', 'futex', 'socket', 'epoll_wait', 'mkdirat', 'rseq', 'getrandom', 'chroot', '_llseek']) {
      assert.ok(allowsFreely(profile, name), name);
    }
  });

  test('without CAP_SYS_ADMIN: no mount, unshare or setns, clone only without namespace flags, clone3 answers ENOSYS', () => {
    for (const name of ['mount', 'umount2', 'pivot_root', 'unshare', 'setns', 'fsopen', 'sethostname']) assert.equal(rulesFor(profile, name).length, 0, name);
    const clone = rulesFor(profile, 'clone');
    assert.equal(clone.length, 1);
    assert.deepEqual(clone[0].args, [{ index: 0, value: 0x7e020000, valueTwo: 0, op: 'SCMP_CMP_MASKED_EQ' }]);
    assert.deepEqual(rulesFor(profile, 'clone3'), [{ names: ['clone3'], action: 'SCMP_ACT_ERRNO', errnoRet: 38 }]);
  });

  test('CAP_SYS_ADMIN allows mount, unshare and any clone', () => {
    const admin = defaultSeccomp([...DEFAULT_CAPABILITIES, 'CAP_SYS_ADMIN'], amd64);
    for (const name of ['mount', 'umount2', 'pivot_root', 'unshare', 'setns', 'clone', 'clone3']) assert.ok(allowsFreely(admin, name), name);
    assert.ok(!rulesFor(admin, 'clone3').some((s) => s.action === 'SCMP_ACT_ERRNO'));
  });

  test('calls gated by the capability the kernel asks for', () => {
    const gates: Array<[string, string[]]> = [
      ['CAP_SYS_PTRACE', ['process_vm_readv', 'process_vm_writev']],
      ['CAP_SYS_ADMIN', ['bpf', 'perf_event_open']],
      ['CAP_BPF', ['bpf']],
      ['CAP_PERFMON', ['perf_event_open']],
      ['CAP_SYS_MODULE', ['init_module', 'finit_module', 'delete_module']],
      ['CAP_SYS_BOOT', ['reboot']],
      ['CAP_SYS_TIME', ['settimeofday', 'clock_settime']],
      ['CAP_SYS_PACCT', ['acct']],
      ['CAP_SYS_NICE', ['mbind', 'set_mempolicy', 'migrate_pages', 'move_pages']],
    ];
    for (const [cap, names] of gates) {
      const withCap = defaultSeccomp([...DEFAULT_CAPABILITIES, cap], amd64);
      for (const name of names) {
        assert.equal(rulesFor(profile, name).length, 0, `${name} without ${cap}`);
        assert.ok(allowsFreely(withCap, name), `${name} with ${cap}`);
      }
    }
    // Dropping a default capability takes its calls away.
    const noChroot = defaultSeccomp(DEFAULT_CAPABILITIES.filter((c) => c !== 'CAP_SYS_CHROOT'), amd64);
    assert.equal(rulesFor(noChroot, 'chroot').length, 0);
  });

  test('never allows the keyring, userfaultfd, kexec or open_by_handle_at, even with every capability; ptrace without one', () => {
    assert.ok(allowsFreely(profile, 'ptrace'));
    const everything = defaultSeccomp(['CAP_SYS_ADMIN', 'CAP_SYS_BOOT', 'CAP_DAC_READ_SEARCH', 'CAP_PERFMON', 'CAP_BPF', 'CAP_SYS_PTRACE'], amd64);
    for (const name of ['add_key', 'request_key', 'keyctl', 'userfaultfd', 'kexec_load', 'kexec_file_load', 'open_by_handle_at', ...NEVER_ALLOWED]) {
      assert.equal(rulesFor(everything, name).length, 0, name);
    }
  });

  test('personality only with the harmless personas', () => {
    const rules = rulesFor(profile, 'personality');
    assert.deepEqual(rules.map((r) => r.args?.[0].value).sort((a, b) => (a ?? 0) - (b ?? 0)), [0, 8, 0x20000, 0x20008, 0xffffffff]);
    assert.ok(rules.every((r) => r.args?.[0].op === 'SCMP_CMP_EQ'));
  });

  test('no call is both allowed and listed as never allowed, and every name is a plain identifier', () => {
    for (const s of profile.syscalls ?? []) for (const n of s.names) assert.match(n, /^[a-z0-9_]+$/);
    for (const n of NEVER_ALLOWED) assert.equal(rulesFor(profile, n).length, 0, n);
  });

  test('is shared between containers with the same capabilities', () => {
    assert.equal(defaultSeccomp([...DEFAULT_CAPABILITIES].reverse(), amd64), profile);
    assert.throws(() => profile.syscalls![0].names.push('kexec_load'), TypeError);
  });
});

describe('custom profiles', () => {
  test('a Docker-style profile converts to the runtime form', () => {
    const p = convertProfile(
      {
        defaultAction: 'SCMP_ACT_ALLOW',
        archMap: [{ architecture: 'SCMP_ARCH_X86_64', subArchitectures: ['SCMP_ARCH_X86'] }],
        syscalls: [
          { names: ['mkdir', 'mkdirat'], action: 'SCMP_ACT_ERRNO', errnoRet: 1, comment: 'no folders' },
          { name: 'chmod', action: 'SCMP_ACT_ERRNO' },
          { names: ['kill'], action: 'SCMP_ACT_ERRNO', args: [{ index: 1, value: 9, op: 'SCMP_CMP_EQ' }] },
          { names: ['ptrace'], action: 'SCMP_ACT_ALLOW', includes: { caps: ['CAP_SYS_PTRACE'] } },
          { names: ['reboot'], action: 'SCMP_ACT_ERRNO', excludes: { caps: ['CAP_SYS_BOOT'] } },
          { names: ['arm_only'], action: 'SCMP_ACT_ERRNO', includes: { arches: ['arm64'] } },
          { names: ['future'], action: 'SCMP_ACT_ERRNO', includes: { minKernel: '99.0' } },
        ],
      },
      ['CAP_CHOWN'],
      amd64,
      '6.1.0-13-amd64',
    );
    assert.deepEqual(p, {
      defaultAction: 'SCMP_ACT_ALLOW',
      architectures: ['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86'],
      syscalls: [
        { names: ['mkdir', 'mkdirat'], action: 'SCMP_ACT_ERRNO', errnoRet: 1 },
        { names: ['chmod'], action: 'SCMP_ACT_ERRNO' },
        { names: ['kill'], action: 'SCMP_ACT_ERRNO', args: [{ index: 1, value: 9, op: 'SCMP_CMP_EQ' }] },
        { names: ['reboot'], action: 'SCMP_ACT_ERRNO' },
      ],
    });
  });

  test('problems are named', () => {
    const cases: Array<[unknown, RegExp]> = [
      [[], /must be a JSON object/],
      [{}, /defaultAction is required/],
      [{ defaultAction: 'SCMP_ACT_NOPE' }, /defaultAction: unknown action "SCMP_ACT_NOPE"/],
      [{ defaultAction: 'SCMP_ACT_ALLOW', syscalls: [{ names: ['read'], action: 'DENY' }] }, /syscalls\[0\]\.action: unknown action "DENY"/],
      [{ defaultAction: 'SCMP_ACT_ALLOW', syscalls: [{ action: 'SCMP_ACT_ALLOW' }] }, /syscalls\[0\] names no system call/],
      [{ defaultAction: 'SCMP_ACT_ALLOW', syscalls: [{ name: 'a', names: ['b'], action: 'SCMP_ACT_ALLOW' }] }, /either 'name' or 'names'/],
      [{ defaultAction: 'SCMP_ACT_ALLOW', architectures: ['SCMP_ARCH_X86'], archMap: [] }, /either 'architectures' or 'archMap'/],
      [{ defaultAction: 'SCMP_ACT_ALLOW', architectures: ['x86'] }, /unknown architecture "x86"/],
      [{ defaultAction: 'SCMP_ACT_ALLOW', syscalls: [{ names: ['kill'], action: 'SCMP_ACT_ALLOW', args: [{ index: 9, value: 1, op: 'SCMP_CMP_EQ' }] }] }, /index must be 0 to 5/],
      [{ defaultAction: 'SCMP_ACT_ALLOW', syscalls: [{ names: ['kill'], action: 'SCMP_ACT_ALLOW', args: [{ index: 0, value: 1, op: '==' }] }] }, /unknown operator "=="/],
      [{ defaultAction: 'SCMP_ACT_ERRNO', defaultErrnoRet: -1 }, /defaultErrnoRet must be an errno number/],
    ];
    for (const [profile, message] of cases) {
      assert.throws(() => convertProfile(profile, [], amd64), (err: Error) => err instanceof InvalidParameter && message.test(err.message), String(message));
    }
  });
});

describe('security options', () => {
  test('seccomp choices, with either separator', () => {
    assert.deepEqual(parseSecurityOptions(null).seccomp, { kind: 'default' });
    assert.deepEqual(parseSecurityOptions(['seccomp=unconfined']).seccomp, { kind: 'unconfined' });
    assert.deepEqual(parseSecurityOptions(['seccomp:unconfined']).seccomp, { kind: 'unconfined' });
    assert.deepEqual(parseSecurityOptions(['seccomp=builtin']).seccomp, { kind: 'default' });
    const json = '{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir"],"action":"SCMP_ACT_ERRNO"}]}';
    for (const opt of [`seccomp=${json}`, `seccomp:${json}`]) {
      assert.deepEqual(parseSecurityOptions([opt]).seccomp, { kind: 'profile', profile: JSON.parse(json) });
    }
  });

  test('no-new-privileges, apparmor and labels', () => {
    assert.equal(parseSecurityOptions(['no-new-privileges']).noNewPrivileges, true);
    assert.equal(parseSecurityOptions(['no-new-privileges:true']).noNewPrivileges, true);
    assert.equal(parseSecurityOptions(['no-new-privileges=1']).noNewPrivileges, true);
    assert.equal(parseSecurityOptions(['no-new-privileges=false']).noNewPrivileges, false);
    assert.deepEqual(parseSecurityOptions(['apparmor=unconfined', 'label=disable', 'label:type:svirt_t', 'disable']), { seccomp: { kind: 'default' }, noNewPrivileges: false });
  });

  test('bad options answer InvalidParameter naming the problem', () => {
    const cases: Array<[string, RegExp]> = [
      ['seccomp={not json', /invalid seccomp profile: not valid JSON/],
      ['seccomp={"defaultAction":"SCMP_ACT_BOGUS"}', /unknown action "SCMP_ACT_BOGUS"/],
      ['selinux=foo', /unknown option "selinux"/],
      ['bogus', /expected key=value/],
      ['no-new-privileges=maybe', /takes true or false/],
    ];
    for (const [opt, message] of cases) {
      assert.throws(() => parseSecurityOptions([opt]), (err: Error) => err instanceof InvalidParameter && message.test(err.message), opt);
    }
  });

  test('privileged and unconfined containers get no filter', () => {
    const caps = DEFAULT_CAPABILITIES;
    assert.equal(seccompFor(parseSecurityOptions([]), true, caps), undefined);
    assert.equal(seccompFor(parseSecurityOptions(['seccomp=unconfined']), false, caps), undefined);
    assert.equal(seccompFor(parseSecurityOptions([]), false, caps)?.defaultAction, 'SCMP_ACT_ERRNO');
    assert.equal(seccompFor(parseSecurityOptions(['seccomp={"defaultAction":"SCMP_ACT_LOG"}']), false, caps)?.defaultAction, 'SCMP_ACT_LOG');
  });
});
