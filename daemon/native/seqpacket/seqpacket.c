/*
 * connect(path) -> fd: a connected AF_UNIX SOCK_SEQPACKET socket, close-on-exec, for conmon's attach
 * sockets. Node cannot create such sockets; the daemon hands the fd to libuv as a pipe handle, whose reads
 * and writes keep the packet boundaries (one read or write call per packet).
 */
#include <node_api.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static napi_value throw_errno(napi_env env, int err, const char *syscall, const char *path) {
  char message[512];
  snprintf(message, sizeof message, "%s %s: %s", syscall, path, strerror(err));
  const char *code = err == ENOENT ? "ENOENT" : err == ECONNREFUSED ? "ECONNREFUSED" : err == EACCES ? "EACCES"
                   : err == ENAMETOOLONG ? "ENAMETOOLONG" : err == ENOTDIR ? "ENOTDIR" : "EIO";
  napi_throw_error(env, code, message);
  return NULL;
}

static napi_value Connect(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1) {
    napi_throw_type_error(env, NULL, "connect(path) needs a path");
    return NULL;
  }
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  size_t len = 0;
  if (napi_get_value_string_utf8(env, argv[0], addr.sun_path, sizeof addr.sun_path, &len) != napi_ok) {
    napi_throw_type_error(env, NULL, "connect(path): path must be a string");
    return NULL;
  }
  if (len >= sizeof addr.sun_path - 1) return throw_errno(env, ENAMETOOLONG, "connect", addr.sun_path);
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return throw_errno(env, errno, "socket", addr.sun_path);
  int rc;
  do {
    rc = connect(fd, (struct sockaddr *)&addr, sizeof addr);
  } while (rc < 0 && errno == EINTR);
  if (rc < 0) {
    int err = errno;
    close(fd);
    return throw_errno(env, err, "connect", addr.sun_path);
  }
  napi_value result;
  napi_create_int32(env, fd, &result);
  return result;
}

/* The call's one argument as a file descriptor; -1, with a TypeError thrown, when it is none. */
static int fd_arg(napi_env env, napi_callback_info info, const char *usage) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t fd = -1;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 ||
      napi_get_value_int32(env, argv[0], &fd) != napi_ok || fd < 0) {
    napi_throw_type_error(env, NULL, usage);
    return -1;
  }
  return fd;
}

/*
 * drain(fd) -> [Buffer]: the packets still queued on the socket, read without blocking until the queue is
 * empty or the peer's end. libuv takes a short read followed by a hang-up for the end of a byte stream;
 * on a packet socket every read is "short", so packets queued when conmon hangs up would be dropped.
 */
static napi_value Drain(napi_env env, napi_callback_info info) {
  int fd = fd_arg(env, info, "drain(fd) needs a file descriptor");
  if (fd < 0) return NULL;
  napi_value list;
  napi_create_array(env, &list);
  uint32_t count = 0;
  static char packet[65536];
  for (;;) {
    ssize_t n = recv(fd, packet, sizeof packet, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    napi_value buffer;
    void *data;
    if (napi_create_buffer_copy(env, (size_t)n, packet, &data, &buffer) != napi_ok) break;
    napi_set_element(env, list, count++, buffer);
  }
  return list;
}

/*
 * dup(fd) -> fd: a close-on-exec duplicate. A read that fails with ECONNRESET (conmon closed the socket with
 * stdin packets it had not read) makes libuv close its fd; the packets conmon sent before are still queued,
 * and the duplicate lets them be drained.
 */
static napi_value Dup(napi_env env, napi_callback_info info) {
  int fd = fd_arg(env, info, "dup(fd) needs a file descriptor");
  if (fd < 0) return NULL;
  int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return throw_errno(env, errno, "dup", "attach socket");
  napi_value result;
  napi_create_int32(env, copy, &result);
  return result;
}

static napi_value Init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "connect", NAPI_AUTO_LENGTH, Connect, NULL, &fn);
  napi_set_named_property(env, exports, "connect", fn);
  napi_create_function(env, "drain", NAPI_AUTO_LENGTH, Drain, NULL, &fn);
  napi_set_named_property(env, exports, "drain", fn);
  napi_create_function(env, "dup", NAPI_AUTO_LENGTH, Dup, NULL, &fn);
  napi_set_named_property(env, exports, "dup", fn);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
