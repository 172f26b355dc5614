/* loader.c — opens plugin shared objects and decides whether they fit.
 *
 * This module owns the dlopen handle of every loaded plugin and the checks
 * that stand between a file on disk and the first call into it.  The order
 * is fixed: dlopen with RTLD_NOW | RTLD_LOCAL (so an unresolved symbol fails
 * here, not in the middle of a workflow), hash the file, find `duro_plugin`,
 * check the descriptor (magic, size, ABI major and minor, the layout
 * fingerprint field by field, then the workflow table), and only then bind
 * the API table and call init.  Nothing in the plugin runs before its
 * descriptor has been accepted, except its ELF constructors, which plugins
 * must not have.
 *
 * A plugin built against an older minor of the ABI has smaller structs than
 * this host (duro.h, "Which plugins a host loads").  So the descriptor and
 * the workflow table are never used in place: they are read into structs of
 * this host's size, as many bytes as the plugin's sizes say, zero beyond,
 * and everything after the first few fields (magic, size, versions and
 * layout, which every descriptor starts with) is checked and used in that
 * copy.
 *
 * Invariants of a loader_plugin: the handle is open, its descriptor copy
 * passed the checks, bind was called with the host's table (which must
 * outlive the plugin), and init (if any) returned 0, so loader_close owes
 * it a fini.  Every refusal returns DURO_E_PLUGIN and a message of the form
 * `plugin "NAME" (PATH): FIELD is X, this host ... Y`; the loader itself
 * never logs, the caller that has the context does.
 *
 * dlopen returns the same handle for a path that is already open, so two
 * loads of one path share one copy of the plugin's statics.  A reload must
 * therefore open a copy at a fresh path (reload/ does that); the build
 * identity computed here is what names that copy. */
#include "loader.h"

#include <assert.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

struct loader_plugin {
  void *handle;
  duro_plugin_info info;        /* read_descriptor's copy */
  duro_workflow_def *workflows; /* read_workflow's copies; info.workflows */
  char build[17];               /* 16 lowercase hex digits and a NUL */
};

/* The layout this host was compiled with. */
static const duro_layout host_layout = DURO_LAYOUT_INIT;

/* What every descriptor of every minor starts with (magic, size, versions,
 * layout): the checks read these before anything else, so a descriptor
 * shorter than this cannot be judged at all. */
#define DESCRIPTOR_HEAD offsetof(duro_plugin_info, name)

/* Where a member ends: a struct smaller than that does not hold it. */
#define END_OF(type, member)                                                   \
  (offsetof(type, member) + sizeof(((type *)0)->member))

/* Every duro_layout field, so a mismatch can be named, and how far the
 * plugin's value may differ from the host's.  A `grows` struct may be
 * smaller than the host's (a plugin built against an older minor) but
 * never larger; the others must be equal.  `least` is a floor for the two
 * structs the engine reads member by member without looking at the
 * plugin's sizes: the members minor 0 gave them, which every plugin of this
 * major has (a member appended later is read only where the plugin's size
 * reaches it, see loader_info).  The others need none: the plugin reads its
 * own prefix of the table and the event, and a workflow entry too short to
 * hold its class name or entrypoint reads as NULL there and is refused for
 * that.
 * The static assert breaks the build when a field is added to duro_layout
 * without a row here, which would otherwise go unchecked. */
static const struct {
  const char *field;
  size_t offset;
  int grows;
  size_t least;
} layout_fields[] = {
    {"event_size", offsetof(duro_layout, event_size), 1, 0},
    {"step_config_size", offsetof(duro_layout, step_config_size), 1,
     END_OF(duro_step_config, timeout)},
    {"retries_size", offsetof(duro_layout, retries_size), 1,
     END_OF(duro_retries, backoff)},
    {"workflow_def_size", offsetof(duro_layout, workflow_def_size), 1, 0},
    {"api_size", offsetof(duro_layout, api_size), 1, 0},
    {"pointer_size", offsetof(duro_layout, pointer_size), 0, 0},
    {"long_size", offsetof(duro_layout, long_size), 0, 0},
    {"reserved", offsetof(duro_layout, reserved), 0, 0},
};
_Static_assert(sizeof(duro_layout) == sizeof(layout_fields) /
                                          sizeof(layout_fields[0]) *
                                          sizeof(uint16_t),
               "every duro_layout field needs a row in layout_fields");

static uint16_t layout_get(const duro_layout *l, size_t offset) {
  uint16_t v;
  memcpy(&v, (const char *)l + offset, sizeof v);
  return v;
}

/* Writes `plugin "NAME" (PATH): <message>` into err and returns
 * DURO_E_PLUGIN, so every refusal is one `return refuse(...)`.  snprintf
 * truncates safely, and a NULL err (errlen 0) just drops the message. */
__attribute__((format(printf, 5, 6))) static int
refuse(char *err, size_t errlen, const char *name, const char *path,
       const char *fmt, ...) {
  if (err == NULL || errlen == 0)
    return DURO_E_PLUGIN;
  int n =
      snprintf(err, errlen, "plugin \"%s\" (%s): ", name ? name : "(unnamed)",
               path ? path : "(no path)");
  if (n >= 0 && (size_t)n < errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
  }
  return DURO_E_PLUGIN;
}

/* The descriptor as this host reads it: the plugin's first `size` bytes,
 * zero for the members its minor did not have yet. */
static void read_descriptor(const duro_plugin_info *theirs,
                            duro_plugin_info *ours) {
  size_t n = theirs->size < sizeof *ours ? theirs->size : sizeof *ours;
  memset(ours, 0, sizeof *ours);
  memcpy(ours, theirs, n);
  /* Before minor 2 the queue handler's slot was reserved: whatever a
   * plugin of then left in it is no handler. */
  if (n >= DESCRIPTOR_HEAD && ours->abi_minor < 2)
    ours->queue = NULL;
  /* The same for the cron handler's slot before minor 3. */
  if (n >= DESCRIPTOR_HEAD && ours->abi_minor < 3)
    ours->scheduled = NULL;
}

/* Entry i of the plugin's workflow table, which is an array of the
 * plugin's duro_workflow_def: its stride is layout.workflow_def_size, not
 * this host's sizeof. */
static void read_workflow(const duro_plugin_info *info, uint32_t i,
                          duro_workflow_def *out) {
  size_t stride = info->layout.workflow_def_size;
  memset(out, 0, sizeof *out);
  memcpy(out, (const char *)info->workflows + (size_t)i * stride,
         stride < sizeof *out ? stride : sizeof *out);
}

/* The fingerprint, field by field, against this host's layout with the API
 * table's size taken from the table the plugin will be handed. */
static int check_layout(const duro_layout *theirs, const duro_api *api,
                        const char *name, const char *path, char *err,
                        size_t errlen) {
  duro_layout host = host_layout;
  if (api != NULL)
    host.api_size = api->size > UINT16_MAX ? UINT16_MAX : (uint16_t)api->size;
  for (size_t i = 0; i < sizeof(layout_fields) / sizeof(layout_fields[0]);
       i++) {
    const char *field = layout_fields[i].field;
    unsigned t = layout_get(theirs, layout_fields[i].offset);
    unsigned h = layout_get(&host, layout_fields[i].offset);
    if (!layout_fields[i].grows && t != h)
      return refuse(err, errlen, name, path,
                    "layout.%s is %u, this host has %u", field, t, h);
    if (layout_fields[i].grows && t > h)
      return refuse(err, errlen, name, path,
                    "layout.%s is %u, this host has %u (a plugin's may be "
                    "smaller, built against an older minor, never larger)",
                    field, t, h);
    if (t < layout_fields[i].least)
      return refuse(err, errlen, name, path,
                    "layout.%s is %u, this host needs at least %zu", field, t,
                    layout_fields[i].least);
  }
  return 0;
}

/* What the descriptor declares, read from this host's copy of it. */
static int check_contents(const duro_plugin_info *info, const char *name,
                          const char *path, char *err, size_t errlen) {
  if (info->name == NULL)
    return refuse(err, errlen, name, path, "name is NULL");

  if (info->n_workflows > 0 && info->workflows == NULL)
    return refuse(err, errlen, name, path,
                  "n_workflows is %" PRIu32 " but workflows is NULL",
                  info->n_workflows);

  for (uint32_t i = 0; i < info->n_workflows; i++) {
    duro_workflow_def w;
    read_workflow(info, i, &w);
    if (w.class_name == NULL)
      return refuse(err, errlen, name, path,
                    "workflows[%" PRIu32 "].class_name is NULL", i);
    if (w.run == NULL)
      return refuse(err, errlen, name, path,
                    "workflows[%" PRIu32 "].run (class \"%s\") is NULL", i,
                    w.class_name);
    /* Quadratic, but a plugin declares a handful of classes, and a
     * duplicate would make loader_find_workflow's answer depend on order. */
    for (uint32_t j = 0; j < i; j++) {
      duro_workflow_def prev;
      read_workflow(info, j, &prev);
      if (strcmp(prev.class_name, w.class_name) == 0)
        return refuse(err, errlen, name, path,
                      "workflows[%" PRIu32 "] and workflows[%" PRIu32
                      "] both declare class \"%s\"",
                      j, i, w.class_name);
    }
  }

  /* DURO_PLUGIN() always writes bind; a hand-written descriptor without it
   * would leave every duro_* wrapper calling through NULL. */
  if (info->bind == NULL)
    return refuse(err, errlen, name, path, "bind is NULL");
  return 0;
}

/* loader_check_info, leaving this host's copy of the descriptor in *info
 * (meaningful only when it returns 0). */
static int check_descriptor(const duro_plugin_info *theirs, const duro_api *api,
                            duro_plugin_info *info, const char *name,
                            const char *path, char *err, size_t errlen) {
  if (theirs == NULL)
    return refuse(err, errlen, name, path, "duro_plugin() returned NULL");

  /* magic and size are the first two fields of every version of the
   * descriptor, so they are safe to read before we know its size. */
  if (theirs->magic != DURO_PLUGIN_MAGIC)
    return refuse(err, errlen, name, path,
                  "magic is 0x%08" PRIx32 ", this host expects 0x%08" PRIx32
                  " (not a duro plugin descriptor)",
                  theirs->magic, (uint32_t)DURO_PLUGIN_MAGIC);

  if (theirs->size < DESCRIPTOR_HEAD)
    return refuse(err, errlen, name, path,
                  "descriptor size is %" PRIu32
                  ", this host needs at least %zu",
                  theirs->size, (size_t)DESCRIPTOR_HEAD);

  /* From here on only the copy is read: nothing past the plugin's size. */
  read_descriptor(theirs, info);

  if (info->abi_major != DURO_ABI_MAJOR)
    return refuse(err, errlen, name, path,
                  "abi_major is %u, this host speaks %u",
                  (unsigned)info->abi_major, (unsigned)DURO_ABI_MAJOR);

  /* Minors only append: an older plugin sees a prefix of what we have, a
   * newer one could call members we do not have. */
  unsigned host_minor = api != NULL ? api->abi_minor : DURO_ABI_MINOR;
  if (info->abi_minor > host_minor)
    return refuse(err, errlen, name, path,
                  "abi_minor is %u, this host speaks up to %u "
                  "(the plugin needs API this host lacks)",
                  (unsigned)info->abi_minor, host_minor);

  /* A longer descriptor than ours holds members we would ignore. */
  if (info->size > sizeof(duro_plugin_info))
    return refuse(err, errlen, name, path,
                  "descriptor size is %" PRIu32 ", this host's is %zu (a "
                  "plugin's may be smaller, built against an older minor, "
                  "never larger)",
                  info->size, sizeof(duro_plugin_info));

  int rc = check_layout(&info->layout, api, name, path, err, errlen);
  if (rc != 0)
    return rc;
  return check_contents(info, name, path, err, errlen);
}

int loader_check_info(const duro_plugin_info *info, const duro_api *api,
                      const char *name, const char *path, char *err,
                      size_t errlen) {
  duro_plugin_info copy;
  return check_descriptor(info, api, &copy, name, path, err, errlen);
}

/* FNV-1a 64 over the file's bytes, as 16 lowercase hex digits.  It is an
 * identity, not a defence: it tells builds apart in the journal and the
 * logs, and is cheap enough to run on every load. */
int loader_hash_file(const char *path, char out[17]) {
  FILE *f = fopen(path, "rbe");
  if (f == NULL)
    return -errno;
  uint64_t h = UINT64_C(0xcbf29ce484222325);
  unsigned char buf[8192];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0)
    for (size_t i = 0; i < n; i++) {
      h ^= buf[i];
      h *= UINT64_C(0x100000001b3);
    }
  int rc = ferror(f) ? -EIO : 0;
  fclose(f);
  if (rc == 0)
    snprintf(out, 17, "%016" PRIx64, h);
  return rc;
}

int loader_open(const char *name, const char *path, const duro_api *api,
                loader_plugin **out, char *err, size_t errlen) {
  assert(path != NULL && api != NULL && out != NULL);
  *out = NULL;
  int rc = DURO_E_PLUGIN;
  char build[17];

  /* RTLD_NOW: an undefined symbol fails the load now, with dlerror naming
   * it, instead of killing the host the first time a workflow calls it.
   * RTLD_LOCAL: plugins must not resolve against one another. */
  /* A path without a '/' would make dlopen search the system's library
   * path (LD_LIBRARY_PATH, the ld.so cache, /usr/lib) and load whatever
   * it finds under that name; a plugin is a file, named as one. */
  char *file = strchr(path, '/') ? xstrdup(path) : xasprintf("./%s", path);
  void *handle = dlopen(file, RTLD_NOW | RTLD_LOCAL);
  free(file);
  if (handle == NULL) {
    const char *why = dlerror();
    return refuse(err, errlen, name, path, "dlopen failed: %s",
                  why ? why : "unknown error");
  }

  /* Hash right after dlopen so the identity describes the file we mapped,
   * and so a read failure never has to undo a plugin's init. */
  int hrc = loader_hash_file(path, build);
  if (hrc != 0) {
    rc = refuse(err, errlen, name, path, "cannot read the file: %s",
                strerror(-hrc));
    goto close_handle;
  }

  dlerror(); /* clear, so a NULL from dlsym is told apart by dlerror */
  void *sym = dlsym(handle, "duro_plugin");
  if (sym == NULL) {
    const char *why = dlerror();
    rc = refuse(err, errlen, name, path,
                "no symbol duro_plugin (declare the descriptor with "
                "DURO_PLUGIN(...)): %s",
                why ? why : "symbol is NULL");
    goto close_handle;
  }

  /* POSIX guarantees a data pointer from dlsym can hold a function
   * address; memcpy says so without a cast ISO C does not define. */
  const duro_plugin_info *(*entry)(void);
  _Static_assert(sizeof entry == sizeof sym, "function and data pointers");
  memcpy(&entry, &sym, sizeof entry);

  duro_plugin_info info;
  rc = check_descriptor(entry(), api, &info, name, path, err, errlen);
  if (rc != 0)
    goto close_handle;

  info.bind(api);
  if (info.init != NULL) {
    int irc = info.init();
    if (irc != 0) {
      /* A failed init owes no fini: the plugin undid its own work. */
      rc = refuse(err, errlen, name, path, "init returned %d", irc);
      goto close_handle;
    }
  }

  loader_plugin *p = xcalloc(1, sizeof *p);
  p->handle = handle;
  p->info = info;
  p->workflows = xcalloc(info.n_workflows, sizeof *p->workflows);
  for (uint32_t i = 0; i < info.n_workflows; i++)
    read_workflow(&info, i, &p->workflows[i]);
  p->info.workflows = p->workflows;
  memcpy(p->build, build, sizeof p->build);
  *out = p;
  return 0;

close_handle:
  dlclose(handle);
  return rc;
}

const duro_plugin_info *loader_info(const loader_plugin *p) { return &p->info; }

const char *loader_build(const loader_plugin *p) { return p->build; }

duro_run_fn loader_find_workflow(const loader_plugin *p,
                                 const char *class_name) {
  if (p == NULL || class_name == NULL)
    return NULL;
  for (uint32_t i = 0; i < p->info.n_workflows; i++)
    if (strcmp(p->workflows[i].class_name, class_name) == 0)
      return p->workflows[i].run;
  return NULL;
}

const char *loader_class_at(const loader_plugin *p, size_t i) {
  return i < p->info.n_workflows ? p->workflows[i].class_name : NULL;
}

const char *loader_class_list(const loader_plugin *p, char *buf, size_t len) {
  size_t n = 0;
  if (len == 0)
    return buf;
  buf[0] = '\0';
  if (p->info.n_workflows == 0)
    snprintf(buf, len, "no classes");
  for (uint32_t i = 0; i < p->info.n_workflows && n < len; i++) {
    int k = snprintf(buf + n, len - n, "%s\"%s\"", i ? ", " : "",
                     p->workflows[i].class_name);
    if (k < 0)
      break;
    n += (size_t)k;
  }
  return buf;
}

int loader_missing_class(const loader_plugin *p, const char *name,
                         const char *path, const char *class_name, char *err,
                         size_t errlen) {
  char list[512];
  snprintf(err, errlen,
           "plugin \"%s\" (%s) exports no class \"%s\"; it exports %s",
           name ? name : "(unnamed)", path ? path : "(no path)", class_name,
           loader_class_list(p, list, sizeof list));
  return DURO_E_PLUGIN;
}

void loader_close(loader_plugin *p) {
  if (p == NULL)
    return;
  if (p->info.fini != NULL)
    p->info.fini();
  /* After dlclose every run pointer and every string of the descriptor
   * dangle; callers drop them first (the engine keeps a generation open
   * while activations of it run). */
  dlclose(p->handle);
  free(p->workflows);
  free(p);
}
