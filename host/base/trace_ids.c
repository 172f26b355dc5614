/* trace_ids.c — traceparent read and written, and the ids derived from an
 * instance (trace_ids.h). */
#include "trace_ids.h"

#include <glib.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* n lowercase hex digits at s, not all zero (the spec's invalid id). */
static int hex_id(const char *s, size_t n, int nonzero) {
  int any = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return 0;
    any |= c != '0';
  }
  return any || !nonzero;
}

int traceparent_parse(const char *s, trace_parent *out) {
  if (!s)
    return 0;
  while (*s == ' ' || *s == '\t') /* optional whitespace of a header */
    s++;
  size_t len = strlen(s);
  while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
    len--;
  if (len < TRACEPARENT_LEN || !hex_id(s, 2, 0) || !strncmp(s, "ff", 2) ||
      s[2] != '-' || s[35] != '-' || s[52] != '-' || !hex_id(s + 3, 32, 1) ||
      !hex_id(s + 36, 16, 1) || !hex_id(s + 53, 2, 0))
    return 0;
  /* Version 00 is exactly that long; a later version may say more after
   * a '-', which a reader of 00 skips. */
  if (!strncmp(s, "00", 2) ? len != TRACEPARENT_LEN
                           : len > TRACEPARENT_LEN && s[TRACEPARENT_LEN] != '-')
    return 0;
  memcpy(out->trace, s + 3, 32);
  out->trace[32] = '\0';
  memcpy(out->span, s + 36, 16);
  out->span[16] = '\0';
  unsigned flags = (unsigned)strtoul((char[3]){s[53], s[54], '\0'}, NULL, 16);
  out->sampled = (int)(flags & 1);
  return 1;
}

void traceparent_format(const char *trace, const char *span, int sampled,
                        char out[TRACEPARENT_LEN + 1]) {
  snprintf(out, TRACEPARENT_LEN + 1, "00-%.32s-%.16s-%s", trace, span,
           sampled ? "01" : "00");
}

char *traceparent_norm(const char *s) {
  trace_parent p;
  if (!traceparent_parse(s, &p))
    return NULL;
  char out[TRACEPARENT_LEN + 1];
  traceparent_format(p.trace, p.span, p.sampled, out);
  return xstrdup(out);
}

/* n bytes as 2n lowercase hex digits and a NUL into out. */
static void hex(const guint8 *b, size_t n, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[b[i] >> 4];
    out[2 * i + 1] = digits[b[i] & 15];
  }
  out[2 * n] = '\0';
}

/* SHA-256 of the parts joined by 0x1f into d (32 bytes); key NULL: the
 * instance's own. */
static void digest(const char *a, const char *b, int64_t c, const char *key,
                   uint32_t n, guint8 d[32]) {
  GChecksum *h = g_checksum_new(G_CHECKSUM_SHA256);
  char num[64];
  snprintf(num, sizeof num, "\x1f%" PRId64 "\x1f", c);
  g_checksum_update(h, (const guchar *)a, (gssize)strlen(a));
  g_checksum_update(h, (const guchar *)"\x1f", 1);
  g_checksum_update(h, (const guchar *)b, (gssize)strlen(b));
  g_checksum_update(h, (const guchar *)num, (gssize)strlen(num));
  if (key) {
    snprintf(num, sizeof num, "\x1f%" PRIu32, n);
    g_checksum_update(h, (const guchar *)key, (gssize)strlen(key));
    g_checksum_update(h, (const guchar *)num, (gssize)strlen(num));
  }
  gsize len = 32;
  g_checksum_get_digest(h, d, &len);
  g_checksum_free(h);
}

void trace_of_instance(const char *workflow, const char *id, int64_t created_ms,
                       const char *traceparent, trace_of *out) {
  guint8 d[32];
  digest(workflow, id, created_ms, NULL, 0, d);
  hex(d, 16, out->trace);
  hex(d + 16, 8, out->root);
  out->parent[0] = '\0';
  out->sampled = -1;
  trace_parent p;
  if (traceparent_parse(traceparent, &p)) {
    memcpy(out->trace, p.trace, sizeof out->trace);
    memcpy(out->parent, p.span, sizeof out->parent);
    out->sampled = p.sampled;
  }
}

void trace_step_span(const char *workflow, const char *id, int64_t created_ms,
                     const char *key, uint32_t attempt, char span[17]) {
  guint8 d[32];
  digest(workflow, id, created_ms, key, attempt, d);
  hex(d, 8, span);
}

void trace_event_ids(const char *kind, const char *name, int64_t n,
                     char trace[33], char span[17]) {
  guint8 d[32];
  digest(kind, name, n, NULL, 0, d);
  hex(d, 16, trace);
  hex(d + 16, 8, span);
}

int trace_sampled(const char *trace, double ratio) {
  if (ratio >= 1.0)
    return 1;
  uint64_t x = strtoull(trace + 16, NULL, 16);
  return (double)(x >> 11) / 9007199254740992.0 < ratio;
}
