// The allocator's trim (trim.c), registered on the addon's exports by walk.c's init.
#ifndef LAYOUTD_TRIM_H
#define LAYOUTD_TRIM_H
#include <node_api.h>

/** Sets exports.trimAllocator; nonzero when it did. */
int register_trim(napi_env env, napi_value exports);

#endif
