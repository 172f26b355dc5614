/* test_loader.c — the plugin loader against real shared objects and
 * hand-made descriptors.
 *
 * The fixtures (plugins/fixtures/, built into FIXTURES_DIR) are each made
 * to fail one way; for each, the loader must refuse with DURO_E_PLUGIN and
 * a message that names the plugin, its path, the field and both values, so
 * an operator can act on the log line alone.  loader_check_info is also
 * driven directly with descriptors built in memory, one perturbed field per
 * case, to cover every check without a fixture per field.
 *
 * Versions: older_minor is built against a frozen older duro.h, with a
 * shorter API table, event and descriptor; it must load on this host and
 * run a workflow on the real engine.  newer_minor claims the next minor and
 * must be refused.  In memory, every size a plugin may shrink is shrunk.
 *
 * The API table handed to plugins is zeroed but for its size, except where
 * a workflow runs: there the engine's own table is bound. */
#include <check.h>
#include <ctype.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "engine.h"
#include "loader.h"
#include "suite_run.h"
#include "view_instance.h"

#ifndef FIXTURES_DIR
#error "build with -DFIXTURES_DIR=\"<dir holding libfixture_*.so>\""
#endif

/* bind() keeps this pointer for the plugin's lifetime, hence static. */
static const duro_api api = {.size = sizeof(duro_api),
                             .abi_minor = DURO_ABI_MINOR};

static void fixture_path(char *buf, size_t n, const char *fixture) {
  snprintf(buf, n, "%s/libfixture_%s.so", FIXTURES_DIR, fixture);
}

#define assert_contains(hay, needle)                                           \
  ck_assert_msg(strstr((hay), (needle)) != NULL, "expected \"%s\" in: %s",     \
                (needle), (hay))

#define STR_(x) #x
#define STR(x) STR_(x)

/* ---- loading real fixtures -------------------------------------------- */

START_TEST(test_good_v1_loads) {
  char path[512], err[512] = "";
  fixture_path(path, sizeof path, "good_v1");
  loader_plugin *p = NULL;
  int rc = loader_open("good_v1", path, &api, &p, err, sizeof err);
  ck_assert_msg(rc == 0, "rc %d: %s", rc, err);
  ck_assert_ptr_nonnull(p);

  const duro_plugin_info *info = loader_info(p);
  ck_assert_str_eq(info->name, "good");
  ck_assert_str_eq(info->version, "1");
  /* Function pointers, so plain compares: check's ptr asserts take void *. */
  ck_assert(loader_find_workflow(p, "Hello") != NULL);
  ck_assert(loader_find_workflow(p, "Nope") == NULL);
  ck_assert(loader_find_workflow(p, "hello") == NULL); /* case matters */
  ck_assert(loader_find_workflow(p, NULL) == NULL);

  const char *build = loader_build(p);
  ck_assert_uint_eq(strlen(build), 16);
  for (size_t i = 0; i < 16; i++)
    ck_assert_msg(isxdigit((unsigned char)build[i]) &&
                      !isupper((unsigned char)build[i]),
                  "build id %s is not lowercase hex", build);
  loader_close(p);
}
END_TEST

START_TEST(test_builds_differ) {
  char path1[512], path2[512], err[512] = "";
  fixture_path(path1, sizeof path1, "good_v1");
  fixture_path(path2, sizeof path2, "good_v2");
  loader_plugin *v1 = NULL, *v2 = NULL;
  ck_assert_msg(loader_open("good", path1, &api, &v1, err, sizeof err) == 0,
                "%s", err);
  ck_assert_msg(loader_open("good", path2, &api, &v2, err, sizeof err) == 0,
                "%s", err);

  /* Both builds serve the same class, from different code. */
  ck_assert_str_eq(loader_info(v2)->version, "2");
  duro_run_fn r1 = loader_find_workflow(v1, "Hello");
  duro_run_fn r2 = loader_find_workflow(v2, "Hello");
  ck_assert(r1 != NULL);
  ck_assert(r2 != NULL);
  ck_assert_msg(r1 != r2, "two builds share one entrypoint");
  ck_assert_str_ne(loader_build(v1), loader_build(v2));

  loader_close(v2);
  loader_close(v1);
}
END_TEST

/* The test's own FNV-1a 64, pinned to the published vectors below, so the
 * build identity is checked against the definition and not against
 * whatever the loader happens to compute. */
static uint64_t fnv1a64(const unsigned char *s, size_t n) {
  uint64_t h = UINT64_C(0xcbf29ce484222325);
  for (size_t i = 0; i < n; i++) {
    h ^= s[i];
    h *= UINT64_C(0x100000001b3);
  }
  return h;
}

START_TEST(test_build_is_fnv1a_of_file) {
  ck_assert_uint_eq(fnv1a64((const unsigned char *)"", 0),
                    UINT64_C(0xcbf29ce484222325));
  ck_assert_uint_eq(fnv1a64((const unsigned char *)"a", 1),
                    UINT64_C(0xaf63dc4c8601ec8c));

  char path[512], err[512] = "";
  fixture_path(path, sizeof path, "good_v1");
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
  long len = ftell(f);
  ck_assert_int_gt(len, 0);
  rewind(f);
  unsigned char *bytes = malloc((size_t)len);
  ck_assert_ptr_nonnull(bytes);
  ck_assert_uint_eq(fread(bytes, 1, (size_t)len, f), (size_t)len);
  fclose(f);
  char want[17];
  snprintf(want, sizeof want, "%016llx",
           (unsigned long long)fnv1a64(bytes, (size_t)len));
  free(bytes);

  loader_plugin *p = NULL;
  ck_assert_msg(loader_open("good_v1", path, &api, &p, err, sizeof err) == 0,
                "%s", err);
  ck_assert_str_eq(loader_build(p), want);
  loader_close(p);
}
END_TEST

/* One row per bad fixture: what the message must say besides the plugin's
 * name and path.  Values appear next to their field ("abi_major is 99"),
 * not merely somewhere in the text. */
#define N_BAD_FIXTURES 7

START_TEST(test_bad_fixture_refused) {
  char host_event[64], newer[64];
  snprintf(host_event, sizeof host_event, "this host has %zu",
           sizeof(duro_event));
  snprintf(newer, sizeof newer, "abi_minor is %d", DURO_ABI_MINOR + 1);
  const struct {
    const char *fixture;
    const char *needles[3];
  } cases[N_BAD_FIXTURES] = {
      {"abi_major_mismatch", {"abi_major is 99", "this host speaks 1"}},
      {"fingerprint_mismatch", {"layout.event_size is 999", host_event}},
      {"bad_magic", {"magic is 0xdeadbeef", "expects 0x4f525544"}},
      {"no_entry", {"no symbol duro_plugin"}},
      {"undefined_symbol",
       {"undefined symbol", "duro_fixture_missing_function"}},
      {"init_fails", {"init returned 7"}},
      {"newer_minor",
       {newer, "this host speaks up to " STR(DURO_ABI_MINOR), "lacks"}},
  };

  char path[512], err[1024] = "", who[128];
  fixture_path(path, sizeof path, cases[_i].fixture);
  snprintf(who, sizeof who, "plugin \"%s\"", cases[_i].fixture);
  loader_plugin *p = (loader_plugin *)&p; /* must be reset to NULL */
  int rc = loader_open(cases[_i].fixture, path, &api, &p, err, sizeof err);
  ck_assert_int_eq(rc, DURO_E_PLUGIN);
  ck_assert_ptr_null(p);
  assert_contains(err, who);
  assert_contains(err, path);
  for (size_t j = 0; j < 3 && cases[_i].needles[j]; j++)
    assert_contains(err, cases[_i].needles[j]);
}
END_TEST

START_TEST(test_missing_file_refused) {
  char path[512], err[1024] = "";
  fixture_path(path, sizeof path, "does_not_exist");
  loader_plugin *p = NULL;
  ck_assert_int_eq(loader_open("ghost", path, &api, &p, err, sizeof err),
                   DURO_E_PLUGIN);
  ck_assert_ptr_null(p);
  assert_contains(err, "plugin \"ghost\"");
  assert_contains(err, path);
  assert_contains(err, "dlopen");
}
END_TEST

/* A path without a '/' is a file in the current directory, never a name
 * for dlopen's library search: "libc.so.6" is in the system's library
 * path (and already mapped), but not in FIXTURES_DIR, so it must not load. */
START_TEST(test_bare_path_not_searched) {
  ck_assert_int_eq(chdir(FIXTURES_DIR), 0);
  char err[1024] = "";
  loader_plugin *p = NULL;
  ck_assert_int_eq(loader_open("libc", "libc.so.6", &api, &p, err, sizeof err),
                   DURO_E_PLUGIN);
  ck_assert_ptr_null(p);
  assert_contains(err, "dlopen failed");
  assert_contains(err, "./libc.so.6");
}
END_TEST

/* ...and a bare name of a file that is there loads it. */
START_TEST(test_bare_path_in_current_dir) {
  ck_assert_int_eq(chdir(FIXTURES_DIR), 0);
  char err[1024] = "";
  loader_plugin *p = NULL;
  int rc =
      loader_open("good", "libfixture_good_v1.so", &api, &p, err, sizeof err);
  ck_assert_msg(rc == 0, "rc %d: %s", rc, err);
  ck_assert(loader_find_workflow(p, "Hello") != NULL);
  loader_close(p);
}
END_TEST

/* A class_name the plugin lacks is refused with the classes it has. */
START_TEST(test_missing_class_lists_classes) {
  char path[512], err[1024] = "", want[1024];
  fixture_path(path, sizeof path, "good_v1");
  loader_plugin *p = NULL;
  ck_assert_int_eq(loader_open("good", path, &api, &p, err, sizeof err), 0);
  ck_assert(loader_find_workflow(p, "Helo") == NULL);
  ck_assert_int_eq(
      loader_missing_class(p, "good", path, "Helo", err, sizeof err),
      DURO_E_PLUGIN);
  snprintf(want, sizeof want,
           "plugin \"good\" (%s) exports no class \"Helo\"; it exports "
           "\"Hello\"",
           path);
  ck_assert_str_eq(err, want);
  char list[64];
  ck_assert_str_eq(loader_class_list(p, list, sizeof list), "\"Hello\"");
  /* A small buffer cuts the message; it stays a string. */
  char small[24];
  loader_missing_class(p, "good", path, "Helo", small, sizeof small);
  ck_assert_uint_eq(strlen(small), sizeof small - 1);
  loader_close(p);
}
END_TEST

START_TEST(test_close_null) { loader_close(NULL); }
END_TEST

/* ---- versions ----------------------------------------------------------- */

/* The JSON text `want` and `got` say the same thing. */
static void assert_json(json_t *got, const char *want) {
  json_t *w = json_loads(want, JSON_DECODE_ANY, NULL);
  ck_assert_msg(w != NULL, "bad expected JSON %s", want);
  char *g = json_dumps(got, JSON_COMPACT | JSON_ENCODE_ANY);
  ck_assert_msg(json_equal(got, w), "JSON %s, expected %s", g ? g : "(null)",
                want);
  free(g);
  json_decref(w);
}

static const char *status_of(duro_engine *e, const char *wf, const char *id) {
  duro_status st;
  ck_assert_int_eq(duro_instance_status(e, wf, id, &st), 0);
  return duro_status_name(st);
}

/* A plugin built against an older minor loads, with what its descriptor
 * lacks read as zero, and its workflow runs on the real engine through the
 * engine's table, of which it knows a prefix: the event it reads, the step
 * config it hands over and the calls it makes all line up. */
START_TEST(test_older_minor_runs) {
  char path[512], err[512] = "";
  fixture_path(path, sizeof path, "older_minor");
  loader_plugin *p = NULL;
  int rc =
      loader_open("older_minor", path, duro_host_api(), &p, err, sizeof err);
  ck_assert_msg(rc == 0, "rc %d: %s", rc, err);

  /* It is older: each of these ends before the member duro.h has last. */
  const duro_plugin_info *info = loader_info(p);
  ck_assert_uint_eq(info->layout.api_size, offsetof(duro_api, err_name));
  ck_assert_uint_eq(info->layout.event_size, offsetof(duro_event, created_ms));
  ck_assert_uint_eq(info->size, offsetof(duro_plugin_info, queue));
  ck_assert_ptr_null(info->queue);
  for (size_t i = 0; i < sizeof info->reserved / sizeof info->reserved[0]; i++)
    ck_assert_ptr_null(info->reserved[i]);
  ck_assert_str_eq(info->name, "older_minor");
  duro_run_fn run = loader_find_workflow(p, "Hello");
  ck_assert(run != NULL);

  /* An engine driven inline on a virtual clock, as tests/harness.c opens
   * one, in a directory of this case's own. */
  char dir[] = "/tmp/duro-loader-XXXXXX", db[64];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(db, sizeof db, "%s/duro.db", dir);
  duro_clock clock;
  duro_clock_virtual_init(&clock, 1767225600000LL);
  duro_engine_options opt = {.db_path = db, .clock = &clock};
  duro_engine *e = NULL;
  ck_assert_msg(duro_engine_open(&opt, &e, err, sizeof err) == 0, "%s", err);
  ck_assert_int_eq(
      duro_engine_register(e, "older", NULL, run, NULL, loader_build(p)), 0);
  /* as the host gives it (reload_engine_build): the plugin's structs are
   * minor 0's, read no further (a read past them is ASan's to catch) */
  ck_assert_uint_lt(info->layout.step_config_size, sizeof(duro_step_config));
  ck_assert_int_eq(
      duro_engine_build_set_step_config_size(e, "older", loader_build(p),
                                             info->layout.step_config_size),
      0);
  ck_assert_int_eq(duro_engine_start(e), 0);
  ck_assert_int_eq(
      duro_instance_create(e, "older", "o-1", "{\"n\":1}", -1, NULL), 0);

  /* Attempt 1 fails; the plugin's retries say one more, a second later. */
  duro_engine_run_until_idle(e);
  ck_assert_str_eq(status_of(e, "older", "o-1"), "waiting");
  duro_clock_advance(&clock, 999);
  duro_engine_run_until_idle(e);
  ck_assert_str_eq(status_of(e, "older", "o-1"), "waiting");
  duro_clock_advance(&clock, 1);
  duro_engine_run_until_idle(e);
  ck_assert_str_eq(status_of(e, "older", "o-1"), "complete");

  json_t *d = NULL;
  ck_assert_int_eq(duro_instance_describe(e, "older", "o-1", &d), 0);
  assert_json(json_object_get(d, "output"),
              "{\"hello\":\"o-1\",\"params\":{\"n\":1}}");
  json_t *step = json_array_get(json_object_get(d, "steps"), 0);
  ck_assert_str_eq(json_string_value(json_object_get(step, "key")), "greet#1");
  ck_assert_uint_eq(json_array_size(json_object_get(step, "attempts")), 2);
  json_decref(d);

  duro_engine_close(e);
  const char *suffix[] = {"", "-wal", "-shm"};
  for (size_t i = 0; i < 3; i++) {
    char f[80];
    snprintf(f, sizeof f, "%s%s", db, suffix[i]);
    unlink(f);
  }
  rmdir(dir);
  loader_close(p);
}
END_TEST

/* The other way round: a host whose table has one member more than this
 * header's, of the next minor, loads a plugin built against this header.
 * One member fewer than the plugin knows, and the host refuses it. */
START_TEST(test_table_sizes) {
  static struct {
    duro_api current;
    void (*appended)(void);
  } next = {.current = {.size = sizeof next, .abi_minor = DURO_ABI_MINOR + 1}};
  static const duro_api shorter = {.size = offsetof(duro_api, err_name),
                                   .abi_minor = DURO_ABI_MINOR};
  char path[512], err[512] = "", want[128];
  fixture_path(path, sizeof path, "good_v1");
  loader_plugin *p = NULL;
  ck_assert_msg(
      loader_open("good_v1", path, &next.current, &p, err, sizeof err) == 0,
      "%s", err);
  ck_assert(loader_find_workflow(p, "Hello") != NULL);
  loader_close(p);

  ck_assert_int_eq(loader_open("good_v1", path, &shorter, &p, err, sizeof err),
                   DURO_E_PLUGIN);
  ck_assert_ptr_null(p);
  snprintf(want, sizeof want, "layout.api_size is %zu, this host has %zu",
           sizeof(duro_api), offsetof(duro_api, err_name));
  assert_contains(err, want);
}
END_TEST

/* DURO_API_HAS reads the table pointer DURO_PLUGIN() defines in a plugin;
 * this test binary defines its own. */
const duro_api *duro_api_ptr_;
static const char *fake_strerror(int code) { return code ? "bad" : "ok"; }

START_TEST(test_api_has) {
  duro_api full = {.size = sizeof full, .strerror = fake_strerror};
  duro_api cut = full;
  cut.size = offsetof(duro_api, strerror); /* ends just before strerror */
  ck_assert(DURO_API_TABLE_HAS(&full, strerror));
  ck_assert(!DURO_API_TABLE_HAS(&full, err_name)); /* within, but NULL */
  ck_assert(!DURO_API_TABLE_HAS(&cut, strerror));  /* set, but past size */
  ck_assert(!DURO_API_TABLE_HAS((const duro_api *)NULL, strerror));

  duro_api_ptr_ = &full;
  ck_assert(DURO_API_HAS(strerror));
  ck_assert_str_eq(duro_strerror(1), "bad");
  duro_api_ptr_ = &cut;
  ck_assert(!DURO_API_HAS(strerror));
  duro_api_ptr_ = NULL;
  ck_assert(!DURO_API_HAS(strerror));

  /* minor 12's member ends the table, filled by the host (minor 10 gave
   * the descriptor a tail handler, minor 11 duro_step_config a resource,
   * the table nothing); a table of minor
   * 7 ends before minor 8's, one of minor 6 before minor 7's */
  const duro_api *host = duro_host_api();
  ck_assert_uint_eq(host->abi_minor, 12);
  ck_assert_uint_eq(offsetof(duro_api, set_attribute) +
                        sizeof host->set_attribute,
                    sizeof(duro_api));
  ck_assert(DURO_API_TABLE_HAS(host, set_attribute));
  duro_api minor9 = *host;
  minor9.size = offsetof(duro_api, set_attribute);
  ck_assert(DURO_API_TABLE_HAS(&minor9, queue_send_traced));
  ck_assert(!DURO_API_TABLE_HAS(&minor9, set_attribute));
  ck_assert(DURO_API_TABLE_HAS(host, attempt_traceparent));
  ck_assert(DURO_API_TABLE_HAS(host, queue_send_traced));
  ck_assert(DURO_API_TABLE_HAS(host, env_pipeline));
  ck_assert(DURO_API_TABLE_HAS(host, pipeline_send));
  duro_api minor7 = *host;
  minor7.size = offsetof(duro_api, env_pipeline);
  ck_assert(DURO_API_TABLE_HAS(&minor7, rollback));
  ck_assert(!DURO_API_TABLE_HAS(&minor7, env_pipeline));
  ck_assert(DURO_API_TABLE_HAS(host, wait_any));
  ck_assert(DURO_API_TABLE_HAS(host, child_start));
  ck_assert(DURO_API_TABLE_HAS(host, child_wait));
  ck_assert(DURO_API_TABLE_HAS(host, do_all));
  ck_assert(DURO_API_TABLE_HAS(host, do_with_rollback));
  ck_assert(DURO_API_TABLE_HAS(host, rollback));
  duro_api minor6 = *host;
  minor6.size = offsetof(duro_api, do_all);
  ck_assert(DURO_API_TABLE_HAS(&minor6, child_wait));
  ck_assert(!DURO_API_TABLE_HAS(&minor6, do_all));
  duro_api minor5 = *host;
  minor5.size = offsetof(duro_api, wait_any);
  ck_assert(DURO_API_TABLE_HAS(&minor5, json_vpack));
  ck_assert(!DURO_API_TABLE_HAS(&minor5, wait_any));
}
END_TEST

/* ---- loader_check_info on descriptors in memory ----------------------- */

#define MEM_NAME "mem"
#define MEM_PATH "/nowhere/libmem.so"
#define MEM_PREFIX "plugin \"" MEM_NAME "\" (" MEM_PATH "): "

static duro_rc run_a(duro_step *s, const duro_event *e, duro_env *v) {
  (void)s, (void)e, (void)v;
  return DURO_OK;
}
static duro_rc run_b(duro_step *s, const duro_event *e, duro_env *v) {
  (void)s, (void)e, (void)v;
  return DURO_OK;
}
static void bind_noop(const duro_api *a) { (void)a; }

/* Cases mutate a copy of the descriptor and of its workflow table. */
typedef struct {
  duro_plugin_info info;
  duro_workflow_def wf[2];
} mem_plugin;

static void mem_good(mem_plugin *m) {
  memset(m, 0, sizeof *m);
  m->wf[0] = (duro_workflow_def){.class_name = "A", .run = run_a};
  m->wf[1] = (duro_workflow_def){.class_name = "B", .run = run_b};
  m->info = (duro_plugin_info){.magic = DURO_PLUGIN_MAGIC,
                               .size = sizeof(duro_plugin_info),
                               .abi_major = DURO_ABI_MAJOR,
                               .abi_minor = DURO_ABI_MINOR,
                               .layout = DURO_LAYOUT_INIT,
                               .name = "mem",
                               .version = "1",
                               .workflows = m->wf,
                               .n_workflows = 2,
                               .bind = bind_noop};
}

static int mem_check(const mem_plugin *m, char *err, size_t n) {
  return loader_check_info(&m->info, NULL, MEM_NAME, MEM_PATH, err, n);
}

START_TEST(test_check_accepts_good) {
  mem_plugin m;
  mem_good(&m);
  char err[512] = "";
  ck_assert_int_eq(mem_check(&m, err, sizeof err), 0);

  /* No workflows at all is a valid (if useless) plugin. */
  m.info.workflows = NULL;
  m.info.n_workflows = 0;
  ck_assert_int_eq(mem_check(&m, err, sizeof err), 0);
}
END_TEST

START_TEST(test_check_null_descriptor) {
  char err[512] = "";
  ck_assert_int_eq(
      loader_check_info(NULL, NULL, MEM_NAME, MEM_PATH, err, sizeof err),
      DURO_E_PLUGIN);
  assert_contains(err, MEM_PREFIX);
  assert_contains(err, "NULL");
}
END_TEST

/* Every fingerprint field, and what a value 8 below the host's gets: NULL
 * when that is accepted (the struct of an older minor), else what the
 * refusal says after "layout.FIELD is VALUE" (or, for workflow_def_size,
 * instead of it).  8 above is refused for every field. */
static const struct {
  const char *field;
  size_t offset;
  const char *smaller;
} layout_cases[] = {
    {"event_size", offsetof(duro_layout, event_size), NULL},
    /* The engine reads every member of these two that minor 0 had; 8
     * below this host's duro_step_config is minor 10's, without
     * `resource`. */
    {"step_config_size", offsetof(duro_layout, step_config_size), NULL},
    {"retries_size", offsetof(duro_layout, retries_size),
     ", this host needs at least"},
    /* Passes the fingerprint, and the table is read with the plugin's
     * stride: an 8-byte entry 0 ends before mem_good's `run`. */
    {"workflow_def_size", offsetof(duro_layout, workflow_def_size),
     "workflows[0].run (class \"A\") is NULL"},
    {"api_size", offsetof(duro_layout, api_size), NULL},
    {"pointer_size", offsetof(duro_layout, pointer_size), ", this host has"},
    {"long_size", offsetof(duro_layout, long_size), ", this host has"},
    {"reserved", offsetof(duro_layout, reserved), NULL /* 0: no below */},
};
#define N_LAYOUT_CASES (int)(sizeof layout_cases / sizeof layout_cases[0])
_Static_assert(sizeof(duro_layout) == sizeof layout_cases /
                                          sizeof layout_cases[0] *
                                          sizeof(uint16_t),
               "a duro_layout field has no test case");

START_TEST(test_check_layout_field) {
  mem_plugin m;
  mem_good(&m);
  uint16_t host, theirs;
  char *field = (char *)&m.info.layout + layout_cases[_i].offset;
  memcpy(&host, field, sizeof host);
  theirs = (uint16_t)(host + 8);
  memcpy(field, &theirs, sizeof theirs);

  char err[512] = "", want[128];
  ck_assert_int_eq(mem_check(&m, err, sizeof err), DURO_E_PLUGIN);
  snprintf(want, sizeof want, MEM_PREFIX "layout.%s is %u, this host has %u",
           layout_cases[_i].field, (unsigned)theirs, (unsigned)host);
  ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "expected %s in: %s",
                want, err);

  if (host < 8)
    return; /* `reserved` is 0: nothing is below it */
  theirs = (uint16_t)(host - 8);
  memcpy(field, &theirs, sizeof theirs);
  err[0] = '\0';
  int rc = mem_check(&m, err, sizeof err);
  if (layout_cases[_i].smaller == NULL) {
    ck_assert_msg(rc == 0, "layout.%s %u refused: %s", layout_cases[_i].field,
                  (unsigned)theirs, err);
  } else {
    ck_assert_int_eq(rc, DURO_E_PLUGIN);
    if (layout_cases[_i].smaller[0] == ',')
      snprintf(want, sizeof want, MEM_PREFIX "layout.%s is %u%s",
               layout_cases[_i].field, (unsigned)theirs,
               layout_cases[_i].smaller);
    else
      snprintf(want, sizeof want, MEM_PREFIX "%s", layout_cases[_i].smaller);
    ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "expected %s in: %s",
                  want, err);
  }
}
END_TEST

/* The workflow table is an array of the plugin's entries: with entries of
 * 8 bytes (an older minor's, holding only class_name) the host must step 8
 * bytes at a time and read no further, so under ASan a 16-byte stride over
 * these two names fails, and so does reading `run` from past an entry. */
START_TEST(test_check_workflow_stride) {
  mem_plugin m;
  mem_good(&m);
  const char *names[2] = {"A", "B"};
  m.info.workflows = (const duro_workflow_def *)(const void *)names;
  m.info.layout.workflow_def_size = sizeof names[0];
  char err[512] = "";
  ck_assert_int_eq(mem_check(&m, err, sizeof err), DURO_E_PLUGIN);
  assert_contains(err, "workflows[0].run (class \"A\") is NULL");
}
END_TEST

/* A descriptor from an older minor is shorter: the host reads it up to its
 * size and takes zero for the rest, here the members it set beyond. */
START_TEST(test_check_short_descriptor) {
  mem_plugin m;
  mem_good(&m);
  char err[512] = "";
  m.info.size = (uint32_t)offsetof(duro_plugin_info, queue);
  ck_assert_msg(mem_check(&m, err, sizeof err) == 0, "%s", err);

  m.info.size = (uint32_t)offsetof(duro_plugin_info, bind);
  ck_assert_int_eq(mem_check(&m, err, sizeof err), DURO_E_PLUGIN);
  assert_contains(err, "bind is NULL"); /* set, but past the size */

  m.info.size = (uint32_t)offsetof(duro_plugin_info, name);
  ck_assert_int_eq(mem_check(&m, err, sizeof err), DURO_E_PLUGIN);
  assert_contains(err, "name is NULL");

  m.info.size = (uint32_t)offsetof(duro_plugin_info, name) - 1;
  ck_assert_int_eq(mem_check(&m, err, sizeof err), DURO_E_PLUGIN);
  assert_contains(err, "descriptor size is");
  assert_contains(err, "needs at least");
}
END_TEST

/* Every other check: one mutation and what the message must say. */
static void mut_magic(mem_plugin *m) { m->info.magic = 0x12345678u; }
static void mut_size(mem_plugin *m) { m->info.size = 8; }
static void mut_size_big(mem_plugin *m) {
  m->info.size = sizeof(duro_plugin_info) + 8;
}
static void mut_major(mem_plugin *m) { m->info.abi_major = 2; }
static void mut_minor(mem_plugin *m) { m->info.abi_minor = DURO_ABI_MINOR + 1; }
static void mut_name(mem_plugin *m) { m->info.name = NULL; }
static void mut_workflows(mem_plugin *m) { m->info.workflows = NULL; }
static void mut_class(mem_plugin *m) { m->wf[1].class_name = NULL; }
static void mut_run(mem_plugin *m) { m->wf[1].run = NULL; }
static void mut_dup(mem_plugin *m) { m->wf[1].class_name = "A"; }
static void mut_bind(mem_plugin *m) { m->info.bind = NULL; }

static const struct {
  void (*mutate)(mem_plugin *);
  const char *needles[3];
} field_cases[] = {
    {mut_magic, {"magic is 0x12345678", "expects 0x4f525544"}},
    {mut_size, {"descriptor size is 8", "this host needs at least"}},
    {mut_size_big, {"descriptor size is", "this host's is", "never larger"}},
    {mut_major, {"abi_major is 2", "this host speaks " STR(DURO_ABI_MAJOR)}},
    {mut_minor, {"abi_minor is", "speaks up to " STR(DURO_ABI_MINOR), "lacks"}},
    {mut_name, {"name is NULL"}},
    {mut_workflows, {"n_workflows is 2", "workflows is NULL"}},
    {mut_class, {"workflows[1].class_name is NULL"}},
    {mut_run, {"workflows[1].run", "\"B\"", "is NULL"}},
    {mut_dup, {"workflows[0] and workflows[1]", "class \"A\""}},
    {mut_bind, {"bind is NULL"}},
};
#define N_FIELD_CASES (int)(sizeof field_cases / sizeof field_cases[0])

START_TEST(test_check_field) {
  mem_plugin m;
  mem_good(&m);
  field_cases[_i].mutate(&m);
  char err[512] = "";
  ck_assert_int_eq(mem_check(&m, err, sizeof err), DURO_E_PLUGIN);
  assert_contains(err, MEM_PREFIX);
  for (size_t j = 0; j < 3 && field_cases[_i].needles[j]; j++)
    assert_contains(err, field_cases[_i].needles[j]);
}
END_TEST

/* The size check must come before anything past the size field is read:
 * a short descriptor with garbage after it is refused for its size. */
START_TEST(test_check_order) {
  mem_plugin m;
  mem_good(&m);
  m.info.size = 8;
  m.info.abi_major = 99;
  m.info.layout.event_size = 1;
  char err[512] = "";
  ck_assert_int_eq(mem_check(&m, err, sizeof err), DURO_E_PLUGIN);
  assert_contains(err, "size is 8");

  mem_good(&m);
  m.info.abi_major = 99;
  m.info.layout.event_size = 1;
  ck_assert_int_eq(mem_check(&m, err, sizeof err), DURO_E_PLUGIN);
  assert_contains(err, "abi_major is 99");
}
END_TEST

START_TEST(test_check_small_buffer) {
  mem_plugin m;
  mem_good(&m);
  m.info.abi_major = 99;
  char err[8];
  memset(err, 'x', sizeof err);
  ck_assert_int_eq(mem_check(&m, err, sizeof err), DURO_E_PLUGIN);
  ck_assert_uint_eq(strlen(err), sizeof err - 1); /* truncated, terminated */
  ck_assert_int_eq(mem_check(&m, NULL, 0), DURO_E_PLUGIN);
}
END_TEST

static Suite *loader_suite(void) {
  Suite *s = suite_create("loader");

  TCase *open = tcase_create("open");
  tcase_add_test(open, test_good_v1_loads);
  tcase_add_test(open, test_builds_differ);
  tcase_add_test(open, test_build_is_fnv1a_of_file);
  tcase_add_loop_test(open, test_bad_fixture_refused, 0, N_BAD_FIXTURES);
  tcase_add_test(open, test_missing_file_refused);
  tcase_add_test(open, test_bare_path_not_searched);
  tcase_add_test(open, test_bare_path_in_current_dir);
  tcase_add_test(open, test_missing_class_lists_classes);
  tcase_add_test(open, test_close_null);
  suite_add_tcase(s, open);

  TCase *versions = tcase_create("versions");
  tcase_add_test(versions, test_older_minor_runs);
  tcase_add_test(versions, test_table_sizes);
  tcase_add_test(versions, test_api_has);
  suite_add_tcase(s, versions);

  TCase *check = tcase_create("check_info");
  tcase_add_test(check, test_check_accepts_good);
  tcase_add_test(check, test_check_null_descriptor);
  tcase_add_loop_test(check, test_check_layout_field, 0, N_LAYOUT_CASES);
  tcase_add_test(check, test_check_workflow_stride);
  tcase_add_test(check, test_check_short_descriptor);
  tcase_add_loop_test(check, test_check_field, 0, N_FIELD_CASES);
  tcase_add_test(check, test_check_order);
  tcase_add_test(check, test_check_small_buffer);
  suite_add_tcase(s, check);
  return s;
}

int main(void) { return suite_run(loader_suite()); }
