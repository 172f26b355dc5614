/* cli_keys.c — `keys list` (GET /storage/keys: storage.encryption's keys and
 * the last rotation or count), and `keys rotate` and `keys count`, which start
 * a run (POST /storage/keys/rotate, /storage/keys/count) and follow it until it
 * is through, a line of progress as it goes and its counts at the end. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_internal.h"
#include "util.h"

#define FOLLOW_EVERY_MS 500

int cli_build_keys(cli_ctx *c, const cli_verb *v, const cli_args *a,
                   cli_req *r) {
  (void)c, (void)a;
  if (!strcmp(v->name, "keys list")) {
    r->method = "GET";
    r->path = xstrdup("/storage/keys");
  } else {
    r->method = "POST";
    r->path = xstrdup(strcmp(v->name, "keys count") ? "/storage/keys/rotate"
                                                    : "/storage/keys/count");
  }
  return CLI_OK;
}

static long long count_of(const json_t *r, const char *key) {
  return (long long)json_integer_value(json_object_get(r, key));
}

/* "rotation to k2, running: instances walked, 1200 values rewritten, 0
 * changed meanwhile, 0 left unopened" (no newline). */
static void put_run(const json_t *run) {
  const char *kind = cli_str_or(run, "kind");
  printf("%s", kind);
  if (!strcmp(kind, "rotation"))
    printf(" to %s", cli_str_or(run, "active"));
  printf(", %s: ", cli_str_or(run, "state"));
  printf("%s", json_is_true(json_object_get(run, "messages_done"))
                   ? "all walked"
               : json_is_true(json_object_get(run, "instances_done"))
                   ? "instances walked, queue messages under way"
                   : "instances under way");
  if (!strcmp(kind, "rotation"))
    printf(", %lld value(s) rewritten, %lld changed meanwhile, %lld left "
           "unopened",
           count_of(run, "rewritten"), count_of(run, "changed"),
           count_of(run, "unopened"));
}

/* The values found, by key: "  under k1: 1200" a line each. */
static void put_found(const json_t *run) {
  const char *id;
  const json_t *n;
  printf("  in the clear: %lld\n", count_of(run, "plaintext"));
  json_object_foreach((json_t *)json_object_get(run, "keys"), id, n)
      printf("  under %s: %lld\n", id, (long long)json_integer_value(n));
  const char *error = cli_str_or(run, "error");
  if (*error)
    printf("  error: %s\n", error);
}

void cli_print_keys(const cli_args *a, const json_t *r) {
  (void)a;
  size_t i;
  const json_t *k;
  if (json_array_size(json_object_get(r, "keys")) == 0)
    fputs("storage.encryption lists no key: values are stored in the "
          "clear\n",
          stdout);
  json_array_foreach(json_object_get(r, "keys"), i, k)
      printf("%s%s\n", cli_str_or(k, "id"),
             json_is_true(json_object_get(k, "active")) ? "  (active)" : "");
  const json_t *run = json_object_get(r, "run");
  if (json_is_object(run)) {
    fputs("last run: ", stdout);
    put_run(run);
    fputc('\n', stdout);
    put_found(run);
  }
}

int cli_keys_follow(cli_ctx *c, const cli_args *a, const json_t *started) {
  (void)started;
  int tty = isatty(STDOUT_FILENO) && !a->json;
  for (;;) {
    cli_req r = {.method = "GET", .path = xstrdup("/storage/keys")};
    json_t *keys = NULL;
    int rc = cli_send_request(c, &r, &keys);
    free(r.path);
    if (rc != CLI_OK)
      return rc;
    const json_t *run = json_object_get(keys, "run");
    const char *state = cli_str_or(run, "state");
    int ended = strcmp(state, "running") != 0;
    if (a->json) {
      if (ended)
        cli_print_answer(NULL, a, run);
    } else if (tty || ended) {
      if (tty)
        fputc('\r', stdout);
      put_run(run);
      fputs(tty ? "\033[K" : "", stdout);
      if (ended) {
        fputc('\n', stdout);
        put_found(run);
      }
    }
    fflush(stdout);
    int ok = !strcmp(state, "done");
    json_decref(keys);
    if (ended)
      return ok ? CLI_OK : CLI_FAILED;
    usleep(FOLLOW_EVERY_MS * 1000);
  }
}
