/* pipeline_csv.c — a csv pipeline's bytes (RFC 4180): a header line of
 * its columns as the config gives them, then a row a record, each line
 * ended by CRLF.  A field is quoted when it holds a comma, a quote, a CR
 * or an LF, its quotes doubled.  A column's value is a string's text, a
 * number's, true's or false's JSON text, an object's or array's compact
 * JSON; null or a missing key is an empty field, and an empty string a
 * quoted one (""), so that readers that tell the two apart (PostgreSQL's
 * COPY) keep them apart.
 *
 * The row depends on the record's text alone: jansson keeps an object's
 * keys in their order and prints a number as it printed it when the send
 * made the record compact, so a batch encoded again gives the same bytes. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "json_pointer.h"
#include "pipeline_internal.h"
#include "util.h"

static void add(pipeline_buf *b, const char *s, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 256;
    b->p = xrealloc(b->p, b->cap);
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
}

/* One field: as it is, or quoted with its quotes doubled. */
static void add_field(pipeline_buf *b, const char *s, size_t n) {
  int quote = n == 0; /* only an empty string: null is no field at all */
  for (size_t i = 0; i < n && !quote; i++)
    quote = s[i] == ',' || s[i] == '"' || s[i] == '\r' || s[i] == '\n';
  if (!quote) {
    add(b, s, n);
    return;
  }
  add(b, "\"", 1);
  for (const char *q; n > 0 && (q = memchr(s, '"', n)) != NULL;) {
    add(b, s, (size_t)(q - s) + 1);
    add(b, "\"", 1); /* the quote again */
    n -= (size_t)(q - s) + 1;
    s = q + 1;
  }
  add(b, s, n);
  add(b, "\"", 1);
}

static void add_value(pipeline_buf *b, json_t *v) {
  if (!v || json_is_null(v))
    return;
  if (json_is_string(v)) {
    add_field(b, json_string_value(v), json_string_length(v));
    return;
  }
  char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
  if (text) /* NULL only without memory: xmalloc would have aborted */
    add_field(b, text, strlen(text));
  free(text);
}

void pipeline_csv_header(const duro_pipeline_options *o, pipeline_buf *out) {
  for (size_t i = 0; i < o->n_columns; i++) {
    if (i)
      add(out, ",", 1);
    add_field(out, o->columns[i], strlen(o->columns[i]));
  }
  add(out, "\r\n", 2);
}

/* A record accepted before its pipeline became csv may be no object:
 * every column of it is missing, a row of empty fields. */
static void add_row(const duro_pipeline_options *o, const char *line,
                    size_t len, pipeline_buf *out) {
  json_t *rec = json_loadb(line, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
  for (size_t i = 0; i < o->n_columns; i++) {
    const char *c = o->columns[i];
    if (i)
      add(out, ",", 1);
    if (json_is_object(rec))
      add_value(out, c[0] == '/' ? duro_json_pointer_get(rec, c)
                                 : json_object_get(rec, c));
  }
  add(out, "\r\n", 2);
  json_decref(rec);
}

void pipeline_csv_rows(const duro_pipeline_options *o, const char *lines,
                       size_t len, pipeline_buf *out) {
  const char *end = lines + len;
  while (lines < end) {
    const char *nl = memchr(lines, '\n', (size_t)(end - lines));
    size_t n = nl ? (size_t)(nl - lines) : (size_t)(end - lines);
    add_row(o, lines, n, out);
    lines += nl ? n + 1 : n;
  }
}
