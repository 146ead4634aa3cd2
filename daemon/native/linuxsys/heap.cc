/*
 * lowMemoryNotification(): tells V8 that memory is short, as an embedder does when it goes idle. V8 then runs
 * full collections that shrink its heap (the young generation, and the old generation's free pages) and gives
 * the pages back. A daemon that has gone quiet after a burst of work otherwise keeps what the burst made V8
 * commit until V8's own memory reducer gets to it, if it does.
 */
#include <node_api.h>
#include <v8.h>

extern "C" napi_value LowMemoryNotification(napi_env env, napi_callback_info info) {
  (void)info;
  v8::Isolate* isolate = v8::Isolate::GetCurrent();
  if (isolate != nullptr) isolate->LowMemoryNotification();
  napi_value result;
  napi_get_undefined(env, &result);
  return result;
}
