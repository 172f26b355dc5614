/* list_filter.c — which instances a request names, read one way for the
 * list (GET /workflows/{wf}/instances?status=…) and a bulk action (POST
 * /workflows/{wf}/bulk {"filter": {...}}): the same fields, the same
 * checks, the same messages.  A field the filter gains (search
 * attributes' `where`) is read here, for both. */
#include "http_internal.h"

#include <stdio.h>
#include <string.h>

#include "instant.h"

const char *const list_filter_fields[] = {
    "status",       "prefix", "created_after", "created_before", "ended_after",
    "ended_before", NULL};

/* The time field `name` into *ms (0 when absent): 0, or -1 with why. */
static int read_instant(list_filter_get get, void *ctx, const char *name,
                        const char *where, int64_t *ms, char *why, size_t len) {
  const char *text = get(ctx, name);
  *ms = 0;
  if (!text || !*text || instant_parse(text, ms) == 0)
    return 0;
  snprintf(why, len,
           "%s%s \"%.100s\" is not a time (ms since the epoch, or ISO 8601 "
           "such as 2026-12-07T10:00:00Z)",
           where, name, text);
  return -1;
}

int list_filter_read(list_filter_get get, void *ctx, const char *where,
                     duro_list_filter *f, char *why, size_t len) {
  *f = (duro_list_filter){.status = -1, .prefix = get(ctx, "prefix")};
  const char *status = get(ctx, "status");
  if (status && *status && (f->status = duro_status_parse(status)) < 0) {
    snprintf(why, len, "%sunknown status \"%.100s\"", where, status);
    return -1;
  }
  if (read_instant(get, ctx, "created_after", where, &f->created_after, why,
                   len) ||
      read_instant(get, ctx, "created_before", where, &f->created_before, why,
                   len) ||
      read_instant(get, ctx, "ended_after", where, &f->ended_after, why, len) ||
      read_instant(get, ctx, "ended_before", where, &f->ended_before, why, len))
    return -1;
  return 0;
}
