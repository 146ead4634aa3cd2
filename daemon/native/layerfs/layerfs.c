#include <stdio.h>
/*
 * The few system calls that layer unpacking needs and Node lacks: mknod (whiteouts as 0:0 character
 * devices, device nodes of image layers) and lsetxattr (overlay opaque markers, file capabilities and
 * other extended attributes kept in PAX headers). Paths are never followed when they end in a symlink.
 */
#include <errno.h>
#include <string.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/xattr.h>
#include <fcntl.h>
#include <unistd.h>
#include <node_api.h>

static napi_value throw_errno(napi_env env, const char *syscall, const char *path, int err) {
  char message[512];
  snprintf(message, sizeof message, "%s %s: %s", syscall, path, strerror(err));
  napi_value msg, error, code;
  napi_create_string_utf8(env, message, NAPI_AUTO_LENGTH, &msg);
  napi_create_error(env, NULL, msg, &error);
  const char *name = err == EEXIST ? "EEXIST" : err == ENOENT ? "ENOENT" : err == EPERM ? "EPERM" : err == ENOTSUP ? "ENOTSUP" : err == EACCES ? "EACCES" : "EIO";
  napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &code);
  napi_set_named_property(env, error, "code", code);
  napi_value errnoValue;
  napi_create_int32(env, err, &errnoValue);
  napi_set_named_property(env, error, "errno", errnoValue);
  napi_throw(env, error);
  return NULL;
}

static char *get_string(napi_env env, napi_value value) {
  size_t len = 0;
  if (napi_get_value_string_utf8(env, value, NULL, 0, &len) != napi_ok) return NULL;
  char *buf = malloc(len + 1);
  if (!buf) return NULL;
  napi_get_value_string_utf8(env, value, buf, len + 1, &len);
  return buf;
}

/* mknod(path, mode, major, minor): mode includes the file type bits (S_IFCHR, S_IFBLK, S_IFIFO). */
static napi_value js_mknod(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 4) {
    napi_throw_type_error(env, NULL, "mknod(path, mode, major, minor)");
    return NULL;
  }
  char *path = get_string(env, argv[0]);
  uint32_t mode, major, minor;
  napi_get_value_uint32(env, argv[1], &mode);
  napi_get_value_uint32(env, argv[2], &major);
  napi_get_value_uint32(env, argv[3], &minor);
  if (!path) {
    napi_throw_type_error(env, NULL, "path must be a string");
    return NULL;
  }
  if (mknod(path, (mode_t)mode, makedev(major, minor)) != 0) {
    int err = errno;
    napi_value r = throw_errno(env, "mknod", path, err);
    free(path);
    return r;
  }
  free(path);
  return NULL;
}

/* lsetxattr(path, name, value: Buffer) */
static napi_value js_lsetxattr(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 3) {
    napi_throw_type_error(env, NULL, "lsetxattr(path, name, value)");
    return NULL;
  }
  char *path = get_string(env, argv[0]);
  char *name = get_string(env, argv[1]);
  void *data = NULL;
  size_t length = 0;
  bool isBuffer = false;
  napi_is_buffer(env, argv[2], &isBuffer);
  if (!path || !name || !isBuffer) {
    free(path);
    free(name);
    napi_throw_type_error(env, NULL, "lsetxattr(path: string, name: string, value: Buffer)");
    return NULL;
  }
  napi_get_buffer_info(env, argv[2], &data, &length);
  if (lsetxattr(path, name, data, length, 0) != 0) {
    int err = errno;
    napi_value r = throw_errno(env, "lsetxattr", path, err);
    free(path);
    free(name);
    return r;
  }
  free(path);
  free(name);
  return NULL;
}

/*
 * writeFile(path, data: Buffer, mode, uid, gid, mtimeSec, mtimeNsec): Promise<void>
 *
 * Creates a new regular file (O_EXCL|O_NOFOLLOW: never an existing file, never through a final symlink)
 * and writes, owns, modes and dates it, all on a thread-pool thread: one round trip for what would be
 * open, write, fchown, fchmod, futimens and close. On failure after the open, the partial file is
 * left for the caller (it removes the whole layer folder).
 */
typedef struct {
  napi_async_work work;
  napi_deferred deferred;
  napi_ref data_ref;
  char *path;
  const char *data;
  size_t length;
  mode_t mode;
  uid_t uid;
  gid_t gid;
  struct timespec times[2];
  int err;
  const char *syscall;
} write_file_job;

static void write_file_execute(napi_env env, void *arg) {
  (void)env;
  write_file_job *job = arg;
  int fd = open(job->path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    job->err = errno;
    job->syscall = "open";
    return;
  }
  size_t done = 0;
  while (done < job->length) {
    ssize_t n = write(fd, job->data + done, job->length - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      job->err = errno;
      job->syscall = "write";
      close(fd);
      return;
    }
    done += (size_t)n;
  }
  if (fchown(fd, job->uid, job->gid) != 0) {
    job->err = errno;
    job->syscall = "fchown";
  } else if (fchmod(fd, job->mode) != 0) {
    job->err = errno;
    job->syscall = "fchmod";
  } else if (futimens(fd, job->times) != 0) {
    job->err = errno;
    job->syscall = "futimens";
  }
  if (close(fd) != 0 && job->err == 0) {
    job->err = errno;
    job->syscall = "close";
  }
}

static napi_value make_errno_error(napi_env env, const char *syscall, const char *path, int err) {
  char message[512];
  snprintf(message, sizeof message, "%s %s: %s", syscall, path, strerror(err));
  napi_value msg, error, code, errnoValue, sc;
  napi_create_string_utf8(env, message, NAPI_AUTO_LENGTH, &msg);
  napi_create_error(env, NULL, msg, &error);
  const char *name = err == EEXIST ? "EEXIST" : err == ENOENT ? "ENOENT" : err == EPERM ? "EPERM" : err == ENOTSUP ? "ENOTSUP" : err == EACCES ? "EACCES"
    : err == ENOTDIR ? "ENOTDIR" : err == EISDIR ? "EISDIR" : err == ELOOP ? "ELOOP" : err == ENOSPC ? "ENOSPC" : err == EDQUOT ? "EDQUOT" : err == EROFS ? "EROFS" : err == ENAMETOOLONG ? "ENAMETOOLONG" : "EIO";
  napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &code);
  napi_set_named_property(env, error, "code", code);
  napi_create_int32(env, err, &errnoValue);
  napi_set_named_property(env, error, "errno", errnoValue);
  napi_create_string_utf8(env, syscall, NAPI_AUTO_LENGTH, &sc);
  napi_set_named_property(env, error, "syscall", sc);
  return error;
}

static void write_file_complete(napi_env env, napi_status status, void *arg) {
  write_file_job *job = arg;
  if (status != napi_ok) {
    napi_value error = make_errno_error(env, "writeFile", job->path, ECANCELED);
    napi_reject_deferred(env, job->deferred, error);
  } else if (job->err != 0) {
    napi_value error = make_errno_error(env, job->syscall, job->path, job->err);
    napi_reject_deferred(env, job->deferred, error);
  } else {
    napi_value undef;
    napi_get_undefined(env, &undef);
    napi_resolve_deferred(env, job->deferred, undef);
  }
  napi_delete_reference(env, job->data_ref);
  napi_delete_async_work(env, job->work);
  free(job->path);
  free(job);
}

static napi_value js_write_file(napi_env env, napi_callback_info info) {
  size_t argc = 7;
  napi_value argv[7];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  bool isBuffer = false;
  if (argc >= 2) napi_is_buffer(env, argv[1], &isBuffer);
  if (argc < 7 || !isBuffer) {
    napi_throw_type_error(env, NULL, "writeFile(path, data: Buffer, mode, uid, gid, mtimeSec, mtimeNsec)");
    return NULL;
  }
  write_file_job *job = calloc(1, sizeof *job);
  if (!job) {
    napi_throw_error(env, NULL, "out of memory");
    return NULL;
  }
  job->path = get_string(env, argv[0]);
  if (!job->path) {
    free(job);
    napi_throw_type_error(env, NULL, "path must be a string");
    return NULL;
  }
  void *data = NULL;
  napi_get_buffer_info(env, argv[1], &data, &job->length);
  job->data = data;
  uint32_t mode, uid, gid, nsec;
  int64_t sec;
  napi_get_value_uint32(env, argv[2], &mode);
  napi_get_value_uint32(env, argv[3], &uid);
  napi_get_value_uint32(env, argv[4], &gid);
  napi_get_value_int64(env, argv[5], &sec);
  napi_get_value_uint32(env, argv[6], &nsec);
  job->mode = (mode_t)(mode & 07777);
  job->uid = (uid_t)uid;
  job->gid = (gid_t)gid;
  job->times[0].tv_sec = (time_t)sec;
  job->times[0].tv_nsec = nsec % 1000000000u;
  job->times[1] = job->times[0];
  napi_create_reference(env, argv[1], 1, &job->data_ref);
  napi_value promise, resource_name;
  napi_create_promise(env, &job->deferred, &promise);
  napi_create_string_utf8(env, "layerfs.writeFile", NAPI_AUTO_LENGTH, &resource_name);
  napi_create_async_work(env, NULL, resource_name, write_file_execute, write_file_complete, job, &job->work);
  napi_queue_async_work(env, job->work);
  return promise;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    { "mknod", NULL, js_mknod, NULL, NULL, NULL, napi_default, NULL },
    { "lsetxattr", NULL, js_lsetxattr, NULL, NULL, NULL, napi_default, NULL },
    { "writeFile", NULL, js_write_file, NULL, NULL, NULL, napi_default, NULL },
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
