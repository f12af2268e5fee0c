// Preflight's walk of one source in C (design §3.3): every directory
// opened relative to its parent's descriptor (openat, O_NOFOLLOW) and
// listed with getdents64, every regular file's link count read with
// fstatat relative to its directory's: the kernel resolves one name at a
// time, never a path through a directory a tenant could have swapped, and
// nothing is made of an entry that is not a directory or a regular file.
// It finds what src/infra/pass/preflight.ts's walk finds, in the same
// order (a directory's names in strcmp order, its files before its
// directories, the last directory first), and src/infra/pass/c-walk.ts
// hands its answer to preflight.ts. It decides nothing of a host: it
// answers the facts.
//
//   walk(path: string | Buffer) → Promise of
//     { kind: 'ok', dev: bigint, ino: bigint }          the directory walked
//     { kind: 'second_name', path: Buffer, links }      the first such file
//     { kind: 'too_long', path: Buffer }                a path PATH_MAX refuses
//   rejected with an Error with its errno's code (`ENOENT`, `ENOTDIR`, …)
//   otherwise: the directory given must be a directory and not a symlink
//   (O_NOFOLLOW), as must each one under it when it is opened.
//
// The walk runs on libuv's thread pool (napi_create_async_work), as
// node:fs's own calls do: the loop's thread, which answers the activator,
// only hands it the path and builds its answer, whatever the tree's size.
// A bad argument throws at the call.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <node_api.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <uv.h>
#include "trim.h"

/** A growable run of bytes. */
typedef struct {
  char *p;
  size_t len, cap;
} bytes_t;

static int bytes_put(bytes_t *b, const char *src, size_t n) {
  if (b->len + n > b->cap) {
    size_t cap = b->cap == 0 ? 4096 : b->cap;
    while (cap < b->len + n) cap *= 2;
    char *p = realloc(b->p, cap);
    if (p == NULL) return -1;
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, src, n);
  b->len += n;
  return 0;
}

/** A listed name: where it is in the listing, its length and its type (DT_*). */
typedef struct {
  size_t off, len;
  unsigned char type;
} entry_t;

/** One directory's entries, read whole, then ordered as uv_fs_scandir orders them (strcmp). */
typedef struct {
  bytes_t names;
  entry_t *e;
  size_t n, cap;
} listing_t;

/** Orders two entries of one listing by name; names is the listing's bytes (qsort_r's argument, never a global: walks run on many threads). */
static int by_name(const void *a, const void *b, void *names) {
  const char *base = names;
  return strcmp(base + ((const entry_t *)a)->off, base + ((const entry_t *)b)->off);
}

/** Reads fd's entries but `.` and `..` into l; -1 with errno set on a failure. */
static int list_dir(int fd, listing_t *l) {
  char buf[32768];
  l->names.len = 0;
  l->n = 0;
  for (;;) {
    long got = syscall(SYS_getdents64, fd, buf, sizeof buf);
    if (got < 0) return -1;
    if (got == 0) break;
    for (long off = 0; off < got;) {
      struct dirent64 *d = (struct dirent64 *)(buf + off);
      off += d->d_reclen;
      const char *name = d->d_name;
      if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) continue;
      if (l->n == l->cap) {
        size_t cap = l->cap == 0 ? 64 : l->cap * 2;
        entry_t *e = realloc(l->e, cap * sizeof *e);
        if (e == NULL) return errno = ENOMEM, -1;
        l->e = e;
        l->cap = cap;
      }
      size_t len = strlen(name);
      l->e[l->n++] = (entry_t){.off = l->names.len, .len = len, .type = d->d_type};
      if (bytes_put(&l->names, name, len + 1) != 0) return errno = ENOMEM, -1;
    }
  }
  if (l->n > 1) qsort_r(l->e, l->n, sizeof *l->e, by_name, l->names.p);
  return 0;
}

/** What a walk found. */
typedef enum { FOUND_OK, FOUND_SECOND_NAME, FOUND_TOO_LONG, FOUND_ERROR } found_kind;

typedef struct {
  found_kind kind;
  dev_t dev;
  ino_t ino;
  nlink_t links;
  int err;             /* FOUND_ERROR: the errno */
  const char *syscall; /* FOUND_ERROR: the call that failed */
  bytes_t path;        /* the file or directory the answer is about */
} found_t;

static int found_path(found_t *f, found_kind kind, const char *dir, size_t dlen, const char *name, size_t nlen) {
  f->kind = kind;
  f->path.len = 0;
  if (bytes_put(&f->path, dir, dlen) != 0) return -1;
  if (nlen > 0 && (bytes_put(&f->path, "/", 1) != 0 || bytes_put(&f->path, name, nlen) != 0)) return -1;
  return 0;
}

static void found_error(found_t *f, int err, const char *call, const char *dir, size_t dlen, const char *name,
                        size_t nlen) {
  if (found_path(f, FOUND_ERROR, dir, dlen, name, nlen) != 0) f->path.len = 0;
  f->err = err;
  f->syscall = call;
}

/**
 * How deep a directory is opened relative to its parent's descriptor
 * (openat: nothing resolved but its own name); deeper, by its whole path,
 * so a walk holds at most this many descriptors however deep the tree.
 */
#define AT_DEPTH 32

/** A walk under way: the path of the directory it is in (NUL-ended, cut back as it climbs), and what it found. */
typedef struct {
  bytes_t path;
  found_t *f;
} walk_t;

/** Sets w's path to its first len bytes, NUL-ended. */
static void cut_path(walk_t *w, size_t len) {
  w->path.len = len;
  w->path.p[len] = '\0';
}

/** Appends "/name" to w's path, NUL-ended; -1 when out of memory. */
static int descend(walk_t *w, const char *name, size_t nlen) {
  size_t len = w->path.len;
  if (bytes_put(&w->path, "/", 1) != 0 || bytes_put(&w->path, name, nlen) != 0 || bytes_put(&w->path, "", 1) != 0)
    return -1;
  w->path.len = len + 1 + nlen;
  return 0;
}

/**
 * A directory's entries in order: each regular file's links read, each
 * directory's index kept for the descent after. 1 when the walk has its
 * answer (a second name, a path too long, an error), else 0.
 */
static int check_files(walk_t *w, int fd, listing_t *l) {
  found_t *f = w->f;
  const char *dir = w->path.p;
  size_t dlen = w->path.len;
  struct stat st;
  for (size_t i = 0; i < l->n; i++) {
    const char *name = l->names.p + l->e[i].off;
    size_t nlen = l->e[i].len;
    int have_stat = 0;
    if (l->e[i].type == DT_UNKNOWN) {
      // A filesystem that does not say (d_type): ask, without following a link.
      if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return found_error(f, errno, "lstat", dir, dlen, name, nlen), 1;
      l->e[i].type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
      have_stat = 1;
    }
    if (l->e[i].type != DT_REG) continue;
    // The path the JavaScript walk would lstat: refused by the kernel at PATH_MAX.
    if (dlen + 1 + nlen >= PATH_MAX) return found_path(f, FOUND_TOO_LONG, dir, dlen, name, nlen), 1;
    if (!have_stat && fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
      return found_error(f, errno, "lstat", dir, dlen, name, nlen), 1;
    if (st.st_nlink > 1) {
      found_path(f, FOUND_SECOND_NAME, dir, dlen, name, nlen);
      f->links = st.st_nlink;
      return 1;
    }
  }
  return 0;
}

/**
 * The directory at w's path (named `name` in the directory open as
 * parent, or by its whole path when parent is -1): opened, not through a
 * symlink; its files checked; then its directories walked, the last name
 * first, as preflight.ts takes them off its stack. 1 when the walk has its
 * answer, else 0.
 */
static int walk_dir(walk_t *w, int parent, const char *name, int depth) {
  found_t *f = w->f;
  size_t dlen = w->path.len;
  if (dlen >= PATH_MAX) return found_path(f, FOUND_TOO_LONG, w->path.p, dlen, NULL, 0), 1;
  int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  int fd = parent >= 0 ? openat(parent, name, flags) : open(w->path.p, flags);
  if (fd < 0) {
    if (errno == ENAMETOOLONG) return found_path(f, FOUND_TOO_LONG, w->path.p, dlen, NULL, 0), 1;
    return found_error(f, errno, "open", w->path.p, dlen, NULL, 0), 1;
  }
  struct stat st;
  listing_t l = {0};
  int done = 0;
  if (depth == 0) {
    if (fstat(fd, &st) != 0) {
      found_error(f, errno, "fstat", w->path.p, dlen, NULL, 0);
      done = 1;
    } else {
      f->dev = st.st_dev;
      f->ino = st.st_ino;
    }
  }
  if (!done && list_dir(fd, &l) != 0) {
    found_error(f, errno, "getdents64", w->path.p, dlen, NULL, 0);
    done = 1;
  }
  if (!done) done = check_files(w, fd, &l);
  if (!done && depth + 1 >= AT_DEPTH) {
    close(fd);
    fd = -1;
  }
  for (size_t i = l.n; i-- > 0 && !done;) {
    if (l.e[i].type != DT_DIR) continue;
    const char *child = l.names.p + l.e[i].off;
    if (descend(w, child, l.e[i].len) != 0) {
      found_error(f, ENOMEM, "malloc", w->path.p, dlen, NULL, 0);
      done = 1;
      break;
    }
    done = walk_dir(w, fd, child, depth + 1);
    cut_path(w, dlen);
  }
  if (fd >= 0) close(fd);
  free(l.names.p);
  free(l.e);
  return done;
}

/** The walk of one source, from its path. */
static void walk_tree(const char *root, size_t rlen, found_t *f) {
  walk_t w = {.f = f};
  f->kind = FOUND_OK;
  if (bytes_put(&w.path, root, rlen) != 0 || bytes_put(&w.path, "", 1) != 0) {
    found_error(f, ENOMEM, "malloc", root, rlen, NULL, 0);
  } else {
    w.path.len = rlen;
    walk_dir(&w, -1, NULL, 0);
  }
  free(w.path.p);
}

#define CHECK(call)                                                                                                    \
  do {                                                                                                                 \
    if ((call) != napi_ok) goto fail;                                                                                  \
  } while (0)

static napi_value buffer_of(napi_env env, const bytes_t *b) {
  napi_value out;
  void *data;
  if (napi_create_buffer_copy(env, b->len, b->p == NULL ? "" : b->p, &data, &out) != napi_ok) return NULL;
  return out;
}

static napi_value set_kind(napi_env env, napi_value obj, const char *kind) {
  napi_value v;
  if (napi_create_string_utf8(env, kind, NAPI_AUTO_LENGTH, &v) != napi_ok) return NULL;
  if (napi_set_named_property(env, obj, "kind", v) != napi_ok) return NULL;
  return obj;
}

/** The error a failed call is answered as: its code, and a message as node:fs words one. */
static napi_value errno_error(napi_env env, const found_t *f) {
  const char *code = uv_err_name(uv_translate_sys_error(f->err));
  const char *text = uv_strerror(uv_translate_sys_error(f->err));
  size_t n = strlen(code) + strlen(text) + strlen(f->syscall) + f->path.len + 16;
  char *msg = malloc(n);
  napi_value c, m, err;
  if (msg != NULL)
    snprintf(msg, n, "%s: %s, %s '%.*s'", code, text, f->syscall, (int)f->path.len, f->path.p == NULL ? "" : f->path.p);
  napi_status st = napi_create_string_utf8(env, code, NAPI_AUTO_LENGTH, &c);
  if (st == napi_ok) st = napi_create_string_utf8(env, msg == NULL ? text : msg, NAPI_AUTO_LENGTH, &m);
  free(msg);
  if (st == napi_ok) st = napi_create_error(env, c, m, &err);
  return st == napi_ok ? err : NULL;
}

/** What a finished walk answers: its findings (ok), or NULL with a failure to reject with in *err. */
static napi_value answer(napi_env env, found_t *f, napi_value *err) {
  napi_value obj, v;
  if (f->kind == FOUND_ERROR) {
    *err = errno_error(env, f);
    return NULL;
  }
  CHECK(napi_create_object(env, &obj));
  if (f->kind == FOUND_OK) {
    if (set_kind(env, obj, "ok") == NULL) goto fail;
    CHECK(napi_create_bigint_uint64(env, (uint64_t)f->dev, &v));
    CHECK(napi_set_named_property(env, obj, "dev", v));
    CHECK(napi_create_bigint_uint64(env, (uint64_t)f->ino, &v));
    CHECK(napi_set_named_property(env, obj, "ino", v));
    return obj;
  }
  if (set_kind(env, obj, f->kind == FOUND_SECOND_NAME ? "second_name" : "too_long") == NULL) goto fail;
  if ((v = buffer_of(env, &f->path)) == NULL) goto fail;
  CHECK(napi_set_named_property(env, obj, "path", v));
  if (f->kind == FOUND_SECOND_NAME) {
    CHECK(napi_create_double(env, (double)f->links, &v));
    CHECK(napi_set_named_property(env, obj, "links", v));
  }
  return obj;
fail:
  *err = NULL;
  return NULL;
}

/** The path given, as bytes: a Buffer as it is, a string as its UTF-8. Malloc'd, NUL-ended; NULL after a throw. */
static char *path_arg(napi_env env, napi_value arg, size_t *len) {
  bool is_buffer;
  napi_valuetype t;
  if (napi_is_buffer(env, arg, &is_buffer) != napi_ok || napi_typeof(env, arg, &t) != napi_ok) return NULL;
  char *p = NULL;
  if (is_buffer) {
    void *data;
    if (napi_get_buffer_info(env, arg, &data, len) != napi_ok) return NULL;
    if ((p = malloc(*len + 1)) != NULL) memcpy(p, data, *len);
  } else if (t == napi_string) {
    if (napi_get_value_string_utf8(env, arg, NULL, 0, len) != napi_ok) return NULL;
    if ((p = malloc(*len + 1)) != NULL && napi_get_value_string_utf8(env, arg, p, *len + 1, len) != napi_ok) {
      free(p);
      return NULL;
    }
  } else {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "walk: the path must be a string or a Buffer");
    return NULL;
  }
  if (p == NULL) {
    napi_throw_error(env, "ENOMEM", "walk: out of memory");
    return NULL;
  }
  p[*len] = '\0';
  if (memchr(p, '\0', *len) != NULL) {
    free(p);
    napi_throw_type_error(env, "ERR_INVALID_ARG_VALUE", "walk: the path must not contain a NUL byte");
    return NULL;
  }
  return p;
}

/** One walk handed to the pool: its path, what it found, and the promise to settle. */
typedef struct {
  char *root;
  size_t len;
  found_t f;
  napi_deferred deferred;
  napi_async_work work;
} job_t;

/** On a pool thread: the walk itself, no JavaScript. */
static void job_execute(napi_env env, void *data) {
  (void)env;
  job_t *job = data;
  walk_tree(job->root, job->len, &job->f);
}

/** Back on the loop's thread: the promise settled with what the walk found. */
static void job_complete(napi_env env, napi_status status, void *data) {
  job_t *job = data;
  napi_value out = NULL, err = NULL;
  if (status == napi_ok) out = answer(env, &job->f, &err);
  if (out != NULL) {
    napi_resolve_deferred(env, job->deferred, out);
  } else {
    if (err == NULL) {
      napi_value m;
      napi_create_string_utf8(env, "walk: could not build its answer", NAPI_AUTO_LENGTH, &m);
      napi_create_error(env, NULL, m, &err);
    }
    napi_reject_deferred(env, job->deferred, err);
  }
  napi_delete_async_work(env, job->work);
  free(job->f.path.p);
  free(job->root);
  free(job);
}

static napi_value walk(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value arg, promise, name;
  if (napi_get_cb_info(env, info, &argc, &arg, NULL, NULL) != napi_ok || argc < 1) {
    napi_throw_type_error(env, "ERR_MISSING_ARGS", "walk: a path is needed");
    return NULL;
  }
  job_t *job = calloc(1, sizeof *job);
  if (job == NULL) {
    napi_throw_error(env, "ENOMEM", "walk: out of memory");
    return NULL;
  }
  if ((job->root = path_arg(env, arg, &job->len)) == NULL) {
    free(job);
    return NULL;
  }
  if (napi_create_promise(env, &job->deferred, &promise) != napi_ok ||
      napi_create_string_utf8(env, "layoutd-walk", NAPI_AUTO_LENGTH, &name) != napi_ok ||
      napi_create_async_work(env, NULL, name, job_execute, job_complete, job, &job->work) != napi_ok ||
      napi_queue_async_work(env, job->work) != napi_ok) {
    free(job->root);
    free(job);
    napi_throw_error(env, NULL, "walk: could not queue the walk");
    return NULL;
  }
  return promise;
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  napi_value fn;
  if (napi_create_function(env, "walk", NAPI_AUTO_LENGTH, walk, NULL, &fn) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "walk", fn) != napi_ok) return NULL;
  // The same addon carries the allocator's trim (trim.c): one native build.
  if (!register_trim(env, exports)) return NULL;
  return exports;
}
