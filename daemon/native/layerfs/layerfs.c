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

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    { "mknod", NULL, js_mknod, NULL, NULL, NULL, napi_default, NULL },
    { "lsetxattr", NULL, js_lsetxattr, NULL, NULL, NULL, napi_default, NULL },
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
