/* view_log.c — an instance's log lines made JSON (view_log.h). */
#include "view_log.h"

#include "log.h"

int duro_instance_logs_json(duro_engine *e, const char *workflow,
                            const char *id, int64_t after, size_t limit,
                            json_t **out) {
  *out = NULL;
  duro_log_list l = {0};
  int rc = duro_instance_logs(e, workflow, id, after, limit, &l);
  if (rc)
    return rc;
  json_t *lines = json_array();
  int64_t next = after;
  for (size_t i = 0; i < l.n; i++) {
    const duro_log_line *x = &l.v[i];
    json_array_append_new(
        lines,
        json_pack("{sI, sI, ss, so, sI, ss}", "n", (json_int_t)x->n, "time_ms",
                  (json_int_t)x->time_ms, "level", log_level_name(x->level),
                  "step", x->step ? json_string(x->step) : json_null(),
                  "attempt", (json_int_t)x->attempt, "message", x->message));
    next = x->n;
  }
  duro_log_list_free(&l);
  *out = json_pack("{so, sI}", "logs", lines, "next", (json_int_t)next);
  return 0;
}
