/* view_flow.c — a workflow's flow control made JSON (view_flow.h). */
#include "view_flow.h"

json_t *view_flow_stats(const duro_flow_stats *s) {
  json_t *rules = json_array();
  for (size_t i = 0; i < s->n; i++) {
    const duro_flow_rule_stat *r = &s->v[i];
    json_t *busiest = json_array();
    for (size_t k = 0; k < r->n_top; k++) {
      const duro_flow_key_stat *t = &r->top[k];
      /* the value as the params hold it (compact JSON), or its text */
      json_t *v = json_loads(t->value, JSON_DECODE_ANY, NULL);
      json_array_append_new(busiest,
                            json_pack("{s:o,s:I,s:I}", "value",
                                      v ? v : json_string(t->value), "running",
                                      (json_int_t)t->running, "waiting",
                                      (json_int_t)t->waiting));
    }
    json_t *o =
        json_pack("{s:s,s:s?,s:I,s:I,s:I,s:I,s:o}", "rule",
                  r->rate ? "rate" : "concurrency", "key", r->key, "limit",
                  (json_int_t)r->limit, "keys", (json_int_t)r->keys, "running",
                  (json_int_t)r->running, "waiting", (json_int_t)r->waiting,
                  "busiest", busiest);
    if (r->rate) {
      json_object_set_new(o, "period_ms", json_integer(r->period_ms));
      json_object_set_new(o, "burst", json_integer(r->burst));
    }
    json_array_append_new(rules, o);
  }
  return rules;
}
