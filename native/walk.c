// Preflight's walk of one source in C (design §3.3): every directory
// listed with getdents64 and every regular file's link count read with
// fstatat relative to its directory's descriptor, so the kernel resolves a
// directory's path once, not once for each of its files, and nothing is
// made of an entry that is not a directory or a regular file. It finds what
// src/infra/pass/preflight.ts's walk finds, in the same order (a
// directory's names in strcmp order, directories taken last in, first
// out), and src/infra/pass/native-walk.ts turns its answer into a
// Preflight. It decides nothing of a host: it answers the facts.
//
//   walk(path: string | Buffer) →
//     { kind: 'ok', dev: bigint, ino: bigint }          the directory walked
//     { kind: 'second_name', path: Buffer, links }      the first such file
//     { kind: 'too_long', path: Buffer }                a path PATH_MAX refuses
//   throws an Error with its errno's code (`ENOENT`, `ELOOP`, …) otherwise:
//   the directory given must be a directory and not a symlink
//   (O_NOFOLLOW), as must each one under it when it is opened.
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

/** The directories still to list: their paths, NUL-ended, one after another in `buf`. */
typedef struct {
  bytes_t buf;
  size_t *at;
  size_t n, cap;
} todo_t;

static int stack_push(todo_t *s, const char *dir, size_t dlen, const char *name, size_t nlen) {
  if (s->n == s->cap) {
    size_t cap = s->cap == 0 ? 64 : s->cap * 2;
    size_t *at = realloc(s->at, cap * sizeof *at);
    if (at == NULL) return -1;
    s->at = at;
    s->cap = cap;
  }
  s->at[s->n++] = s->buf.len;
  if (bytes_put(&s->buf, dir, dlen) != 0) return -1;
  if (nlen > 0 && (bytes_put(&s->buf, "/", 1) != 0 || bytes_put(&s->buf, name, nlen) != 0)) return -1;
  return bytes_put(&s->buf, "", 1);
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
 * One directory: opened (not through a symlink), listed, each regular
 * file's links read, each directory put on the stack. 1 when the walk
 * has its answer (a second name, a path too long, an error), else 0.
 */
static int walk_dir(const char *dir, size_t dlen, int top, todo_t *todo, listing_t *l, found_t *f) {
  if (dlen >= PATH_MAX) return found_path(f, FOUND_TOO_LONG, dir, dlen, NULL, 0), 1;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENAMETOOLONG) return found_path(f, FOUND_TOO_LONG, dir, dlen, NULL, 0), 1;
    return found_error(f, errno, "open", dir, dlen, NULL, 0), 1;
  }
  int done = 0;
  struct stat st;
  if (top) {
    if (fstat(fd, &st) != 0) {
      found_error(f, errno, "fstat", dir, dlen, NULL, 0);
      close(fd);
      return 1;
    }
    f->dev = st.st_dev;
    f->ino = st.st_ino;
  }
  if (list_dir(fd, l) != 0) {
    found_error(f, errno, "getdents64", dir, dlen, NULL, 0);
    close(fd);
    return 1;
  }
  for (size_t i = 0; i < l->n && !done; i++) {
    const char *name = l->names.p + l->e[i].off;
    size_t nlen = l->e[i].len;
    unsigned char type = l->e[i].type;
    int have_stat = 0;
    if (type == DT_UNKNOWN) {
      // A filesystem that does not say (d_type): ask, without following a link.
      if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        found_error(f, errno, "lstat", dir, dlen, name, nlen);
        done = 1;
        break;
      }
      type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
      have_stat = 1;
    }
    if (type == DT_DIR) {
      if (stack_push(todo, dir, dlen, name, nlen) != 0) found_error(f, ENOMEM, "malloc", dir, dlen, NULL, 0), done = 1;
      continue;
    }
    if (type != DT_REG) continue;
    // The path the JavaScript walk would lstat: refused by the kernel at PATH_MAX.
    if (dlen + 1 + nlen >= PATH_MAX) {
      found_path(f, FOUND_TOO_LONG, dir, dlen, name, nlen);
      done = 1;
    } else if (!have_stat && fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      found_error(f, errno, "lstat", dir, dlen, name, nlen);
      done = 1;
    } else if (st.st_nlink > 1) {
      found_path(f, FOUND_SECOND_NAME, dir, dlen, name, nlen);
      f->links = st.st_nlink;
      done = 1;
    }
  }
  close(fd);
  return done;
}

/** The walk of one source: its directories last in, first out, as preflight.ts takes them. */
static void walk_tree(const char *root, size_t rlen, found_t *f) {
  todo_t todo = {0};
  listing_t l = {0};
  f->kind = FOUND_OK;
  int done = walk_dir(root, rlen, 1, &todo, &l, f);
  while (!done && todo.n > 0) {
    size_t at = todo.at[--todo.n];
    // The path is copied out: pushing its children may move the stack's bytes.
    size_t len = strlen(todo.buf.p + at);
    char *dir = malloc(len + 1);
    if (dir == NULL) {
      found_error(f, ENOMEM, "malloc", root, rlen, NULL, 0);
      break;
    }
    memcpy(dir, todo.buf.p + at, len + 1);
    todo.buf.len = at;
    done = walk_dir(dir, len, 0, &todo, &l, f);
    free(dir);
  }
  free(todo.buf.p);
  free(todo.at);
  free(l.names.p);
  free(l.e);
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

/** The error a failed call is thrown as: its code, and a message as node:fs words one. */
static void throw_errno(napi_env env, const found_t *f) {
  const char *code = uv_err_name(uv_translate_sys_error(f->err));
  const char *text = uv_strerror(uv_translate_sys_error(f->err));
  size_t n = strlen(code) + strlen(text) + strlen(f->syscall) + f->path.len + 16;
  char *msg = malloc(n);
  if (msg == NULL) {
    napi_throw_error(env, code, text);
    return;
  }
  snprintf(msg, n, "%s: %s, %s '%.*s'", code, text, f->syscall, (int)f->path.len, f->path.p == NULL ? "" : f->path.p);
  napi_throw_error(env, code, msg);
  free(msg);
}

static napi_value answer(napi_env env, found_t *f) {
  napi_value obj, v;
  if (f->kind == FOUND_ERROR) {
    throw_errno(env, f);
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
  napi_throw_error(env, NULL, "walk: could not build its answer");
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

static napi_value walk(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value arg;
  if (napi_get_cb_info(env, info, &argc, &arg, NULL, NULL) != napi_ok || argc < 1) {
    napi_throw_type_error(env, "ERR_MISSING_ARGS", "walk: a path is needed");
    return NULL;
  }
  size_t len;
  char *root = path_arg(env, arg, &len);
  if (root == NULL) return NULL;
  found_t f = {0};
  walk_tree(root, len, &f);
  free(root);
  napi_value out = answer(env, &f);
  free(f.path.p);
  return out;
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  napi_value fn;
  if (napi_create_function(env, "walk", NAPI_AUTO_LENGTH, walk, NULL, &fn) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "walk", fn) != napi_ok) return NULL;
  return exports;
}
