/* cli_pipelines.c — `pipelines send`, `pipelines list` and `pipelines
 * describe`: records sent to a pipeline, and the pipelines' counts.  The
 * records always go as one JSON array: stdin's NDJSON is read into one
 * here, a bad line named by its number before anything is sent. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_internal.h"
#include "describe.h"
#include "util.h"

/* "/pipelines/NAME", after checking NAME as the server would. */
static int pipeline_path(cli_ctx *c, const cli_verb *v, const char *name,
                         char **out) {
  if (cli_check_name(v, "NAME", name))
    return CLI_USAGE;
  char *e = cli_escape(c, name);
  *out = xasprintf("/pipelines/%s", e);
  free(e);
  return CLI_OK;
}

/* All of stdin (malloc'ed, NUL-terminated; *len without the NUL). */
static char *read_stdin(size_t *len) {
  size_t cap = 65536;
  char *buf = xmalloc(cap);
  *len = 0;
  size_t got;
  while ((got = fread(buf + *len, 1, cap - *len - 1, stdin)) > 0) {
    *len += got;
    if (cap - *len < 2)
      buf = xrealloc(buf, cap *= 2);
  }
  buf[*len] = '\0';
  return buf;
}

/* NDJSON: one value a line, blank lines skipped, into an array. */
static int read_ndjson(const cli_verb *v, const char *text, size_t len,
                       json_t **out) {
  json_t *list = json_array();
  const char *p = text, *end = text + len;
  for (size_t line = 1; p < end; line++) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t n = (size_t)((nl ? nl : end) - p);
    if (strspn(p, " \t\r") < n) {
      json_error_t e;
      json_t *one =
          json_loadb(p, n, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &e);
      if (!one) {
        json_decref(list);
        return cli_usage_error(v,
                               "line %zu of stdin is not valid JSON: %s (at "
                               "column %d)",
                               line, e.text, e.column);
      }
      json_array_append_new(list, one);
    }
    p = nl ? nl + 1 : end;
  }
  *out = list;
  return CLI_OK;
}

/* RECORDS: a JSON array of records or one record; "-": stdin, JSON (an
 * array or one value) or NDJSON. */
static int read_records(const cli_verb *v, const char *arg, json_t **out) {
  json_t *j = NULL;
  if (!strcmp(arg, "-")) {
    size_t len;
    char *text = read_stdin(&len);
    j = json_loadb(text, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
    int rc = j ? CLI_OK : read_ndjson(v, text, len, out);
    free(text);
    if (!j)
      return rc;
  } else if (cli_parse_json_arg(v, "RECORDS", arg, &j)) {
    return CLI_USAGE;
  }
  if (!json_is_array(j)) {
    json_t *one = json_array();
    json_array_append_new(one, j);
    j = one;
  }
  *out = j;
  return CLI_OK;
}

int cli_build_pipeline_send(cli_ctx *c, const cli_verb *v, const cli_args *a,
                            cli_req *r) {
  json_t *records = NULL;
  if (read_records(v, a->pos[1], &records))
    return CLI_USAGE;
  if (!json_array_size(records)) {
    json_decref(records);
    return cli_usage_error(v, "no records to send");
  }
  if (pipeline_path(c, v, a->pos[0], &r->path)) {
    json_decref(records);
    return CLI_USAGE;
  }
  r->method = "POST";
  r->body = cli_dump(records);
  json_decref(records);
  return CLI_OK;
}

int cli_build_pipelines_list(cli_ctx *c, const cli_verb *v, const cli_args *a,
                             cli_req *r) {
  (void)c, (void)v, (void)a;
  r->method = "GET";
  r->path = xstrdup("/pipelines");
  return CLI_OK;
}

int cli_build_pipeline_describe(cli_ctx *c, const cli_verb *v,
                                const cli_args *a, cli_req *r) {
  r->method = "GET";
  return pipeline_path(c, v, a->pos[0], &r->path);
}

void cli_print_pipeline_sent(const cli_args *a, const json_t *r) {
  printf("sent %" JSON_INTEGER_FORMAT " record(s) to ",
         json_integer_value(json_object_get(r, "accepted")));
  describe_text(stdout, a->pos[0], 0, 0);
  fputc('\n', stdout);
}

static json_int_t count_of(const json_t *p, const char *key) {
  return json_integer_value(json_object_get(p, key));
}

static json_int_t backlog_of(const json_t *p, const char *key) {
  return count_of(json_object_get(p, "backlog"), key);
}

/* When a file was last written, or "never". */
static const char *last_flush(char buf[32], const json_t *p) {
  const json_t *t = json_object_get(p, "last_flush_ms");
  return json_is_integer(t) ? describe_time(buf, json_integer_value(t))
                            : "never";
}

/* One pipeline per line: records accepted and written, files, what waits
 * and when a file was last written. */
void cli_print_pipelines(const cli_args *a, const json_t *r) {
  (void)a;
  size_t i;
  const json_t *p;
  printf("%-24s %10s %10s %7s %10s %14s %-24s\n", "PIPELINE", "ACCEPTED",
         "WRITTEN", "FILES", "BACKLOG", "BACKLOG_BYTES", "LAST_FLUSH");
  json_array_foreach(r, i, p) {
    const char *name = json_string_value(json_object_get(p, "name"));
    char t[32];
    printf("%-24s %10" JSON_INTEGER_FORMAT " %10" JSON_INTEGER_FORMAT
           " %7" JSON_INTEGER_FORMAT " %10" JSON_INTEGER_FORMAT
           " %14" JSON_INTEGER_FORMAT " %-24s\n",
           name ? name : "", count_of(p, "accepted"), count_of(p, "written"),
           count_of(p, "files"), backlog_of(p, "records"),
           backlog_of(p, "bytes"), last_flush(t, p));
  }
  if (!json_array_size(r))
    puts("(no pipelines)");
}

void cli_print_pipeline(const cli_args *a, const json_t *r) {
  (void)a;
  static const char *const keys[] = {"accepted", "accepted_bytes", "written",
                                     "written_bytes", "files"};
  const json_t *sink = json_object_get(r, "sink");
  char t[32];
  fputs("pipeline:      ", stdout);
  cli_put(r, "name");
  fputs("\nsink:          ", stdout);
  cli_put(sink, "path");
  const char *path = json_string_value(json_object_get(sink, "path"));
  if (!path || !*path || path[strlen(path) - 1] != '/')
    fputc('/', stdout); /* an s3 sink's prefix may end in '/' */
  cli_put(sink, "partition");
  fputs(" (", stdout);
  cli_put(sink, "compression");
  fputs(")\nformat:        ", stdout);
  const char *format = json_string_value(json_object_get(sink, "format"));
  fputs(format ? format : "jsonl", stdout);
  const json_t *columns = json_object_get(sink, "columns");
  for (size_t i = 0; i < json_array_size(columns); i++) {
    fputs(i ? ", " : " (", stdout);
    describe_text(stdout, json_string_value(json_array_get(columns, i)), 100,
                  0);
  }
  fputs(json_array_size(columns) ? ")\n" : "\n", stdout);
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
    printf("%-14s %" JSON_INTEGER_FORMAT "\n", keys[i], count_of(r, keys[i]));
  printf("%-14s %" JSON_INTEGER_FORMAT " record(s), %" JSON_INTEGER_FORMAT
         " bytes\n",
         "backlog", backlog_of(r, "records"), backlog_of(r, "bytes"));
  printf("%-14s %s\n", "last_flush", last_flush(t, r));
  const char *err = json_string_value(json_object_get(r, "last_error"));
  if (err) {
    fputs("last_error:    ", stdout);
    describe_text(stdout, err, 400, 0);
    fputc('\n', stdout);
  }
}
