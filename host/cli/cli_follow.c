/* cli_follow.c — `duro workflows instances describe WF ID --follow`: after
 * the report, the instance's event stream (GET …/events/stream,
 * server-sent events), one line an item as it is committed ("TIME EVENT
 * WHAT", or the item as a JSON object a line with --json), until the
 * item that says it ended.  A stream that breaks (the host restarting, a
 * kill -9 of its engine) is asked for again with the last id it sent
 * (Last-Event-ID), so no item is printed twice or missed; the host is
 * waited for up to FOLLOW_UNREACHABLE_MS. */
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_internal.h"
#include "clock.h"
#include "describe.h"
#include "util.h"

#define FOLLOW_RETRY_MS 500
#define FOLLOW_UNREACHABLE_MS 60000

typedef struct follow {
  const cli_args *a;
  CURL *curl;
  long status; /* the answer's, once its first bytes came */
  char *line;  /* the line being received */
  size_t len, cap;
  char *id, *event, *data; /* the item being received */
  char *last_id;           /* the last item printed */
  char *error;             /* a refusal's body */
  size_t error_len, error_cap;
  int ended;
} follow;

static void grow_append(char **s, size_t *len, size_t *cap, const char *p,
                        size_t n) {
  if (*len + n + 1 > *cap) {
    *cap = (*len + n + 1) * 2;
    *s = xrealloc(*s, *cap);
  }
  memcpy(*s + *len, p, n);
  *len += n;
  (*s)[*len] = '\0';
}

static void put_text(const json_t *d, const char *key) {
  describe_text(stdout, json_string_value(json_object_get(d, key)), 200, 0);
}

/* One item as a line: what its event says, from its data. */
static void print_item(const follow *f, const json_t *d) {
  if (f->a->json) {
    json_t *o =
        json_pack("{s:s, s:s, s:O}", "id", f->id ? f->id : "", "event",
                  f->event ? f->event : "message", "data", d ? d : json_null());
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    if (s)
      puts(s);
    free(s);
    json_decref(o);
    return;
  }
  json_int_t ms = json_integer_value(json_object_get(d, "time_ms"));
  cli_put_time(ms ? ms : clock_wall_ms());
  printf(" %-15s ", f->event ? f->event : "message");
  const char *ev = f->event ? f->event : "";
  if (!strcmp(ev, "status")) {
    put_text(d, "status");
  } else if (!strcmp(ev, "event_received")) {
    put_text(d, "type");
    printf(" (seq %lld)",
           (long long)json_integer_value(json_object_get(d, "seq")));
  } else {
    put_text(d, "step");
    if (!strcmp(ev, "step_started")) {
      fputs(" (", stdout);
      put_text(d, "kind");
      fputc(')', stdout);
    } else if (!strcmp(ev, "sleep")) {
      fputs(" until ", stdout);
      cli_put_time(json_integer_value(json_object_get(d, "wake_ms")));
    } else if (!strcmp(ev, "attempt_failed")) {
      printf(" attempt %lld",
             (long long)json_integer_value(json_object_get(d, "attempt")));
    } else if (!strcmp(ev, "step_ended")) {
      fputc(' ', stdout);
      put_text(d, "status");
    }
  }
  const json_t *err = json_object_get(d, "error"); /* {name, message} */
  if (err) {
    fputs(": ", stdout);
    put_text(err, "name");
    fputs(": ", stdout);
    put_text(err, "message");
  }
  fputc('\n', stdout);
}

/* A blank line: the item received is whole. */
static void dispatch(follow *f) {
  if (f->data) {
    json_t *d = json_loads(f->data, 0, NULL);
    print_item(f, d);
    if (f->event && !strcmp(f->event, "status") &&
        cli_status_ended(json_string_value(json_object_get(d, "status"))))
      f->ended = 1;
    json_decref(d);
    fflush(stdout);
  }
  if (f->id) {
    free(f->last_id);
    f->last_id = f->id;
    f->id = NULL;
  }
  free(f->event);
  free(f->data);
  f->event = f->data = NULL;
}

static void field(follow *f, char *line) {
  if (!*line) {
    dispatch(f);
    return;
  }
  char *colon = strchr(line, ':');
  if (colon == line)
    return; /* a comment */
  const char *value = "";
  if (colon) {
    *colon = '\0';
    value = colon[1] == ' ' ? colon + 2 : colon + 1;
  }
  if (!strcmp(line, "id")) {
    free(f->id);
    f->id = xstrdup(value);
  } else if (!strcmp(line, "event")) {
    free(f->event);
    f->event = xstrdup(value);
  } else if (!strcmp(line, "data")) {
    char *joined =
        f->data ? xasprintf("%s\n%s", f->data, value) : xstrdup(value);
    free(f->data);
    f->data = joined;
  }
}

static size_t on_stream(char *p, size_t size, size_t n, void *ud) {
  follow *f = ud;
  size_t len = size * n;
  if (!f->status)
    curl_easy_getinfo(f->curl, CURLINFO_RESPONSE_CODE, &f->status);
  if (f->status != 200) { /* a refusal: its JSON, printed once it is all in */
    if (f->error_len < 64 * 1024)
      grow_append(&f->error, &f->error_len, &f->error_cap, p, len);
    return len;
  }
  for (size_t i = 0; i < len; i++) {
    if (p[i] != '\n') {
      grow_append(&f->line, &f->len, &f->cap, p + i, 1);
      continue;
    }
    if (f->len && f->line[f->len - 1] == '\r')
      f->line[--f->len] = '\0';
    grow_append(&f->line, &f->len, &f->cap, "", 0);
    field(f, f->line);
    f->len = 0;
  }
  return len;
}

/* A refusal (404, 401, ...): the server's message, as every verb's. */
static void print_refusal(const follow *f, const cli_ctx *c) {
  json_t *v = f->error ? json_loads(f->error, 0, NULL) : NULL;
  const json_t *err = json_object_get(v, "error");
  const char *code = json_string_value(json_object_get(err, "code"));
  const char *message = json_string_value(json_object_get(err, "message"));
  fputs("duro: ", stderr);
  if (code && message)
    fprintf(stderr, "%s: %s", code, message);
  else
    fprintf(stderr, "%s answered HTTP %ld to the event stream", c->base,
            f->status);
  fputc('\n', stderr);
  json_decref(v);
}

int cli_follow_events(cli_ctx *c, const cli_args *a) {
  char *path = cli_instances_path(c, a->pos[0], a->pos[1], "/events/stream");
  follow f = {.a = a, .curl = c->curl};
  int rc = CLI_OK;
  int64_t reached_ms = clock_mono_ms();
  while (!f.ended) {
    f.status = 0;
    f.len = 0;
    int cc = cli_stream(c, path, "text/event-stream", f.last_id, on_stream, &f,
                        &f.status);
    if (f.status && f.status != 200) {
      print_refusal(&f, c);
      rc = CLI_FAILED;
      break;
    }
    if (f.ended)
      break;
    if (f.status == 200)
      reached_ms = clock_mono_ms();
    if (clock_mono_ms() - reached_ms > FOLLOW_UNREACHABLE_MS) {
      fprintf(stderr, "duro: cannot reach %s (%s): %s\n", c->base, c->origin,
              c->errbuf[0] ? c->errbuf : curl_easy_strerror((CURLcode)cc));
      rc = CLI_FAILED;
      break;
    }
    /* the stream broke (or the host ended it stopping): take it up again
     * from the last item printed */
    free(f.id);
    free(f.event);
    free(f.data);
    f.id = f.event = f.data = NULL;
    usleep(FOLLOW_RETRY_MS * 1000);
  }
  free(f.line);
  free(f.id);
  free(f.event);
  free(f.data);
  free(f.last_id);
  free(f.error);
  free(path);
  return rc;
}
