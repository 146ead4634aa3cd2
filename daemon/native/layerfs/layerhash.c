/*
 * SHA-256 of a stream, computed on libuv's thread pool instead of the JavaScript thread: layer digests
 * (diff ids, blob digests) cost about as much CPU as everything else of unpacking a layer, and the
 * daemon's one JavaScript thread is the bottleneck of a load or a pull.
 *
 *   create() -> hasher                    a new SHA-256 state
 *   update(hasher, buffers) -> Promise    hashes the buffers, in order, on the thread pool; the buffers are
 *                                         kept alive (and must not change) until the promise settles; one
 *                                         update at a time per hasher
 *   digest(hasher) -> string              the lowercase hex digest (once no update is running)
 *
 * It uses the OpenSSL that Node itself is linked with (its EVP symbols); built with -z now, so that a host
 * without them (another TLS library) fails to load the addon rather than failing at the first call.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <node_api.h>
#include <openssl/evp.h>

typedef struct {
  EVP_MD_CTX *ctx;
  bool busy;
  bool finished;
} hasher;

typedef struct {
  napi_async_work work;
  napi_deferred deferred;
  napi_ref buffers_ref;
  napi_ref hasher_ref;
  hasher *h;
  size_t count;
  const unsigned char **data;
  size_t *lengths;
  bool failed;
} update_job;

static void hasher_finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  hasher *h = data;
  if (h->ctx) EVP_MD_CTX_free(h->ctx);
  free(h);
}

static hasher *get_hasher(napi_env env, napi_value value) {
  void *data = NULL;
  if (napi_get_value_external(env, value, &data) != napi_ok) return NULL;
  return data;
}

static napi_value js_create(napi_env env, napi_callback_info info) {
  (void)info;
  hasher *h = calloc(1, sizeof *h);
  if (!h) {
    napi_throw_error(env, NULL, "out of memory");
    return NULL;
  }
  h->ctx = EVP_MD_CTX_new();
  if (!h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) {
    if (h->ctx) EVP_MD_CTX_free(h->ctx);
    free(h);
    napi_throw_error(env, NULL, "cannot start a SHA-256 digest");
    return NULL;
  }
  napi_value external;
  if (napi_create_external(env, h, hasher_finalize, NULL, &external) != napi_ok) {
    hasher_finalize(env, h, NULL);
    napi_throw_error(env, NULL, "cannot create the hasher");
    return NULL;
  }
  return external;
}

static void update_execute(napi_env env, void *data) {
  (void)env;
  update_job *job = data;
  for (size_t i = 0; i < job->count; i++) {
    if (EVP_DigestUpdate(job->h->ctx, job->data[i], job->lengths[i]) != 1) {
      job->failed = true;
      return;
    }
  }
}

static void update_complete(napi_env env, napi_status status, void *data) {
  update_job *job = data;
  job->h->busy = false;
  napi_value result;
  if (status != napi_ok || job->failed) {
    napi_value msg;
    napi_create_string_utf8(env, "SHA-256 update failed", NAPI_AUTO_LENGTH, &msg);
    napi_create_error(env, NULL, msg, &result);
    napi_reject_deferred(env, job->deferred, result);
  } else {
    napi_get_undefined(env, &result);
    napi_resolve_deferred(env, job->deferred, result);
  }
  napi_delete_reference(env, job->buffers_ref);
  napi_delete_reference(env, job->hasher_ref);
  napi_delete_async_work(env, job->work);
  free(job->data);
  free(job->lengths);
  free(job);
}

static napi_value js_update(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  bool isArray = false;
  hasher *h = argc >= 2 ? get_hasher(env, argv[0]) : NULL;
  if (argc >= 2) napi_is_array(env, argv[1], &isArray);
  if (!h || !isArray) {
    napi_throw_type_error(env, NULL, "update(hasher, buffers: Buffer[])");
    return NULL;
  }
  if (h->busy || h->finished) {
    napi_throw_error(env, NULL, h->busy ? "an update of this hasher is still running" : "the digest was already taken");
    return NULL;
  }
  uint32_t count = 0;
  napi_get_array_length(env, argv[1], &count);
  update_job *job = calloc(1, sizeof *job);
  if (job) {
    job->data = calloc(count ? count : 1, sizeof *job->data);
    job->lengths = calloc(count ? count : 1, sizeof *job->lengths);
  }
  if (!job || !job->data || !job->lengths) {
    if (job) {
      free(job->data);
      free(job->lengths);
      free(job);
    }
    napi_throw_error(env, NULL, "out of memory");
    return NULL;
  }
  job->h = h;
  job->count = count;
  for (uint32_t i = 0; i < count; i++) {
    napi_value element;
    bool isBuffer = false;
    napi_get_element(env, argv[1], i, &element);
    napi_is_buffer(env, element, &isBuffer);
    if (!isBuffer) {
      free(job->data);
      free(job->lengths);
      free(job);
      napi_throw_type_error(env, NULL, "update(hasher, buffers: Buffer[]): not a Buffer");
      return NULL;
    }
    void *bytes = NULL;
    napi_get_buffer_info(env, element, &bytes, &job->lengths[i]);
    job->data[i] = bytes;
  }
  // The array holds the buffers, so they stay alive until the work is done; so does the hasher.
  napi_create_reference(env, argv[1], 1, &job->buffers_ref);
  napi_create_reference(env, argv[0], 1, &job->hasher_ref);
  napi_value promise, resource_name;
  napi_create_promise(env, &job->deferred, &promise);
  napi_create_string_utf8(env, "layerhash.update", NAPI_AUTO_LENGTH, &resource_name);
  napi_create_async_work(env, NULL, resource_name, update_execute, update_complete, job, &job->work);
  h->busy = true;
  napi_queue_async_work(env, job->work);
  return promise;
}

static napi_value js_digest(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  hasher *h = argc >= 1 ? get_hasher(env, argv[0]) : NULL;
  if (!h) {
    napi_throw_type_error(env, NULL, "digest(hasher)");
    return NULL;
  }
  if (h->busy || h->finished) {
    napi_throw_error(env, NULL, h->busy ? "an update of this hasher is still running" : "the digest was already taken");
    return NULL;
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(h->ctx, md, &len) != 1) {
    napi_throw_error(env, NULL, "SHA-256 digest failed");
    return NULL;
  }
  h->finished = true;
  static const char hex[] = "0123456789abcdef";
  char out[2 * EVP_MAX_MD_SIZE + 1];
  for (unsigned int i = 0; i < len; i++) {
    out[2 * i] = hex[md[i] >> 4];
    out[2 * i + 1] = hex[md[i] & 15];
  }
  napi_value result;
  napi_create_string_latin1(env, out, 2 * len, &result);
  return result;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    { "create", NULL, js_create, NULL, NULL, NULL, napi_default, NULL },
    { "update", NULL, js_update, NULL, NULL, NULL, napi_default, NULL },
    { "digest", NULL, js_digest, NULL, NULL, NULL, napi_default, NULL },
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
