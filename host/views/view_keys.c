/* view_keys.c — storage.encryption's keys and their rotation made JSON
 * (view_keys.h). */
#include "view_keys.h"

json_t *duro_keys_run_json(const duro_keys_run *r) {
  const journal_rekey *p = &r->progress;
  json_t *keys = json_object();
  for (size_t i = 0; i < p->n_keys; i++)
    json_object_set_new(keys, p->keys[i].id,
                        json_integer((json_int_t)p->keys[i].n));
  json_t *o = json_pack(
      "{s:s, s:s, s:I, s:o, s:b, s:b, s:I, s:o, s:I, s:I, s:I}", "kind",
      r->count_only ? "count" : "rotation", "state",
      duro_keys_state_name(r->state), "started_ms", (json_int_t)r->started_ms,
      "ended_ms", r->ended_ms ? json_integer(r->ended_ms) : json_null(),
      "instances_done", p->instances_done, "messages_done", p->messages_done,
      "plaintext", (json_int_t)p->plaintext, "keys", keys, "rewritten",
      (json_int_t)p->rewritten, "changed", (json_int_t)p->changed, "unopened",
      (json_int_t)p->unopened);
  if (!r->count_only)
    json_object_set_new(o, "active", json_string(r->active));
  if (r->state == DURO_KEYS_FAILED)
    json_object_set_new(o, "error", json_string(r->error));
  return o;
}

json_t *duro_keys_json(duro_engine *e) {
  const char *ids[JOURNAL_REKEY_KEYS];
  int active;
  size_t n = duro_keys_listed(e, ids, JOURNAL_REKEY_KEYS, &active);
  json_t *keys = json_array();
  for (size_t i = 0; i < n && i < JOURNAL_REKEY_KEYS; i++)
    json_array_append_new(keys, json_pack("{s:s, s:b}", "id", ids[i], "active",
                                          (int)i == active));
  duro_keys_run run;
  duro_keys_status(e, &run);
  return json_pack("{s:o, s:o, s:o}", "keys", keys, "active",
                   active >= 0 ? json_string(ids[active]) : json_null(), "run",
                   run.state == DURO_KEYS_IDLE ? json_null()
                                               : duro_keys_run_json(&run));
}
