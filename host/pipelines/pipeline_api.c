/* pipeline_api.c — the pipelines' part of the plugin API table: a
 * plugin's bindings (duro_env_pipeline) and its sends.
 *
 * Each record is parsed and written again compact, as POST
 * /pipelines/{name} does, so a file holds one record a line whoever sent
 * it.  A send is a side effect, as a queue send is: inside a step
 * callback its appends join the attempt's commit (step.h), so the
 * records are kept exactly once, with the step's result; in run()
 * outside a callback it is refused (it would repeat on every replay);
 * anywhere else (a plugin's init, a queue or cron handler) it is
 * committed at once. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "error.h"
#include "journal.h"
#include "log.h"
#include "pipeline.h"
#include "pipeline_internal.h"
#include "step.h"

static duro_pipeline *api_env_pipeline(duro_env *env, const char *binding) {
  return env ? (duro_pipeline *)pipeline_bound(env->engine, binding) : NULL;
}

/* records[i] made compact into *out (malloc'ed); 0 or a DURO_E_* code
 * with why in err.  A csv pipeline takes only objects: a column is a key
 * of each record. */
static int compact(const pipeline *p, const char *record, size_t i, char **out,
                   char *err, size_t errlen) {
  *out = NULL;
  if (!record) {
    snprintf(err, errlen, "record %zu is NULL", i);
    return DURO_E_INVALID_MESSAGE;
  }
  json_error_t je;
  json_t *v = json_loads(record, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
  if (!v) {
    snprintf(err, errlen, "record %zu is not JSON: %s (column %d)", i, je.text,
             je.column);
    return DURO_E_INVALID_MESSAGE;
  }
  if (p->o.format == DURO_PIPELINE_CSV && !json_is_object(v)) {
    snprintf(err, errlen,
             "record %zu is not a JSON object: a csv pipeline's columns are "
             "keys of each record",
             i);
    json_decref(v);
    return DURO_E_INVALID_MESSAGE;
  }
  *out = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
  json_decref(v);
  size_t len = *out ? strlen(*out) : 0;
  if (!*out || len > DURO_PIPELINE_MAX_RECORD) {
    snprintf(err, errlen,
             "record %zu is %zu bytes of JSON, over the limit of %d", i, len,
             DURO_PIPELINE_MAX_RECORD);
    free(*out);
    *out = NULL;
    return DURO_E_MESSAGE_TOO_LARGE;
  }
  return 0;
}

static int api_pipeline_send(duro_pipeline *h, const char *const *records,
                             size_t n) {
  pipeline *p = (pipeline *)h;
  if (!p)
    return DURO_E_BINDING_NOT_FOUND;
  duro_attempt *at = step_current_attempt();
  const log_ctx *where = step_current_log();
  const log_ctx *say = where ? where : &(log_ctx){.source = "plugin"};
  if (where && !at) {
    log_at(DURO_LOG_WARN, where,
           "pipeline send to \"%s\" outside a step callback refused: it "
           "would repeat on every replay",
           p->name);
    return DURO_E_INVALID_ARGUMENT;
  }
  if (!records || n == 0 || n > DURO_PIPELINE_MAX_RECORDS) {
    log_at(DURO_LOG_WARN, say,
           "pipeline send to \"%s\" refused: %zu records (1 to %d a send)",
           p->name, n, DURO_PIPELINE_MAX_RECORDS);
    return n > DURO_PIPELINE_MAX_RECORDS ? DURO_E_BATCH_TOO_LARGE
                                         : DURO_E_INVALID_ARGUMENT;
  }
  char **text = calloc(n, sizeof *text);
  if (!text)
    return DURO_E_STORAGE;
  char err[256] = "";
  int rc = 0;
  size_t total = 0; /* the lines' bytes: a send is one row of the journal */
  for (size_t i = 0; i < n && !rc; i++)
    if ((rc = compact(p, records[i], i, &text[i], err, sizeof err)) == 0 &&
        (total += strlen(text[i]) + 1) > DURO_PIPELINE_MAX_BODY) {
      snprintf(err, sizeof err,
               "records 0 to %zu are %zu bytes of JSON lines, over the "
               "limit of %d a send",
               i, total, DURO_PIPELINE_MAX_BODY);
      rc = DURO_E_BATCH_TOO_LARGE;
    }
  if (rc == 0 && at) {
    /* The lines must outlive this call: the attempt owns its copy. */
    size_t len = 0;
    char *lines = pipeline_lines((const char *const *)text, n, &len);
    rc = lines ? pipeline_append_op(p->engine, p, attempt_strdup(at, lines), n,
                                    len, attempt_effects(at))
               : DURO_E_INVALID_MESSAGE;
    free(lines);
  } else if (rc == 0) {
    rc = duro_pipeline_append(p->engine, p->name, (const char *const *)text, n,
                              NULL);
  }
  if (rc == DURO_E_OVERLOADED)
    snprintf(err, sizeof err, "its backlog is past max_backlog");
  if (rc)
    log_at(DURO_LOG_WARN, say, "pipeline send to \"%s\" refused: %s", p->name,
           err[0] ? err : duro_err_str(rc));
  for (size_t i = 0; i < n; i++)
    free(text[i]);
  free(text);
  return rc;
}

void pipeline_api_fill(duro_api *t) {
  t->env_pipeline = api_env_pipeline;
  t->pipeline_send = api_pipeline_send;
}
