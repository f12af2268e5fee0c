// The allocator's trim (src/infra/allocator-trim.ts): glibc's
// malloc_trim(0), which gives the kernel back every whole page its arenas
// hold free (each thread's arena, not only the main one's top), made on
// libuv's thread pool so the loop's thread never waits on its walk of the
// arenas. glibc keeps what threads and isolates freed for their next
// allocation; after a large run, and once a worker thread ends, nothing
// will ask for most of it again soon (design §9).
//
//   trimAllocator() → Promise of true when memory was given back, false
//   when none was, or where the C library has no malloc_trim (not glibc).
#include <node_api.h>
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include "trim.h"

typedef struct {
  napi_async_work work;
  napi_deferred deferred;
  int released;
} trim_job_t;

static void trim_execute(napi_env env, void *data) {
  (void)env;
  trim_job_t *job = data;
#ifdef __GLIBC__
  job->released = malloc_trim(0);
#else
  job->released = 0;
#endif
}

static void trim_complete(napi_env env, napi_status status, void *data) {
  trim_job_t *job = data;
  napi_value answer;
  napi_get_boolean(env, status == napi_ok && job->released != 0, &answer);
  napi_resolve_deferred(env, job->deferred, answer);
  napi_delete_async_work(env, job->work);
  free(job);
}

static napi_value trim_allocator(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value promise, name;
  trim_job_t *job = calloc(1, sizeof *job);
  if (job == NULL) {
    napi_throw_error(env, "ENOMEM", "trimAllocator: out of memory");
    return NULL;
  }
  if (napi_create_promise(env, &job->deferred, &promise) != napi_ok ||
      napi_create_string_utf8(env, "layoutd-trim", NAPI_AUTO_LENGTH, &name) != napi_ok ||
      napi_create_async_work(env, NULL, name, trim_execute, trim_complete, job, &job->work) != napi_ok ||
      napi_queue_async_work(env, job->work) != napi_ok) {
    free(job);
    napi_throw_error(env, NULL, "trimAllocator: could not queue the trim");
    return NULL;
  }
  return promise;
}

int register_trim(napi_env env, napi_value exports) {
  napi_value fn;
  return napi_create_function(env, "trimAllocator", NAPI_AUTO_LENGTH, trim_allocator, NULL, &fn) == napi_ok &&
         napi_set_named_property(env, exports, "trimAllocator", fn) == napi_ok;
}
