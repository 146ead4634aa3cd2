/*
 * Sockets bound inside another network namespace, for the embedded DNS server:
 *   bindInNetns(pid, stream, address, port) -> fd
 * opens an IPv4 socket (TCP when `stream`, else UDP) in the network namespace of PID, binds it to
 * ADDRESS:PORT there, and returns its descriptor; Node then serves on it (dgram bind({fd}),
 * net.Server listen({fd})). A socket keeps the namespace it was created in, so the daemon's thread goes
 * back to its own namespace at once. Errors are thrown with the errno name as `code`.
 */
#define _GNU_SOURCE
#include <node_api.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static napi_value fail(napi_env env, int err, const char *what, const char *arg) {
  char message[512];
  snprintf(message, sizeof message, "%s %s: %s", what, arg, strerror(err));
  const char *code = err == ENOENT ? "ENOENT" : err == EINVAL ? "EINVAL" : err == EADDRINUSE ? "EADDRINUSE" : err == EPERM ? "EPERM"
                   : err == EACCES ? "EACCES" : err == ESRCH ? "ESRCH" : err == EADDRNOTAVAIL ? "EADDRNOTAVAIL" : "EIO";
  napi_throw_error(env, code, message);
  return NULL;
}

static napi_value BindInNetns(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  int32_t pid = 0, port = 0;
  bool stream = false;
  char address[64];
  size_t len = 0;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 4 ||
      napi_get_value_int32(env, argv[0], &pid) != napi_ok || pid <= 0 ||
      napi_get_value_bool(env, argv[1], &stream) != napi_ok ||
      napi_get_value_string_utf8(env, argv[2], address, sizeof address, &len) != napi_ok || len + 1 >= sizeof address ||
      napi_get_value_int32(env, argv[3], &port) != napi_ok || port < 0 || port > 65535) {
    napi_throw_type_error(env, NULL, "bindInNetns(pid, stream, address, port) needs a pid, a boolean, an IPv4 address and a port");
    return NULL;
  }
  struct sockaddr_in sin;
  memset(&sin, 0, sizeof sin);
  sin.sin_family = AF_INET;
  sin.sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, address, &sin.sin_addr) != 1) {
    napi_throw_type_error(env, NULL, "bindInNetns: invalid IPv4 address");
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
  const char *step = "socket in";
  int sock = socket(AF_INET, (stream ? SOCK_STREAM : SOCK_DGRAM) | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (sock < 0) {
    err = errno;
  } else {
    int one = 1;
    if (stream) setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(sock, (struct sockaddr *)&sin, sizeof sin) != 0) {
      err = errno;
      step = "bind in";
      close(sock);
      sock = -1;
    }
  }
  if (setns(own, CLONE_NEWNET) != 0) {
    /* The thread cannot go back: nothing sane can continue on it. */
    perror("berthd: cannot return to the daemon's network namespace");
    abort();
  }
  close(own);
  if (err) return fail(env, err, step, path);
  napi_value result;
  napi_create_int32(env, sock, &result);
  return result;
}

static napi_value Init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "bindInNetns", NAPI_AUTO_LENGTH, BindInNetns, NULL, &fn);
  napi_set_named_property(env, exports, "bindInNetns", fn);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
