/*
 * System calls on the hot path of a container start that would otherwise each cost a process spawn:
 *   mountOverlay(target, options)  mount -t overlay overlay -o OPTIONS TARGET
 *   unmount(target, lazy)          umount [-l] TARGET
 *   loopbackUp(pid)                bring `lo` up in the network namespace of PID
 *   unmountAsync(target, lazy, cb) umount [-l] TARGET on a thread of the pool, then cb(err|null): unmounting
 *                                  an overlay syncs its upper filesystem, which can take long on a busy disk
 * Errors are thrown with the errno name as `code`.
 */
#define _GNU_SOURCE
#include <node_api.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

static napi_value fail(napi_env env, int err, const char *what, const char *arg) {
  char message[4200];
  snprintf(message, sizeof message, "%s %s: %s", what, arg, strerror(err));
  const char *code = err == ENOENT ? "ENOENT" : err == EINVAL ? "EINVAL" : err == EBUSY ? "EBUSY" : err == EPERM ? "EPERM"
                   : err == EACCES ? "EACCES" : err == ESRCH ? "ESRCH" : err == ENOTDIR ? "ENOTDIR" : "EIO";
  napi_throw_error(env, code, message);
  return NULL;
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

/*
 * Joins the network namespace of `pid` on this thread only, sets `lo` up there, and returns to the thread's
 * own namespace before returning; nothing else runs on the thread meanwhile (the call is synchronous).
 */
static napi_value LoopbackUp(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t pid = 0;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 || napi_get_value_int32(env, argv[0], &pid) != napi_ok || pid <= 0) {
    napi_throw_type_error(env, NULL, "loopbackUp(pid) needs a process id");
    return NULL;
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/ns/net", pid);
  int own = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (own < 0) return fail(env, errno, "open", "/proc/thread-self/ns/net");
  int target = open(path, O_RDONLY | O_CLOEXEC);
  if (target < 0) {
    int err = errno;
    close(own);
    return fail(env, err, "open", path);
  }
  if (setns(target, CLONE_NEWNET) != 0) {
    int err = errno;
    close(own);
    close(target);
    return fail(env, err, "setns", path);
  }
  close(target);
  int err = 0;
  int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (sock < 0) {
    err = errno;
  } else {
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
    if (ioctl(sock, SIOCGIFFLAGS, &ifr) != 0) err = errno;
    else {
      ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
      if (ioctl(sock, SIOCSIFFLAGS, &ifr) != 0) err = errno;
    }
    close(sock);
  }
  if (setns(own, CLONE_NEWNET) != 0) {
    /* The thread cannot go back: nothing sane can continue on it. */
    perror("berthd: cannot return to the daemon's network namespace");
    abort();
  }
  close(own);
  if (err) return fail(env, err, "set lo up in", path);
  return NULL;
}

struct unmount_work {
  napi_async_work work;
  napi_ref callback;
  char target[4096];
  bool lazy;
  int err;
};

static void unmount_execute(napi_env env, void *data) {
  (void)env;
  struct unmount_work *w = data;
  w->err = umount2(w->target, w->lazy ? MNT_DETACH : 0) != 0 ? errno : 0;
}

static void unmount_complete(napi_env env, napi_status status, void *data) {
  struct unmount_work *w = data;
  napi_value cb, global, arg, result;
  napi_get_reference_value(env, w->callback, &cb);
  napi_get_global(env, &global);
  if (status != napi_ok) w->err = ECANCELED;
  if (w->err) {
    char message[4200];
    snprintf(message, sizeof message, "umount %s: %s", w->target, strerror(w->err));
    const char *code = w->err == ENOENT ? "ENOENT" : w->err == EINVAL ? "EINVAL" : w->err == EBUSY ? "EBUSY" : w->err == EPERM ? "EPERM" : "EIO";
    napi_value msg, codev;
    napi_create_string_utf8(env, message, NAPI_AUTO_LENGTH, &msg);
    napi_create_string_utf8(env, code, NAPI_AUTO_LENGTH, &codev);
    napi_create_error(env, codev, msg, &arg);
  } else {
    napi_get_null(env, &arg);
  }
  napi_call_function(env, global, cb, 1, &arg, &result);
  napi_delete_reference(env, w->callback);
  napi_delete_async_work(env, w->work);
  free(w);
}

static napi_value UnmountAsync(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3], name;
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
  napi_create_string_utf8(env, "berth:unmount", NAPI_AUTO_LENGTH, &name);
  if (napi_create_async_work(env, NULL, name, unmount_execute, unmount_complete, w, &w->work) != napi_ok || napi_queue_async_work(env, w->work) != napi_ok) {
    napi_delete_reference(env, w->callback);
    free(w);
    napi_throw_error(env, "EIO", "cannot queue the unmount");
  }
  return NULL;
}

static napi_value Init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "mountOverlay", NAPI_AUTO_LENGTH, MountOverlay, NULL, &fn);
  napi_set_named_property(env, exports, "mountOverlay", fn);
  napi_create_function(env, "unmount", NAPI_AUTO_LENGTH, Unmount, NULL, &fn);
  napi_set_named_property(env, exports, "unmount", fn);
  napi_create_function(env, "loopbackUp", NAPI_AUTO_LENGTH, LoopbackUp, NULL, &fn);
  napi_set_named_property(env, exports, "loopbackUp", fn);
  napi_create_function(env, "unmountAsync", NAPI_AUTO_LENGTH, UnmountAsync, NULL, &fn);
  napi_set_named_property(env, exports, "unmountAsync", fn);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
