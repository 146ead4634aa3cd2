/**
 * Seccomp for containers: the engine's default profile, the security options that choose a profile
 * (`seccomp=unconfined`, `seccomp=<profile JSON>`, `seccomp:...` with the older separator), and the
 * conversion of a Docker-style profile to the OCI runtime spec's `linux.seccomp`.
 *
 * The default profile is an allow list written from the kernel's syscall table (x86_64, x86 and the arm
 * pair): every call a process needs to compute, use files, sockets, signals, timers and its own memory is
 * allowed; what reaches outside the container's isolation is allowed only with the capability that the
 * kernel itself would ask for (so that `--cap-add` keeps working), and a few calls are never allowed to an
 * unprivileged container because their attack surface outweighs their use there. Anything else answers
 * EPERM. Privileged containers run without a filter, as with Docker.
 *
 * Profile format (Docker's): { defaultAction, defaultErrnoRet?, architectures? | archMap?, flags?,
 * listenerPath?, listenerMetadata?, syscalls: [{ names | name, action, errnoRet?, args?, includes?, excludes? }] }
 * where includes/excludes hold { caps?, arches?, minKernel? }: a rule applies when the container has every
 * capability and the host one of the arches of `includes`, and none of those of `excludes`.
 */
import os from 'node:os';
import { InvalidParameter } from '../../errors.js';

export interface OciSeccompArg {
  index: number;
  value: number;
  valueTwo?: number;
  op: string;
}

export interface OciSeccompSyscall {
  names: string[];
  action: string;
  errnoRet?: number;
  args?: OciSeccompArg[];
}

/** The runtime spec's `linux.seccomp`. */
export interface OciSeccomp {
  defaultAction: string;
  defaultErrnoRet?: number;
  architectures?: string[];
  flags?: string[];
  listenerPath?: string;
  listenerMetadata?: string;
  syscalls?: OciSeccompSyscall[];
}

interface ProfileFilter {
  caps?: string[];
  arches?: string[];
  minKernel?: string;
}

interface ProfileSyscall {
  name?: string;
  names?: string[];
  action: string;
  errnoRet?: number;
  args?: OciSeccompArg[];
  comment?: string;
  includes?: ProfileFilter;
  excludes?: ProfileFilter;
}

interface Profile {
  defaultAction: string;
  defaultErrnoRet?: number;
  architectures?: string[];
  archMap?: Array<{ architecture: string; subArchitectures?: string[] }>;
  flags?: string[];
  listenerPath?: string;
  listenerMetadata?: string;
  syscalls?: ProfileSyscall[];
}

const ACTIONS = [
  'SCMP_ACT_KILL', 'SCMP_ACT_KILL_PROCESS', 'SCMP_ACT_KILL_THREAD', 'SCMP_ACT_TRAP', 'SCMP_ACT_ERRNO',
  'SCMP_ACT_TRACE', 'SCMP_ACT_ALLOW', 'SCMP_ACT_LOG', 'SCMP_ACT_NOTIFY',
];
const OPERATORS = ['SCMP_CMP_NE', 'SCMP_CMP_LT', 'SCMP_CMP_LE', 'SCMP_CMP_EQ', 'SCMP_CMP_GE', 'SCMP_CMP_GT', 'SCMP_CMP_MASKED_EQ'];
const ARCHES = [
  'SCMP_ARCH_X86', 'SCMP_ARCH_X86_64', 'SCMP_ARCH_X32', 'SCMP_ARCH_ARM', 'SCMP_ARCH_AARCH64', 'SCMP_ARCH_MIPS',
  'SCMP_ARCH_MIPS64', 'SCMP_ARCH_MIPS64N32', 'SCMP_ARCH_MIPSEL', 'SCMP_ARCH_MIPSEL64', 'SCMP_ARCH_MIPSEL64N32',
  'SCMP_ARCH_PPC', 'SCMP_ARCH_PPC64', 'SCMP_ARCH_PPC64LE', 'SCMP_ARCH_S390', 'SCMP_ARCH_S390X',
  'SCMP_ARCH_PARISC', 'SCMP_ARCH_PARISC64', 'SCMP_ARCH_RISCV64',
];
const FLAGS = ['SECCOMP_FILTER_FLAG_TSYNC', 'SECCOMP_FILTER_FLAG_LOG', 'SECCOMP_FILTER_FLAG_SPEC_ALLOW', 'SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV'];

/** The host's architecture as libseccomp and as Docker's profiles (Go's GOARCH) name it. */
export interface HostArch {
  seccomp: string;
  goarch: string;
}

const NODE_ARCHES: Record<string, HostArch> = {
  x64: { seccomp: 'SCMP_ARCH_X86_64', goarch: 'amd64' },
  ia32: { seccomp: 'SCMP_ARCH_X86', goarch: '386' },
  arm64: { seccomp: 'SCMP_ARCH_AARCH64', goarch: 'arm64' },
  arm: { seccomp: 'SCMP_ARCH_ARM', goarch: 'arm' },
  ppc64: { seccomp: 'SCMP_ARCH_PPC64LE', goarch: 'ppc64le' },
  s390x: { seccomp: 'SCMP_ARCH_S390X', goarch: 's390x' },
  riscv64: { seccomp: 'SCMP_ARCH_RISCV64', goarch: 'riscv64' },
};

export function hostArch(nodeArch: string = process.arch): HostArch {
  return NODE_ARCHES[nodeArch] ?? { seccomp: '', goarch: nodeArch };
}

// -- the default profile --

/** clone() flags that make new namespaces (CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET). */
const CLONE_NAMESPACE_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000;
const EPERM = 1;
const ENOSYS = 38;

/**
 * What a process needs for ordinary work, by area. Names the host's table lacks (32-bit only calls on a
 * 64-bit host, calls newer than the runtime's libseccomp) are skipped by the runtime for that architecture.
 */
const ORDINARY = {
  process: [
    'execve', 'execveat', 'exit', 'exit_group', 'fork', 'vfork', 'wait4', 'waitid', 'waitpid', 'getpid', 'getppid',
    // Debuggers and strace work in a container as with Docker: since Linux 4.8 seccomp cannot be bypassed
    // through ptrace, and the kernel's own ptrace checks still apply.
    'ptrace',
    'gettid', 'getpgid', 'getpgrp', 'setpgid', 'getsid', 'setsid', 'set_tid_address', 'set_robust_list',
    'get_robust_list', 'rseq', 'arch_prctl', 'set_thread_area', 'get_thread_area', 'prctl', 'seccomp', 'uname',
    'sysinfo', 'getcpu', 'getrandom', 'restart_syscall', 'membarrier', 'capget', 'capset', 'times', 'getrusage',
    'getrlimit', 'setrlimit', 'ugetrlimit', 'prlimit64', 'getpriority', 'setpriority', 'nice', 'ioprio_get', 'ioprio_set',
    'landlock_create_ruleset', 'landlock_add_rule', 'landlock_restrict_self', 'lsm_get_self_attr', 'lsm_set_self_attr',
    'lsm_list_modules', 'pidfd_open', 'pidfd_send_signal', 'process_mrelease', 'olduname',
  ],
  identity: [
    'getuid', 'geteuid', 'getgid', 'getegid', 'getresuid', 'getresgid', 'getgroups', 'setuid', 'setgid', 'setreuid',
    'setregid', 'setresuid', 'setresgid', 'setgroups', 'setfsuid', 'setfsgid', 'getuid32', 'geteuid32', 'getgid32',
    'getegid32', 'getresuid32', 'getresgid32', 'getgroups32', 'setuid32', 'setgid32', 'setreuid32', 'setregid32',
    'setresuid32', 'setresgid32', 'setgroups32', 'setfsuid32', 'setfsgid32',
  ],
  scheduling: [
    'sched_yield', 'sched_setparam', 'sched_getparam', 'sched_setscheduler', 'sched_getscheduler',
    'sched_get_priority_max', 'sched_get_priority_min', 'sched_rr_get_interval', 'sched_rr_get_interval_time64',
    'sched_setaffinity', 'sched_getaffinity', 'sched_setattr', 'sched_getattr',
  ],
  memory: [
    'brk', 'mmap', 'mmap2', 'munmap', 'mremap', 'mprotect', 'msync', 'mincore', 'madvise', 'mlock', 'mlock2', 'munlock',
    'mlockall', 'munlockall', 'remap_file_pages', 'memfd_create', 'memfd_secret', 'pkey_alloc', 'pkey_free',
    'pkey_mprotect', 'get_mempolicy', 'map_shadow_stack', 'mseal', 'cachestat',
  ],
  signals: [
    'kill', 'tkill', 'tgkill', 'rt_sigaction', 'rt_sigprocmask', 'rt_sigreturn', 'rt_sigpending', 'rt_sigtimedwait',
    'rt_sigtimedwait_time64', 'rt_sigqueueinfo', 'rt_tgsigqueueinfo', 'rt_sigsuspend', 'sigaltstack', 'sigaction',
    'sigprocmask', 'sigreturn', 'sigpending', 'sigsuspend', 'signal', 'signalfd', 'signalfd4', 'pause',
  ],
  time: [
    'time', 'gettimeofday', 'clock_gettime', 'clock_gettime64', 'clock_getres', 'clock_getres_time64', 'clock_nanosleep',
    'clock_nanosleep_time64', 'nanosleep', 'alarm', 'getitimer', 'setitimer', 'timer_create', 'timer_settime',
    'timer_settime64', 'timer_gettime', 'timer_gettime64', 'timer_getoverrun', 'timer_delete', 'timerfd_create',
    'timerfd_settime', 'timerfd_settime64', 'timerfd_gettime', 'timerfd_gettime64',
    // Reading the clock's state; changing it needs CAP_SYS_TIME, which the kernel checks.
    'adjtimex', 'clock_adjtime', 'clock_adjtime64',
  ],
  files: [
    'read', 'write', 'open', 'openat', 'openat2', 'creat', 'close', 'close_range', 'lseek', '_llseek', 'pread64', 'pwrite64',
    'readv', 'writev', 'preadv', 'pwritev', 'preadv2', 'pwritev2', 'stat', 'fstat', 'lstat', 'newfstatat', 'stat64',
    'fstat64', 'lstat64', 'fstatat64', 'statx', 'statfs', 'fstatfs', 'statfs64', 'fstatfs64', 'access', 'faccessat',
    'faccessat2', 'truncate', 'ftruncate', 'truncate64', 'ftruncate64', 'fallocate', 'fsync', 'fdatasync', 'sync',
    'syncfs', 'sync_file_range', 'sync_file_range2', 'arm_sync_file_range', 'fadvise64', 'fadvise64_64',
    'arm_fadvise64_64', 'readahead', 'getdents', 'getdents64', 'readdir', 'getcwd', 'chdir', 'fchdir', 'rename', 'renameat',
    'renameat2', 'mkdir', 'mkdirat', 'rmdir', 'link', 'linkat', 'unlink', 'unlinkat', 'symlink', 'symlinkat', 'readlink',
    'readlinkat', 'mknod', 'mknodat', 'chmod', 'fchmod', 'fchmodat', 'fchmodat2', 'chown', 'fchown', 'lchown', 'fchownat',
    'chown32', 'fchown32', 'lchown32', 'umask', 'utime', 'utimes', 'futimesat', 'utimensat', 'utimensat_time64',
    'setxattr', 'lsetxattr', 'fsetxattr', 'getxattr', 'lgetxattr', 'fgetxattr', 'listxattr', 'llistxattr',
    'flistxattr', 'removexattr', 'lremovexattr', 'fremovexattr', 'setxattrat', 'getxattrat', 'listxattrat',
    'removexattrat', 'file_getattr', 'file_setattr', 'name_to_handle_at', 'flock', 'fcntl', 'fcntl64', 'ioctl',
    'dup', 'dup2', 'dup3', 'pipe', 'pipe2', 'splice', 'tee', 'vmsplice', 'sendfile', 'sendfile64', 'copy_file_range',
    'inotify_init', 'inotify_init1', 'inotify_add_watch', 'inotify_rm_watch', 'fanotify_mark',
  ],
  polling: [
    'select', '_newselect', 'pselect6', 'pselect6_time64', 'poll', 'ppoll', 'ppoll_time64', 'epoll_create',
    'epoll_create1', 'epoll_ctl', 'epoll_wait', 'epoll_pwait', 'epoll_pwait2', 'eventfd', 'eventfd2',
    'io_setup', 'io_destroy', 'io_submit', 'io_cancel', 'io_getevents', 'io_pgetevents', 'io_pgetevents_time64',
    'futex', 'futex_time64', 'futex_waitv', 'futex_wake', 'futex_wait', 'futex_requeue',
  ],
  sockets: [
    'socket', 'socketpair', 'socketcall', 'bind', 'listen', 'accept', 'accept4', 'connect', 'getsockname',
    'getpeername', 'getsockopt', 'setsockopt', 'shutdown', 'send', 'sendto', 'sendmsg', 'sendmmsg', 'recv',
    'recvfrom', 'recvmsg', 'recvmmsg', 'recvmmsg_time64',
  ],
  ipc: [
    'ipc', 'shmget', 'shmat', 'shmdt', 'shmctl', 'semget', 'semop', 'semctl', 'semtimedop', 'semtimedop_time64',
    'msgget', 'msgsnd', 'msgrcv', 'msgctl', 'mq_open', 'mq_unlink', 'mq_timedsend', 'mq_timedsend_time64',
    'mq_timedreceive', 'mq_timedreceive_time64', 'mq_notify', 'mq_getsetattr',
  ],
  arm: ['breakpoint', 'cacheflush', 'set_tls'],
};

/** Calls allowed only with a capability: the kernel asks for it too, so `--cap-add` turns them on. */
const BY_CAPABILITY: Array<{ cap: string; names: string[] }> = [
  {
    cap: 'CAP_SYS_ADMIN',
    names: [
      'mount', 'umount', 'umount2', 'pivot_root', 'unshare', 'setns', 'clone3', 'fsopen', 'fsconfig', 'fsmount',
      'fspick', 'open_tree', 'open_tree_attr', 'move_mount', 'mount_setattr', 'statmount', 'listmount', 'sethostname',
      'setdomainname', 'swapon', 'swapoff', 'quotactl', 'quotactl_fd', 'fanotify_init', 'lookup_dcookie',
      'bpf', 'perf_event_open',
    ],
  },
  { cap: 'CAP_BPF', names: ['bpf'] },
  { cap: 'CAP_PERFMON', names: ['perf_event_open'] },
  { cap: 'CAP_SYS_PTRACE', names: ['process_vm_readv', 'process_vm_writev', 'kcmp', 'pidfd_getfd', 'process_madvise'] },
  { cap: 'CAP_SYS_MODULE', names: ['init_module', 'finit_module', 'delete_module'] },
  { cap: 'CAP_SYS_BOOT', names: ['reboot'] },
  { cap: 'CAP_SYS_TIME', names: ['settimeofday', 'stime', 'clock_settime', 'clock_settime64'] },
  { cap: 'CAP_SYS_PACCT', names: ['acct'] },
  { cap: 'CAP_SYS_NICE', names: ['mbind', 'set_mempolicy', 'set_mempolicy_home_node', 'migrate_pages', 'move_pages'] },
  { cap: 'CAP_SYS_CHROOT', names: ['chroot'] },
  { cap: 'CAP_SYS_RAWIO', names: ['iopl', 'ioperm'] },
  { cap: 'CAP_SYS_TTY_CONFIG', names: ['vhangup'] },
  { cap: 'CAP_SYSLOG', names: ['syslog'] },
];

/**
 * Never allowed without --privileged, whatever the capabilities (listed for the reader and the tests; the
 * default action denies them): the kernel keyring (not namespaced), userfaultfd (a tool for exploiting kernel races), kexec, open_by_handle_at
 * (opens any file of a mounted filesystem by handle, escaping bind mounts), io_uring (a large share of recent
 * kernel escalations), modify_ldt and vm86 (16-bit segments), and the obsolete or unimplemented calls.
 */
export const NEVER_ALLOWED = [
  'add_key', 'request_key', 'keyctl', 'userfaultfd', 'kexec_load', 'kexec_file_load',
  'open_by_handle_at', 'io_uring_setup', 'io_uring_enter', 'io_uring_register', 'modify_ldt', 'vm86', 'vm86old',
  'uselib', 'ustat', 'sysfs', '_sysctl', 'create_module', 'get_kernel_syms', 'query_module', 'nfsservctl', 'getpmsg',
  'putpmsg', 'afs_syscall', 'tuxcall', 'security', 'vserver', 'epoll_ctl_old', 'epoll_wait_old', 'bdflush', 'idle',
];

/** personality(): Linux and its 32-bit persona, each optionally with UNAME26, and the query (0xffffffff). */
const HARMLESS_PERSONAS = [0x0, 0x8, 0x20000, 0x20008, 0xffffffff];

function buildDefaultProfile(): Profile {
  const allow = (names: string[], extra: Partial<ProfileSyscall> = {}): ProfileSyscall => ({ names, action: 'SCMP_ACT_ALLOW', ...extra });
  return {
    defaultAction: 'SCMP_ACT_ERRNO',
    defaultErrnoRet: EPERM,
    archMap: [
      { architecture: 'SCMP_ARCH_X86_64', subArchitectures: ['SCMP_ARCH_X86', 'SCMP_ARCH_X32'] },
      { architecture: 'SCMP_ARCH_AARCH64', subArchitectures: ['SCMP_ARCH_ARM'] },
    ],
    syscalls: [
      allow(Object.values(ORDINARY).flat()),
      ...HARMLESS_PERSONAS.map((persona) => allow(['personality'], { args: [{ index: 0, value: persona, op: 'SCMP_CMP_EQ' }] })),
      // clone: any flags with CAP_SYS_ADMIN; without it, none of the namespace flags (flags are argument 0 on
      // x86 and arm). clone3 passes its flags in memory where a filter cannot look: ENOSYS makes libc use clone.
      allow(['clone'], { includes: { caps: ['CAP_SYS_ADMIN'] } }),
      allow(['clone'], { args: [{ index: 0, value: CLONE_NAMESPACE_FLAGS, valueTwo: 0, op: 'SCMP_CMP_MASKED_EQ' }], excludes: { caps: ['CAP_SYS_ADMIN'] } }),
      { names: ['clone3'], action: 'SCMP_ACT_ERRNO', errnoRet: ENOSYS, excludes: { caps: ['CAP_SYS_ADMIN'] } },
      ...BY_CAPABILITY.map(({ cap, names }) => allow(names, { includes: { caps: [cap] } })),
    ],
  };
}

const DEFAULT_PROFILE = buildDefaultProfile();

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
const defaultByCaps = new Map<string, OciSeccomp>();

/**
 * The default profile for a container with these capabilities (CAP_ names, after CapAdd/CapDrop). The result
 * is shared between containers with the same set, and frozen.
 */
export function defaultSeccomp(caps: string[], arch: HostArch = hostArch()): OciSeccomp {
  const key = `${arch.seccomp}\0${[...caps].sort().join(',')}`;
  let profile = defaultByCaps.get(key);
  if (!profile) {
    profile = deepFreeze(convertProfile(DEFAULT_PROFILE, caps, arch, os.release()));
    if (defaultByCaps.size >= 32) defaultByCaps.delete(defaultByCaps.keys().next().value!);
    defaultByCaps.set(key, profile);
  }
  return profile;
}

/** The default profile in Docker's format (for `docker`-style tooling and the tests). */
export function defaultProfileJSON(): string {
  return JSON.stringify(DEFAULT_PROFILE);
}

// -- conversion of a Docker-style profile --

function bad(what: string): never {
  throw new InvalidParameter(`invalid seccomp profile: ${what}`);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function stringList(field: string, v: unknown): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || v.some((s) => typeof s !== 'string')) bad(`${field} must be a list of strings`);
  return v as string[];
}

function checkAction(field: string, action: unknown): string {
  if (typeof action !== 'string' || action === '') bad(`${field} is required`);
  if (!ACTIONS.includes(action)) bad(`${field}: unknown action ${JSON.stringify(action)} (expected one of ${ACTIONS.join(', ')})`);
  return action;
}

function checkErrno(field: string, v: unknown): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (!Number.isInteger(v) || (v as number) < 0 || (v as number) > 4095) bad(`${field} must be an errno number from 0 to 4095`);
  return v as number;
}

function checkArch(field: string, v: unknown): string {
  if (typeof v !== 'string' || !ARCHES.includes(v)) bad(`${field}: unknown architecture ${JSON.stringify(v)}`);
  return v;
}

function kernelAtLeast(release: string, min: string): boolean {
  const have = release.split(/[.-]/).map((n) => parseInt(n, 10));
  const want = min.split('.').map((n) => parseInt(n, 10));
  for (let i = 0; i < want.length; i++) {
    const h = Number.isNaN(have[i]) || have[i] === undefined ? 0 : have[i];
    if (h !== want[i]) return h > want[i];
  }
  return true;
}

function checkFilter(field: string, v: unknown): ProfileFilter {
  if (v === undefined || v === null) return {};
  if (!isObject(v)) bad(`${field} must be an object with caps, arches or minKernel`);
  const minKernel = v.minKernel;
  if (minKernel !== undefined && minKernel !== '' && (typeof minKernel !== 'string' || !/^\d+(\.\d+)*$/.test(minKernel))) {
    bad(`${field}.minKernel must be a kernel version such as "4.8", got ${JSON.stringify(minKernel)}`);
  }
  const caps = stringList(`${field}.caps`, v.caps).map((c) => (c.toUpperCase().startsWith('CAP_') ? c.toUpperCase() : `CAP_${c.toUpperCase()}`));
  return { caps, arches: stringList(`${field}.arches`, v.arches), minKernel: (minKernel as string | undefined) || undefined };
}

function checkArgs(field: string, v: unknown): OciSeccompArg[] | undefined {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v)) bad(`${field} must be a list`);
  if (v.length > 6) bad(`${field}: a system call has at most 6 arguments`);
  return v.map((a, i) => {
    const f = `${field}[${i}]`;
    if (!isObject(a)) bad(`${f} must be an object with index, value and op`);
    if (!Number.isInteger(a.index) || (a.index as number) < 0 || (a.index as number) > 5) bad(`${f}.index must be 0 to 5`);
    for (const k of ['value', 'valueTwo']) {
      if (a[k] !== undefined && (!Number.isInteger(a[k]) || (a[k] as number) < 0)) bad(`${f}.${k} must be a whole number, not negative`);
    }
    if (typeof a.op !== 'string' || !OPERATORS.includes(a.op)) bad(`${f}.op: unknown operator ${JSON.stringify(a.op)} (expected one of ${OPERATORS.join(', ')})`);
    const arg: OciSeccompArg = { index: a.index as number, value: (a.value as number | undefined) ?? 0, op: a.op };
    if (a.valueTwo !== undefined) arg.valueTwo = a.valueTwo as number;
    return arg;
  });
}

/**
 * A Docker-style profile as the runtime spec's `linux.seccomp` for a container with these capabilities on
 * this architecture; throws InvalidParameter naming the first problem.
 */
export function convertProfile(profile: unknown, caps: string[], arch: HostArch = hostArch(), kernelRelease: string = os.release()): OciSeccomp {
  if (!isObject(profile)) bad('the profile must be a JSON object');
  const p = profile as Record<string, unknown>;
  const out: OciSeccomp = { defaultAction: checkAction('defaultAction', p.defaultAction) };
  const defaultErrno = checkErrno('defaultErrnoRet', p.defaultErrnoRet);
  if (defaultErrno !== undefined) out.defaultErrnoRet = defaultErrno;

  const architectures = stringList('architectures', p.architectures).map((a, i) => checkArch(`architectures[${i}]`, a));
  if (p.archMap !== undefined && p.archMap !== null) {
    if (architectures.length > 0) bad(`use either 'architectures' or 'archMap'`);
    if (!Array.isArray(p.archMap)) bad('archMap must be a list of {architecture, subArchitectures}');
    for (const [i, entry] of p.archMap.entries()) {
      if (!isObject(entry)) bad(`archMap[${i}] must be an object with architecture and subArchitectures`);
      const main = checkArch(`archMap[${i}].architecture`, entry.architecture);
      const subs = stringList(`archMap[${i}].subArchitectures`, entry.subArchitectures).map((a, j) => checkArch(`archMap[${i}].subArchitectures[${j}]`, a));
      if (main === arch.seccomp) architectures.push(main, ...subs);
    }
  }
  if (architectures.length > 0) out.architectures = [...new Set(architectures)];
  const flags = stringList('flags', p.flags);
  for (const f of flags) if (!FLAGS.includes(f)) bad(`flags: unknown flag ${JSON.stringify(f)}`);
  if (flags.length > 0) out.flags = flags;
  if (p.listenerPath !== undefined && p.listenerPath !== '') {
    if (typeof p.listenerPath !== 'string') bad('listenerPath must be a string');
    out.listenerPath = p.listenerPath;
  }
  if (p.listenerMetadata !== undefined && p.listenerMetadata !== '') {
    if (typeof p.listenerMetadata !== 'string') bad('listenerMetadata must be a string');
    out.listenerMetadata = p.listenerMetadata;
  }

  const syscalls: OciSeccompSyscall[] = [];
  if (p.syscalls !== undefined && p.syscalls !== null && !Array.isArray(p.syscalls)) bad('syscalls must be a list');
  for (const [i, s] of ((p.syscalls as unknown[] | undefined) ?? []).entries()) {
    const field = `syscalls[${i}]`;
    if (!isObject(s)) bad(`${field} must be an object with names and action`);
    const names = stringList(`${field}.names`, s.names);
    if (s.name !== undefined && s.name !== '') {
      if (typeof s.name !== 'string') bad(`${field}.name must be a string`);
      if (names.length > 0) bad(`${field}: use either 'name' or 'names'`);
      names.push(s.name);
    }
    if (names.length === 0) bad(`${field} names no system call`);
    for (const n of names) if (!/^[a-z0-9_]+$/.test(n)) bad(`${field}: ${JSON.stringify(n)} is not a system call name`);
    const action = checkAction(`${field}.action`, s.action);
    const errnoRet = checkErrno(`${field}.errnoRet`, s.errnoRet);
    const args = checkArgs(`${field}.args`, s.args);
    const includes = checkFilter(`${field}.includes`, s.includes);
    const excludes = checkFilter(`${field}.excludes`, s.excludes);

    if (includes.arches?.length && !includes.arches.includes(arch.goarch)) continue;
    if (includes.caps?.length && !includes.caps.every((c) => caps.includes(c))) continue;
    if (includes.minKernel && !kernelAtLeast(kernelRelease, includes.minKernel)) continue;
    if (excludes.arches?.includes(arch.goarch)) continue;
    if (excludes.caps?.some((c) => caps.includes(c))) continue;
    if (excludes.minKernel && kernelAtLeast(kernelRelease, excludes.minKernel)) continue;

    const rule: OciSeccompSyscall = { names, action };
    if (errnoRet !== undefined) rule.errnoRet = errnoRet;
    if (args && args.length > 0) rule.args = args;
    syscalls.push(rule);
  }
  out.syscalls = syscalls;
  return out;
}

// -- security options --

export type SeccompChoice = { kind: 'default' } | { kind: 'unconfined' } | { kind: 'profile'; profile: unknown };

export interface SecurityOptions {
  seccomp: SeccompChoice;
  noNewPrivileges: boolean;
}

function parseBool(text: string): boolean | undefined {
  if (['1', 't', 'T', 'true', 'TRUE', 'True'].includes(text)) return true;
  if (['0', 'f', 'F', 'false', 'FALSE', 'False'].includes(text)) return false;
  return undefined;
}

/**
 * HostConfig.SecurityOpt as Docker reads it: `key=value` (or the older `key:value`), `no-new-privileges`, and
 * `disable` (SELinux labels off). AppArmor and SELinux labels are accepted and have no effect (this host runs
 * neither). Throws InvalidParameter on anything else, and on a seccomp profile that cannot be used.
 */
export function parseSecurityOptions(opts: readonly string[] | null | undefined): SecurityOptions {
  const out: SecurityOptions = { seccomp: { kind: 'default' }, noNewPrivileges: false };
  for (const opt of opts ?? []) {
    if (opt === 'no-new-privileges') {
      out.noNewPrivileges = true;
      continue;
    }
    if (opt === 'disable') continue;
    const sep = opt.search(/[=:]/);
    if (sep <= 0) throw new InvalidParameter(`invalid --security-opt: ${JSON.stringify(opt)}: expected key=value, such as seccomp=unconfined`);
    const key = opt.slice(0, sep);
    const value = opt.slice(sep + 1);
    switch (key) {
      case 'label':
      case 'apparmor':
        break;
      case 'no-new-privileges': {
        const b = parseBool(value);
        if (b === undefined) throw new InvalidParameter(`invalid --security-opt: ${JSON.stringify(opt)}: no-new-privileges takes true or false`);
        out.noNewPrivileges = b;
        break;
      }
      case 'seccomp':
        if (value === 'unconfined') out.seccomp = { kind: 'unconfined' };
        else if (value === 'builtin' || value === '') out.seccomp = { kind: 'default' };
        else {
          let profile: unknown;
          try {
            profile = JSON.parse(value);
          } catch (err) {
            throw new InvalidParameter(`invalid seccomp profile: not valid JSON (${(err as Error).message}); the value of seccomp= is the profile's JSON (the docker CLI reads --security-opt seccomp=FILE and sends its content)`);
          }
          // Checked now, so that a bad profile fails the create and not a later start.
          convertProfile(profile, []);
          out.seccomp = { kind: 'profile', profile };
        }
        break;
      default:
        throw new InvalidParameter(`invalid --security-opt: ${JSON.stringify(opt.length > 80 ? `${opt.slice(0, 80)}...` : opt)}: unknown option ${JSON.stringify(key)} (expected seccomp, apparmor, label or no-new-privileges)`);
    }
  }
  return out;
}

/** The container's `linux.seccomp`, or undefined for none (privileged, or seccomp=unconfined). */
export function seccompFor(opts: SecurityOptions, privileged: boolean, caps: string[]): OciSeccomp | undefined {
  if (privileged || opts.seccomp.kind === 'unconfined') return undefined;
  if (opts.seccomp.kind === 'profile') return convertProfile(opts.seccomp.profile, caps);
  return defaultSeccomp(caps);
}
