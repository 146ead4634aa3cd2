/*
 * System calls on the hot path of a container start that would otherwise each cost a process spawn:
 *   mountOverlay(target, options)  mount -t overlay overlay -o OPTIONS TARGET
 *   unmount(target, lazy)          umount [-l] TARGET
 *   unmountAsync(target, lazy, cb) umount [-l] TARGET on a thread of the pool, then cb(err|null): unmounting
 *                                  an overlay syncs its upper filesystem, which can take long on a busy disk
 *   mountOverlayAsync(target, options, cb)   the overlay mount on a thread of the pool, then cb(err|null)
 *   pipe()                         a pipe, both ends close-on-exec: [readFd, writeFd]
 *   sealedCopy(path)               a close-on-exec memfd holding a copy of the file at PATH, sealed against any
 *                                  change (write, grow, shrink, new seals): the fd. An OCI runtime executed from
 *                                  it finds itself already cloned and skips its own copy of its binary
 *                                  (CVE-2019-5736), a bind mount and a lazy unmount that waits for an RCU grace
 *                                  period on every create and exec
 *   spawn(file, args, env, cwd, fds, setsid)
 *                                  starts FILE with posix_spawn (a vfork: no copy of the daemon's page tables,
 *                                  which blocks the event loop for milliseconds per spawn in a big process);
 *                                  child fd i is fds[i] (-1: /dev/null); signals default and unblocked; the pid
 *   spawnAsync(file, args, env, cwd, fds, setsid, cb)
 *                                  the same on a thread of the pool, then cb(err, pid)
 *   waitpid(pid, cb)               waits for that child on a thread of the pool, then cb(code) (128+n: signal n)
 *   writeFileAtomicAsync(tmp, target, data, mode, durable, cb)
 *                                  writes DATA to TMP (created with MODE), fsyncs it when DURABLE, renames it over
 *                                  TARGET and fsyncs the folder when DURABLE, all in one task of the pool (instead
 *                                  of four to eight trips through it), then cb(err|null); TMP is removed on failure
 *   fsBatchAsync(ops, cb)          small file system steps of one start or removal, in order, in one task of the
 *                                  pool (each a trip through it otherwise, and done on the event loop they stall
 *                                  it whenever the file system journal is busy); see below
 *   removeTreeAsync(path, cb)      rm -rf --one-file-system PATH on a thread of the pool, then cb(err|null): one
 *                                  task instead of a trip through the pool per entry; symlinks are removed, never
 *                                  followed, and a mount point below PATH is an error (EXDEV), never entered
 *   syncfsAsync(path, cb)          syncfs(2) of the file system holding PATH on a thread of the pool, then
 *                                  cb(err|null)
 *   peerCredentials(fd)            SO_PEERCRED of a connected unix socket: {pid, uid, gid} of the process that
 *                                  connected, as the kernel recorded them at connect()
 * Errors are thrown with the errno name as `code`.
 */
#define _GNU_SOURCE
#include <node_api.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The errno's name, for the `code` of the errors given to JavaScript. */
static const char *errno_name(int err) {
  switch (err) {
    case ENOENT: return "ENOENT";
    case EINVAL: return "EINVAL";
    case EBUSY: return "EBUSY";
    case EPERM: return "EPERM";
    case EACCES: return "EACCES";
    case ESRCH: return "ESRCH";
    case ENOTDIR: return "ENOTDIR";
    case EISDIR: return "EISDIR";
    case EEXIST: return "EEXIST";
    case ENOTEMPTY: return "ENOTEMPTY";
    case EXDEV: return "EXDEV";
    case ENOSPC: return "ENOSPC";
    case EROFS: return "EROFS";
    case ECANCELED: return "ECANCELED";
    default: return "EIO";
  }
}

static napi_value fail(napi_env env, int err, const char *what, const char *arg) {
  char message[4200];
  snprintf(message, sizeof message, "%s %s: %s", what, arg, strerror(err));
  napi_throw_error(env, errno_name(err), message);
  return NULL;
}

/* Queues `data`'s task on the thread pool under a resource name; false when it could not be queued. */
static bool queue_work(napi_env env, const char *resource, napi_async_execute_callback execute, napi_async_complete_callback complete, void *data,
                       napi_async_work *work) {
  napi_value name;
  napi_create_string_utf8(env, resource, NAPI_AUTO_LENGTH, &name);
  return napi_create_async_work(env, NULL, name, execute, complete, data, work) == napi_ok && napi_queue_async_work(env, *work) == napi_ok;
}

/* Calls back with null, or with an Error "<what> <target>: <strerror>" whose code is the errno's name. */
static void call_back(napi_env env, napi_ref callback, int err, const char *what, const char *target) {
  napi_value cb, global, arg, result;
  napi_get_reference_value(env, callback, &cb);
  napi_get_global(env, &global);
  if (err) {
    char message[4300];
    snprintf(message, sizeof message, "%s %s: %s", what, target, strerror(err));
    napi_value msg, codev;
    napi_create_string_utf8(env, message, NAPI_AUTO_LENGTH, &msg);
    napi_create_string_utf8(env, errno_name(err), NAPI_AUTO_LENGTH, &codev);
    napi_create_error(env, codev, msg, &arg);
  } else {
    napi_get_null(env, &arg);
  }
  napi_call_function(env, global, cb, 1, &arg, &result);
  napi_delete_reference(env, callback);
}

static int string_arg(napi_env env, napi_value value, char *buf, size_t size) {
  size_t len = 0;
  if (napi_get_value_string_utf8(env, value, buf, size, &len) != napi_ok) return -1;
  return len + 1 >= size ? -1 : 0;
}

static napi_value MountOverlay(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  static char target[4096], options[4096];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2 ||
      string_arg(env, argv[0], target, sizeof target) || string_arg(env, argv[1], options, sizeof options)) {
    napi_throw_type_error(env, NULL, "mountOverlay(target, options) needs two strings shorter than a page");
    return NULL;
  }
  if (mount("overlay", target, "overlay", 0, options) != 0) return fail(env, errno, "mount overlay on", target);
  return NULL;
}

static napi_value Unmount(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  static char target[4096];
  bool lazy = false;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 || string_arg(env, argv[0], target, sizeof target)) {
    napi_throw_type_error(env, NULL, "unmount(target, lazy) needs a path");
    return NULL;
  }
  if (argc > 1) napi_get_value_bool(env, argv[1], &lazy);
  if (umount2(target, lazy ? MNT_DETACH : 0) != 0) return fail(env, errno, "umount", target);
  return NULL;
}

struct unmount_work {
  napi_async_work work;
  napi_ref callback;
  char target[4096];
  bool lazy;
  /* Set for a mount (mountOverlayAsync): the overlay options. */
  char *options;
  int err;
};

static void unmount_execute(napi_env env, void *data) {
  (void)env;
  struct unmount_work *w = data;
  if (w->options) w->err = mount("overlay", w->target, "overlay", 0, w->options) != 0 ? errno : 0;
  else w->err = umount2(w->target, w->lazy ? MNT_DETACH : 0) != 0 ? errno : 0;
}

static void unmount_complete(napi_env env, napi_status status, void *data) {
  struct unmount_work *w = data;
  call_back(env, w->callback, status != napi_ok ? ECANCELED : w->err, w->options ? "mount overlay on" : "umount", w->target);
  napi_delete_async_work(env, w->work);
  free(w->options);
  free(w);
}

static napi_value MountOverlayAsync(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_valuetype type = napi_undefined;
  struct unmount_work *w = calloc(1, sizeof *w);
  if (w) w->options = calloc(1, 4096);
  if (!w || !w->options) {
    if (w) free(w);
    napi_throw_error(env, "ENOMEM", "out of memory");
    return NULL;
  }
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 3 || string_arg(env, argv[0], w->target, sizeof w->target) ||
      string_arg(env, argv[1], w->options, 4096) || napi_typeof(env, argv[2], &type) != napi_ok || type != napi_function) {
    free(w->options);
    free(w);
    napi_throw_type_error(env, NULL, "mountOverlayAsync(target, options, callback) needs two strings shorter than a page and a function");
    return NULL;
  }
  napi_create_reference(env, argv[2], 1, &w->callback);
  if (!queue_work(env, "berth:mount", unmount_execute, unmount_complete, w, &w->work)) {
    napi_delete_reference(env, w->callback);
    free(w->options);
    free(w);
    napi_throw_error(env, "EIO", "cannot queue the mount");
  }
  return NULL;
}

static napi_value UnmountAsync(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_valuetype type = napi_undefined;
  struct unmount_work *w = calloc(1, sizeof *w);
  if (!w) {
    napi_throw_error(env, "ENOMEM", "out of memory");
    return NULL;
  }
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 3 || string_arg(env, argv[0], w->target, sizeof w->target) ||
      napi_get_value_bool(env, argv[1], &w->lazy) != napi_ok || napi_typeof(env, argv[2], &type) != napi_ok || type != napi_function) {
    free(w);
    napi_throw_type_error(env, NULL, "unmountAsync(target, lazy, callback) needs a path, a boolean and a function");
    return NULL;
  }
  napi_create_reference(env, argv[2], 1, &w->callback);
  if (!queue_work(env, "berth:unmount", unmount_execute, unmount_complete, w, &w->work)) {
    napi_delete_reference(env, w->callback);
    free(w);
    napi_throw_error(env, "EIO", "cannot queue the unmount");
  }
  return NULL;
}

static napi_value PeerCredentials(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t fd = -1;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 || napi_get_value_int32(env, argv[0], &fd) != napi_ok || fd < 0) {
    napi_throw_type_error(env, "EINVAL", "peerCredentials(fd): fd must be a file descriptor");
    return NULL;
  }
  struct ucred cred;
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return fail(env, errno, "getsockopt SO_PEERCRED of", "socket");
  napi_value out, v;
  napi_create_object(env, &out);
  napi_create_int32(env, cred.pid, &v);
  napi_set_named_property(env, out, "pid", v);
  napi_create_uint32(env, cred.uid, &v);
  napi_set_named_property(env, out, "uid", v);
  napi_create_uint32(env, cred.gid, &v);
  napi_set_named_property(env, out, "gid", v);
  return out;
}

static napi_value Pipe(napi_env env, napi_callback_info info) {
  (void)info;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return fail(env, errno, "pipe", "");
  napi_value arr, v;
  napi_create_array_with_length(env, 2, &arr);
  for (uint32_t i = 0; i < 2; i++) {
    napi_create_int32(env, fds[i], &v);
    napi_set_element(env, arr, i, v);
  }
  return arr;
}

/* Writes all of `data` to `fd`: 0, or the errno of the write that failed. */
static int write_all(int fd, const char *data, size_t length) {
  size_t done = 0;
  while (done < length) {
    ssize_t n = write(fd, data + done, length - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    done += (size_t)n;
  }
  return 0;
}

static napi_value SealedCopy(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  char file[4096];
  size_t len = 0;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 ||
      napi_get_value_string_utf8(env, argv[0], file, sizeof file, &len) != napi_ok || len == 0 || len >= sizeof file - 1) {
    napi_throw_type_error(env, NULL, "sealedCopy(path) needs a path");
    return NULL;
  }
  int src = open(file, O_RDONLY | O_CLOEXEC);
  if (src < 0) return fail(env, errno, "open", file);
  int fd = memfd_create("berth-runtime", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    int err = errno;
    close(src);
    return fail(env, err, "memfd_create for", file);
  }
  char buf[65536];
  int err = 0;
  for (;;) {
    ssize_t n = read(src, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) err = errno;
    else err = write_all(fd, buf, (size_t)n);
    if (err) break;
  }
  if (!err && fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) != 0) err = errno;
  close(src);
  if (err) {
    close(fd);
    return fail(env, err, "copy into a sealed memfd", file);
  }
  napi_value out;
  napi_create_int32(env, fd, &out);
  return out;
}

/* A JS array of strings as a NULL-terminated vector (freed by free_vector). */
static char **string_vector(napi_env env, napi_value array) {
  uint32_t n = 0;
  bool is_array = false;
  if (napi_is_array(env, array, &is_array) != napi_ok || !is_array || napi_get_array_length(env, array, &n) != napi_ok) return NULL;
  char **out = calloc(n + 1, sizeof *out);
  if (!out) return NULL;
  for (uint32_t i = 0; i < n; i++) {
    napi_value item;
    size_t len = 0;
    if (napi_get_element(env, array, i, &item) != napi_ok || napi_get_value_string_utf8(env, item, NULL, 0, &len) != napi_ok) goto bad;
    out[i] = malloc(len + 1);
    if (!out[i] || napi_get_value_string_utf8(env, item, out[i], len + 1, &len) != napi_ok) goto bad;
  }
  return out;
bad:
  for (uint32_t i = 0; i < n; i++) free(out[i]);
  free(out);
  return NULL;
}

static void free_vector(char **v) {
  if (!v) return;
  for (char **p = v; *p; p++) free(*p);
  free(v);
}

struct spawn_work {
  napi_async_work work;
  napi_ref callback;
  char file[4096], cwd[4096];
  char **args, **envp;
  int fds[64];
  uint32_t nfds;
  bool setsid;
  pid_t pid;
  int err;
};

static void spawn_free(struct spawn_work *w) {
  free_vector(w->args);
  free_vector(w->envp);
  free(w);
}

/* Reads spawn's arguments (file, args, env, cwd, fds, setsid) into a work item; NULL after throwing. */
static struct spawn_work *spawn_prepare(napi_env env, napi_value *argv) {
  struct spawn_work *w = calloc(1, sizeof *w);
  bool is_array = false;
  if (!w) {
    napi_throw_error(env, "ENOMEM", "out of memory");
    return NULL;
  }
  if (string_arg(env, argv[0], w->file, sizeof w->file) || string_arg(env, argv[3], w->cwd, sizeof w->cwd) ||
      napi_is_array(env, argv[4], &is_array) != napi_ok || !is_array || napi_get_array_length(env, argv[4], &w->nfds) != napi_ok ||
      w->nfds > 64 || napi_get_value_bool(env, argv[5], &w->setsid) != napi_ok) {
    free(w);
    napi_throw_type_error(env, NULL, "spawn(file, args, env, cwd, fds, setsid) needs strings, arrays and a boolean");
    return NULL;
  }
  for (uint32_t i = 0; i < w->nfds; i++) {
    napi_value item;
    int32_t fd = -1;
    if (napi_get_element(env, argv[4], i, &item) != napi_ok || napi_get_value_int32(env, item, &fd) != napi_ok) {
      free(w);
      napi_throw_type_error(env, NULL, "spawn: fds must be integers");
      return NULL;
    }
    w->fds[i] = fd;
  }
  w->args = string_vector(env, argv[1]);
  w->envp = string_vector(env, argv[2]);
  if (!w->args || !w->envp || !w->args[0]) {
    spawn_free(w);
    napi_throw_type_error(env, NULL, "spawn: args (at least argv[0]) and env must be arrays of strings");
    return NULL;
  }
  return w;
}

static void spawn_execute(napi_env env, void *data) {
  (void)env;
  struct spawn_work *w = data;
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  int err = 0;
  for (uint32_t i = 0; i < w->nfds && !err; i++) {
    if (w->fds[i] >= 0) err = posix_spawn_file_actions_adddup2(&actions, w->fds[i], (int)i);
    else err = posix_spawn_file_actions_addopen(&actions, (int)i, "/dev/null", O_RDWR, 0);
  }
  if (!err && w->cwd[0]) err = posix_spawn_file_actions_addchdir_np(&actions, w->cwd);
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  short flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | (w->setsid ? POSIX_SPAWN_SETSID : 0);
  if (!err) err = posix_spawnattr_setsigdefault(&attr, &all);
  if (!err) err = posix_spawnattr_setsigmask(&attr, &none);
  if (!err) err = posix_spawnattr_setflags(&attr, flags);
  w->pid = -1;
  if (!err) err = posix_spawn(&w->pid, w->file, &actions, &attr, w->args, w->envp);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  w->err = err;
}

static napi_value spawn_error(napi_env env, int err, const char *file) {
  char message[4200];
  snprintf(message, sizeof message, "spawn %s: %s", file, strerror(err));
  const char *code = err == ENOENT ? "ENOENT" : err == EACCES ? "EACCES" : err == EINVAL ? "EINVAL" : err == ENOMEM ? "ENOMEM" : "EIO";
  napi_value msg, codev, e;
  napi_create_string_utf8(env, message, NAPI_AUTO_LENGTH, &msg);
  napi_create_string_utf8(env, code, NAPI_AUTO_LENGTH, &codev);
  napi_create_error(env, codev, msg, &e);
  return e;
}

static napi_value Spawn(napi_env env, napi_callback_info info) {
  size_t argc = 6;
  napi_value argv[6];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 6) {
    napi_throw_type_error(env, NULL, "spawn(file, args, env, cwd, fds, setsid) needs six arguments");
    return NULL;
  }
  struct spawn_work *w = spawn_prepare(env, argv);
  if (!w) return NULL;
  spawn_execute(env, w);
  int err = w->err;
  pid_t pid = w->pid;
  if (err) {
    napi_throw(env, spawn_error(env, err, w->file));
    spawn_free(w);
    return NULL;
  }
  spawn_free(w);
  napi_value result;
  napi_create_int32(env, pid, &result);
  return result;
}

static void spawn_complete(napi_env env, napi_status status, void *data) {
  struct spawn_work *w = data;
  napi_value cb, global, args[2], result;
  napi_get_reference_value(env, w->callback, &cb);
  napi_get_global(env, &global);
  if (status != napi_ok && !w->err) w->err = ECANCELED;
  if (w->err) {
    args[0] = spawn_error(env, w->err, w->file);
    napi_get_null(env, &args[1]);
  } else {
    napi_get_null(env, &args[0]);
    napi_create_int32(env, w->pid, &args[1]);
  }
  napi_call_function(env, global, cb, 2, args, &result);
  napi_delete_reference(env, w->callback);
  napi_delete_async_work(env, w->work);
  spawn_free(w);
}

/* spawn on a thread of the pool: the vfork suspends that thread, not the event loop, until the exec. */
static napi_value SpawnAsync(napi_env env, napi_callback_info info) {
  size_t argc = 7;
  napi_value argv[7];
  napi_valuetype type = napi_undefined;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 7 || napi_typeof(env, argv[6], &type) != napi_ok || type != napi_function) {
    napi_throw_type_error(env, NULL, "spawnAsync(file, args, env, cwd, fds, setsid, callback) needs seven arguments");
    return NULL;
  }
  struct spawn_work *w = spawn_prepare(env, argv);
  if (!w) return NULL;
  napi_create_reference(env, argv[6], 1, &w->callback);
  if (!queue_work(env, "berth:spawn", spawn_execute, spawn_complete, w, &w->work)) {
    napi_delete_reference(env, w->callback);
    spawn_free(w);
    napi_throw_error(env, "EIO", "cannot queue the spawn");
  }
  return NULL;
}

struct wait_work {
  napi_async_work work;
  napi_ref callback;
  pid_t pid;
  int code;
};

static void wait_execute(napi_env env, void *data) {
  (void)env;
  struct wait_work *w = data;
  int status = 0;
  pid_t r;
  do r = waitpid(w->pid, &status, 0);
  while (r < 0 && errno == EINTR);
  if (r < 0) w->code = -1;
  else if (WIFEXITED(status)) w->code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) w->code = 128 + WTERMSIG(status);
  else w->code = -1;
}

static void wait_complete(napi_env env, napi_status status, void *data) {
  struct wait_work *w = data;
  napi_value cb, global, arg, result;
  napi_get_reference_value(env, w->callback, &cb);
  napi_get_global(env, &global);
  napi_create_int32(env, status == napi_ok ? w->code : -1, &arg);
  napi_call_function(env, global, cb, 1, &arg, &result);
  napi_delete_reference(env, w->callback);
  napi_delete_async_work(env, w->work);
  free(w);
}

static napi_value WaitPid(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_valuetype type = napi_undefined;
  int32_t pid = 0;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2 || napi_get_value_int32(env, argv[0], &pid) != napi_ok || pid <= 0 ||
      napi_typeof(env, argv[1], &type) != napi_ok || type != napi_function) {
    napi_throw_type_error(env, NULL, "waitpid(pid, callback) needs a process id and a function");
    return NULL;
  }
  struct wait_work *w = calloc(1, sizeof *w);
  if (!w) {
    napi_throw_error(env, "ENOMEM", "out of memory");
    return NULL;
  }
  w->pid = pid;
  napi_create_reference(env, argv[1], 1, &w->callback);
  if (!queue_work(env, "berth:waitpid", wait_execute, wait_complete, w, &w->work)) {
    napi_delete_reference(env, w->callback);
    free(w);
    napi_throw_error(env, "EIO", "cannot queue the wait");
  }
  return NULL;
}

/*
 * Removes `name` in the folder `parent`: a file, a symlink or a device at once; a folder after its entries,
 * provided it is on `dev` (a mount point is never entered). Returns 0 or an errno (the first one met; the
 * other entries are still removed).
 */
static int remove_at(int parent, const char *name, dev_t dev, int depth) {
  if (unlinkat(parent, name, 0) == 0 || errno == ENOENT) return 0;
  if (errno != EISDIR) return errno;
  if (depth > 512) return ELOOP;
  int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? 0 : errno;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return err;
  }
  if (st.st_dev != dev) {
    close(fd);
    return EXDEV;
  }
  DIR *dir = fdopendir(fd);
  if (!dir) {
    int err = errno;
    close(fd);
    return err;
  }
  int err = 0;
  /* Entries removed while the folder is read may make readdir skip others: read it again until it is empty. */
  for (int pass = 0; pass < 8; pass++) {
    int removed = 0;
    struct dirent *entry;
    rewinddir(dir);
    while ((entry = readdir(dir)) != NULL) {
      if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
      int e = remove_at(dirfd(dir), entry->d_name, dev, depth + 1);
      if (e && !err) err = e;
      removed++;
    }
    if (removed == 0 || err) break;
  }
  closedir(dir);
  if (err) return err;
  if (unlinkat(parent, name, AT_REMOVEDIR) != 0 && errno != ENOENT) return errno;
  return 0;
}

/* A task of the pool on one absolute path (removeTreeAsync, syncfsAsync). */
struct path_work {
  napi_async_work work;
  napi_ref callback;
  /* What the error message says was done to the path. */
  const char *what;
  char target[4096];
  int err;
};

static void remove_execute(napi_env env, void *data) {
  (void)env;
  struct path_work *w = data;
  struct stat st;
  if (lstat(w->target, &st) != 0) {
    w->err = errno == ENOENT ? 0 : errno;
    return;
  }
  char parent_path[4096];
  snprintf(parent_path, sizeof parent_path, "%s", w->target);
  char *slash = strrchr(parent_path, '/');
  const char *name = slash ? slash + 1 : parent_path;
  if (slash == parent_path) parent_path[1] = '\0';
  else if (slash) *slash = '\0';
  if (*name == '\0' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
    w->err = EINVAL;
    return;
  }
  int parent = open(slash ? parent_path : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (parent < 0) {
    w->err = errno;
    return;
  }
  w->err = remove_at(parent, name, st.st_dev, 0);
  close(parent);
}

static void syncfs_execute(napi_env env, void *data) {
  (void)env;
  struct path_work *w = data;
  int fd = open(w->target, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    w->err = errno;
    return;
  }
  w->err = syncfs(fd) != 0 ? errno : 0;
  close(fd);
}

static void path_complete(napi_env env, napi_status status, void *data) {
  struct path_work *w = data;
  call_back(env, w->callback, status != napi_ok ? ECANCELED : w->err, w->what, w->target);
  napi_delete_async_work(env, w->work);
  free(w);
}

/* Queues `execute` on the absolute path of argv[0], calling back argv[1]; `usage` is the TypeError's message. */
static napi_value path_task(napi_env env, napi_callback_info info, const char *usage, const char *resource, const char *what,
                            napi_async_execute_callback execute) {
  size_t argc = 2;
  napi_value argv[2];
  napi_valuetype type = napi_undefined;
  struct path_work *w = calloc(1, sizeof *w);
  if (!w) {
    napi_throw_error(env, "ENOMEM", "out of memory");
    return NULL;
  }
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2 || string_arg(env, argv[0], w->target, sizeof w->target) ||
      w->target[0] != '/' || napi_typeof(env, argv[1], &type) != napi_ok || type != napi_function) {
    free(w);
    napi_throw_type_error(env, NULL, usage);
    return NULL;
  }
  w->what = what;
  napi_create_reference(env, argv[1], 1, &w->callback);
  if (!queue_work(env, resource, execute, path_complete, w, &w->work)) {
    napi_delete_reference(env, w->callback);
    free(w);
    napi_throw_error(env, "EIO", "cannot queue the task");
  }
  return NULL;
}

static napi_value RemoveTreeAsync(napi_env env, napi_callback_info info) {
  return path_task(env, info, "removeTreeAsync(path, callback) needs an absolute path and a function", "berth:remove", "remove", remove_execute);
}

static napi_value SyncfsAsync(napi_env env, napi_callback_info info) {
  return path_task(env, info, "syncfsAsync(path, callback) needs an absolute path and a function", "berth:syncfs", "syncfs", syncfs_execute);
}

struct atomic_work {
  napi_async_work work;
  napi_ref callback;
  napi_ref buffer;
  const char *data;
  size_t length;
  char tmp[4096];
  char target[4096];
  int32_t mode;
  bool durable;
  int err;
  const char *step;
};

static void atomic_execute(napi_env env, void *data) {
  (void)env;
  struct atomic_work *w = data;
  int fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, (mode_t)w->mode);
  if (fd < 0) {
    w->err = errno;
    w->step = "open";
    return;
  }
  if ((w->err = write_all(fd, w->data, w->length)) != 0) w->step = "write";
  if (!w->err && w->durable && fsync(fd) != 0) {
    w->err = errno;
    w->step = "fsync";
  }
  if (close(fd) != 0 && !w->err) {
    w->err = errno;
    w->step = "close";
  }
  if (!w->err && rename(w->tmp, w->target) != 0) {
    w->err = errno;
    w->step = "rename";
  }
  if (w->err) {
    unlink(w->tmp);
    return;
  }
  if (!w->durable) return;
  char folder[4096];
  snprintf(folder, sizeof folder, "%s", w->target);
  char *slash = strrchr(folder, '/');
  if (!slash) return;
  if (slash == folder) slash[1] = '\0';
  else *slash = '\0';
  int dir = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0 || fsync(dir) != 0) {
    w->err = errno;
    w->step = "fsync the folder of";
  }
  if (dir >= 0) close(dir);
}

static void atomic_complete(napi_env env, napi_status status, void *data) {
  struct atomic_work *w = data;
  call_back(env, w->callback, status != napi_ok ? ECANCELED : w->err, w->step ? w->step : "write", w->target);
  napi_delete_reference(env, w->buffer);
  napi_delete_async_work(env, w->work);
  free(w);
}

static napi_value WriteFileAtomicAsync(napi_env env, napi_callback_info info) {
  size_t argc = 6;
  napi_value argv[6];
  napi_valuetype type = napi_undefined;
  bool is_buffer = false;
  struct atomic_work *w = calloc(1, sizeof *w);
  if (!w) {
    napi_throw_error(env, "ENOMEM", "out of memory");
    return NULL;
  }
  void *bytes = NULL;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 6 || string_arg(env, argv[0], w->tmp, sizeof w->tmp) ||
      string_arg(env, argv[1], w->target, sizeof w->target) || napi_is_buffer(env, argv[2], &is_buffer) != napi_ok || !is_buffer ||
      napi_get_buffer_info(env, argv[2], &bytes, &w->length) != napi_ok || napi_get_value_int32(env, argv[3], &w->mode) != napi_ok ||
      napi_get_value_bool(env, argv[4], &w->durable) != napi_ok || napi_typeof(env, argv[5], &type) != napi_ok || type != napi_function) {
    free(w);
    napi_throw_type_error(env, NULL, "writeFileAtomicAsync(tmp, target, data, mode, durable, callback) needs two paths, a Buffer, a mode, a boolean and a function");
    return NULL;
  }
  w->data = bytes;
  napi_create_reference(env, argv[2], 1, &w->buffer);
  napi_create_reference(env, argv[5], 1, &w->callback);
  if (!queue_work(env, "berth:write", atomic_execute, atomic_complete, w, &w->work)) {
    napi_delete_reference(env, w->callback);
    napi_delete_reference(env, w->buffer);
    free(w);
    napi_throw_error(env, "EIO", "cannot queue the write");
  }
  return NULL;
}

/*
 * fsBatchAsync(ops, cb): ops is an array of [name, path, arg?]:
 *   ["mkdir", path, mode]      mkdir; an existing folder is fine
 *   ["unlink", path]           unlink; a missing file is fine
 *   ["write", path, buffer, mode]  a new file (unlinked first, so never a truncation in place) with that content
 *   ["create", path, buffer, mode] a file that must not exist yet (EEXIST otherwise), written and fsynced: on a
 *                              journaling file system its fsync commits its name and the folders made before it
 *   ["rename", from, to]       rename; a missing source is fine (reported as ENOENT in the results)
 *   ["exists", path]           lstat: 0 when it exists, ENOENT when not
 * They run in order; the first failure stops the batch. cb(results): one errno per step (0 done, -1 not run).
 */
enum batch_kind { BATCH_MKDIR, BATCH_UNLINK, BATCH_WRITE, BATCH_CREATE, BATCH_RENAME, BATCH_EXISTS };

struct batch_op {
  enum batch_kind kind;
  char *path;
  char *to;
  const char *data;
  size_t length;
  int32_t mode;
  int result;
};

struct batch_work {
  napi_async_work work;
  napi_ref callback;
  napi_ref ops_ref;
  uint32_t count;
  struct batch_op *ops;
};

static int batch_write(struct batch_op *op, bool durable) {
  if (!durable && unlink(op->path) != 0 && errno != ENOENT) return errno;
  int fd = open(op->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, (mode_t)op->mode);
  if (fd < 0) return errno;
  int err = write_all(fd, op->data, op->length);
  if (!err && durable && fsync(fd) != 0) err = errno;
  if (close(fd) != 0 && !err) err = errno;
  return err;
}

static void batch_execute(napi_env env, void *data) {
  (void)env;
  struct batch_work *w = data;
  uint32_t i = 0;
  for (; i < w->count; i++) {
    struct batch_op *op = &w->ops[i];
    struct stat st;
    int err = 0;
    switch (op->kind) {
      case BATCH_MKDIR:
        if (mkdir(op->path, (mode_t)op->mode) != 0 && !(errno == EEXIST && stat(op->path, &st) == 0 && S_ISDIR(st.st_mode))) err = errno;
        break;
      case BATCH_UNLINK:
        if (unlink(op->path) != 0 && errno != ENOENT) err = errno;
        break;
      case BATCH_WRITE:
        err = batch_write(op, false);
        break;
      case BATCH_CREATE:
        err = batch_write(op, true);
        break;
      case BATCH_RENAME:
        if (rename(op->path, op->to) != 0) {
          if (errno == ENOENT) op->result = ENOENT;
          else err = errno;
        }
        break;
      case BATCH_EXISTS:
        if (lstat(op->path, &st) != 0) {
          if (errno == ENOENT) op->result = ENOENT;
          else err = errno;
        }
        break;
    }
    if (err) {
      op->result = err;
      i++;
      break;
    }
  }
  for (; i < w->count; i++) w->ops[i].result = -1;
}

static void batch_free(napi_env env, struct batch_work *w) {
  for (uint32_t i = 0; i < w->count; i++) {
    free(w->ops[i].path);
    free(w->ops[i].to);
  }
  free(w->ops);
  if (w->ops_ref) napi_delete_reference(env, w->ops_ref);
  if (w->callback) napi_delete_reference(env, w->callback);
  free(w);
}

static void batch_complete(napi_env env, napi_status status, void *data) {
  struct batch_work *w = data;
  napi_value cb, global, list, result;
  napi_get_reference_value(env, w->callback, &cb);
  napi_get_global(env, &global);
  napi_create_array_with_length(env, w->count, &list);
  for (uint32_t i = 0; i < w->count; i++) {
    napi_value v;
    napi_create_int32(env, status == napi_ok ? w->ops[i].result : ECANCELED, &v);
    napi_set_element(env, list, i, v);
  }
  napi_call_function(env, global, cb, 1, &list, &result);
  napi_delete_async_work(env, w->work);
  batch_free(env, w);
}

static char *batch_string(napi_env env, napi_value value) {
  size_t len = 0;
  if (napi_get_value_string_utf8(env, value, NULL, 0, &len) != napi_ok || len == 0 || len >= 4096) return NULL;
  char *out = malloc(len + 1);
  if (out && napi_get_value_string_utf8(env, value, out, len + 1, &len) != napi_ok) {
    free(out);
    return NULL;
  }
  return out;
}

static napi_value FsBatchAsync(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_valuetype type = napi_undefined;
  bool is_array = false;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2 || napi_is_array(env, argv[0], &is_array) != napi_ok || !is_array ||
      napi_typeof(env, argv[1], &type) != napi_ok || type != napi_function) {
    napi_throw_type_error(env, NULL, "fsBatchAsync(ops, callback) needs an array and a function");
    return NULL;
  }
  struct batch_work *w = calloc(1, sizeof *w);
  if (!w) {
    napi_throw_error(env, "ENOMEM", "out of memory");
    return NULL;
  }
  napi_get_array_length(env, argv[0], &w->count);
  w->ops = calloc(w->count ? w->count : 1, sizeof *w->ops);
  if (!w->ops) {
    free(w);
    napi_throw_error(env, "ENOMEM", "out of memory");
    return NULL;
  }
  for (uint32_t i = 0; i < w->count; i++) {
    napi_value item, v;
    char kind[16];
    size_t len = 0;
    struct batch_op *op = &w->ops[i];
    bool ok = napi_get_element(env, argv[0], i, &item) == napi_ok && napi_get_element(env, item, 0, &v) == napi_ok &&
              napi_get_value_string_utf8(env, v, kind, sizeof kind, &len) == napi_ok && napi_get_element(env, item, 1, &v) == napi_ok &&
              (op->path = batch_string(env, v)) != NULL;
    if (ok && strcmp(kind, "mkdir") == 0) {
      op->kind = BATCH_MKDIR;
      ok = napi_get_element(env, item, 2, &v) == napi_ok && napi_get_value_int32(env, v, &op->mode) == napi_ok;
    } else if (ok && strcmp(kind, "unlink") == 0) {
      op->kind = BATCH_UNLINK;
    } else if (ok && strcmp(kind, "exists") == 0) {
      op->kind = BATCH_EXISTS;
    } else if (ok && strcmp(kind, "rename") == 0) {
      op->kind = BATCH_RENAME;
      ok = napi_get_element(env, item, 2, &v) == napi_ok && (op->to = batch_string(env, v)) != NULL;
    } else if (ok && (strcmp(kind, "write") == 0 || strcmp(kind, "create") == 0)) {
      bool is_buffer = false;
      void *bytes = NULL;
      op->kind = kind[0] == 'w' ? BATCH_WRITE : BATCH_CREATE;
      ok = napi_get_element(env, item, 2, &v) == napi_ok && napi_is_buffer(env, v, &is_buffer) == napi_ok && is_buffer &&
           napi_get_buffer_info(env, v, &bytes, &op->length) == napi_ok && napi_get_element(env, item, 3, &v) == napi_ok &&
           napi_get_value_int32(env, v, &op->mode) == napi_ok;
      op->data = bytes;
    } else {
      ok = false;
    }
    if (!ok) {
      batch_free(env, w);
      napi_throw_type_error(env, NULL, "fsBatchAsync: each step is [\"mkdir\", path, mode], [\"unlink\", path], [\"write\" or \"create\", path, Buffer, mode], [\"rename\", from, to] or [\"exists\", path], with paths shorter than a page");
      return NULL;
    }
  }
  /* The buffers of the write steps stay alive through the array until the task completed. */
  napi_create_reference(env, argv[0], 1, &w->ops_ref);
  napi_create_reference(env, argv[1], 1, &w->callback);
  if (!queue_work(env, "berth:fsbatch", batch_execute, batch_complete, w, &w->work)) {
    batch_free(env, w);
    napi_throw_error(env, "EIO", "cannot queue the file system steps");
  }
  return NULL;
}

/*
 * mallocTrim(): gives the free memory of every malloc arena back to the kernel (malloc_trim(0) also releases
 * whole free pages inside the arenas, not only their tops). Node's own buffers and the thread pool's
 * threads allocate with malloc, and glibc keeps what they freed: after a burst of work that is megabytes of
 * an idle daemon's RSS. Returns whether any memory was released.
 */
/*
 * limitMallocArenas(n): at most n malloc arenas for all threads. glibc gives each thread that allocates (the
 * thread pool's 16, V8's workers) an arena of its own, up to 8 per core, and each keeps its own freed memory
 * in its own fragments: after bursts of container work that was about 8 MB more of an idle daemon's RSS
 * than with two arenas. Effective for arenas not created yet (call it before the thread pool works).
 */
static napi_value LimitMallocArenas(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t n = 0;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 1 || napi_get_value_int32(env, argv[0], &n) != napi_ok || n < 1) {
    napi_throw_type_error(env, NULL, "limitMallocArenas wants a count >= 1");
    return NULL;
  }
  napi_value result;
  napi_get_boolean(env, mallopt(M_ARENA_MAX, n) == 1, &result);
  return result;
}

static napi_value MallocTrim(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value result;
  napi_get_boolean(env, malloc_trim(0) == 1, &result);
  return result;
}

/* In heap.cc: V8's embedder call, which needs C++. */
napi_value LowMemoryNotification(napi_env env, napi_callback_info info);

static napi_value Init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "lowMemoryNotification", NAPI_AUTO_LENGTH, LowMemoryNotification, NULL, &fn);
  napi_set_named_property(env, exports, "lowMemoryNotification", fn);
  napi_create_function(env, "limitMallocArenas", NAPI_AUTO_LENGTH, LimitMallocArenas, NULL, &fn);
  napi_set_named_property(env, exports, "limitMallocArenas", fn);
  napi_create_function(env, "mallocTrim", NAPI_AUTO_LENGTH, MallocTrim, NULL, &fn);
  napi_set_named_property(env, exports, "mallocTrim", fn);
  napi_create_function(env, "mountOverlay", NAPI_AUTO_LENGTH, MountOverlay, NULL, &fn);
  napi_set_named_property(env, exports, "mountOverlay", fn);
  napi_create_function(env, "unmount", NAPI_AUTO_LENGTH, Unmount, NULL, &fn);
  napi_set_named_property(env, exports, "unmount", fn);
  napi_create_function(env, "unmountAsync", NAPI_AUTO_LENGTH, UnmountAsync, NULL, &fn);
  napi_set_named_property(env, exports, "unmountAsync", fn);
  napi_create_function(env, "mountOverlayAsync", NAPI_AUTO_LENGTH, MountOverlayAsync, NULL, &fn);
  napi_set_named_property(env, exports, "mountOverlayAsync", fn);
  napi_create_function(env, "peerCredentials", NAPI_AUTO_LENGTH, PeerCredentials, NULL, &fn);
  napi_set_named_property(env, exports, "peerCredentials", fn);
  napi_create_function(env, "pipe", NAPI_AUTO_LENGTH, Pipe, NULL, &fn);
  napi_set_named_property(env, exports, "pipe", fn);
  napi_create_function(env, "sealedCopy", NAPI_AUTO_LENGTH, SealedCopy, NULL, &fn);
  napi_set_named_property(env, exports, "sealedCopy", fn);
  napi_create_function(env, "spawn", NAPI_AUTO_LENGTH, Spawn, NULL, &fn);
  napi_set_named_property(env, exports, "spawn", fn);
  napi_create_function(env, "spawnAsync", NAPI_AUTO_LENGTH, SpawnAsync, NULL, &fn);
  napi_set_named_property(env, exports, "spawnAsync", fn);
  napi_create_function(env, "waitpid", NAPI_AUTO_LENGTH, WaitPid, NULL, &fn);
  napi_set_named_property(env, exports, "waitpid", fn);
  napi_create_function(env, "removeTreeAsync", NAPI_AUTO_LENGTH, RemoveTreeAsync, NULL, &fn);
  napi_set_named_property(env, exports, "removeTreeAsync", fn);
  napi_create_function(env, "syncfsAsync", NAPI_AUTO_LENGTH, SyncfsAsync, NULL, &fn);
  napi_set_named_property(env, exports, "syncfsAsync", fn);
  napi_create_function(env, "writeFileAtomicAsync", NAPI_AUTO_LENGTH, WriteFileAtomicAsync, NULL, &fn);
  napi_set_named_property(env, exports, "writeFileAtomicAsync", fn);
  napi_create_function(env, "fsBatchAsync", NAPI_AUTO_LENGTH, FsBatchAsync, NULL, &fn);
  napi_set_named_property(env, exports, "fsBatchAsync", fn);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
