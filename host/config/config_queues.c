/* config_queues.c — a plugin's queues section: its producers (a binding
 * sending to a queue) and its consumers (a queue's one consumer, with its
 * batching, retries, dead-letter queue and retention, or the no-code form
 * that creates an instance of a workflow per message).  Whether a
 * producer's queue is consumed, or a no-code consumer's workflow is
 * declared, is known once every plugin is read (config_refs.c). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config_internal.h"
#include "duration.h"
#include "duro.h"
#include "ids.h"
#include "json_pointer.h"
#include "schema.h"
#include "util.h"

/* ---- Schemas ----------------------------------------------------------- */

enum { QS_PRODUCERS, QS_CONSUMERS };
static const schema_field queues_fields[] = {
    [QS_PRODUCERS] = {"producers", K_NESTED, 0, false, 0, 0, NULL},
    [QS_CONSUMERS] = {"consumers", K_NESTED, 0, false, 0, 0, NULL},
};
const schema config_queues_schema =
    SCHEMA("queues", "in queues", -1, queues_fields);

enum { PR_BINDING, PR_QUEUE };
static const schema_field producer_fields[] = {
    [PR_BINDING] = {"binding", K_STRING, offsetof(config_producer, binding),
                    true, 0, 0, NULL},
    [PR_QUEUE] = {"queue", K_STRING, offsetof(config_producer, queue), true, 0,
                  0, NULL},
};
const schema config_producer_schema =
    SCHEMA("producer", "in producer", PR_BINDING, producer_fields);

/* The ranges are Cloudflare Queues' documented limits. */
enum {
  CO_QUEUE,
  CO_BATCH,
  CO_TIMEOUT,
  CO_RETRIES,
  CO_DELAY,
  CO_DLQ,
  CO_CONCURRENCY,
  CO_RETENTION,
  CO_WORKFLOW,
  CO_ID_FROM,
  CO_VISIBILITY,
  CO_KEYED
};
static const schema_field consumer_fields[] = {
    [CO_QUEUE] = {"queue", K_STRING, offsetof(config_consumer, queue), true, 0,
                  0, NULL},
    [CO_BATCH] = {"max_batch_size", K_U32,
                  offsetof(config_consumer, max_batch_size), false, 1, 100,
                  NULL},
    [CO_TIMEOUT] = {"max_batch_timeout", K_DURATION,
                    offsetof(config_consumer, max_batch_timeout_ms), false, 0,
                    60 * SECOND_MS, NULL},
    [CO_RETRIES] = {"max_retries", K_U32,
                    offsetof(config_consumer, max_retries), false, 0, 100,
                    NULL},
    [CO_DELAY] = {"retry_delay", K_DURATION,
                  offsetof(config_consumer, retry_delay_ms), false, 0,
                  12 * HOUR_MS, NULL},
    [CO_DLQ] = {"dead_letter_queue", K_STRING,
                offsetof(config_consumer, dead_letter_queue), false, 0, 0,
                NULL},
    [CO_CONCURRENCY] = {"max_concurrency", K_U32,
                        offsetof(config_consumer, max_concurrency), false, 1,
                        250, NULL},
    /* The queue's, kept with its one consumer; parse_consumer refuses
     * less than a minute, which would delete messages as they arrive. */
    [CO_RETENTION] = {"message_retention", K_DURATION,
                      offsetof(config_consumer, message_retention_ms), false, 0,
                      14 * DAY_MS, NULL},
    [CO_WORKFLOW] = {"workflow", K_STRING, offsetof(config_consumer, workflow),
                     false, 0, 0, NULL},
    [CO_ID_FROM] = {"id_from", K_STRING, offsetof(config_consumer, id_from),
                    false, 0, 0, NULL},
    [CO_VISIBILITY] = {"visibility_timeout", K_DURATION,
                       offsetof(config_consumer, visibility_timeout_ms), false,
                       SECOND_MS, 12 * HOUR_MS, NULL},
    [CO_KEYED] = {"concurrency", K_NESTED, 0, false, 0, 0, NULL},
};
const schema config_consumer_schema =
    SCHEMA("consumer", "in consumer", CO_QUEUE, consumer_fields);

/* concurrency: {key: /account, limit: 1}: a queue handler's messages by
 * the value at a JSON pointer into their bodies (queues/queue.h). */
enum { CK_KEY, CK_LIMIT };
static const schema_field consumer_concurrency_fields[] = {
    [CK_KEY] = {"key", K_STRING, offsetof(config_consumer, concurrency_key),
                true, 0, 0, NULL},
    [CK_LIMIT] = {"limit", K_U32, offsetof(config_consumer, concurrency_limit),
                  false, 1, 1000, NULL},
};
const schema config_consumer_concurrency_schema =
    SCHEMA("concurrency", "in concurrency", -1, consumer_concurrency_fields);

/* ---- Entries ----------------------------------------------------------- */

/* A queue name as the HTTP routes and the CLI can name it (a queue named
 * otherwise could be declared but never reached): the rule of instance
 * ids (ids.h), which the same routes and verbs take. */
int config_queue_name(config_parser *p, yaml_node_t *node, char **name) {
  if (duro_instance_id_valid(*name))
    return 0;
  schema_shown b;
  schema_fail(&p->w, node,
              "queue names are 1-100 characters of A-Z a-z 0-9 _ . : -, "
              "not \"%s\"",
              schema_show(&b, *name));
  /* As if not given: nothing is checked against a name refused here. */
  free(*name);
  *name = NULL;
  return DURO_E_CONFIG;
}

static int parse_producer(config_parser *p, yaml_node_t *node,
                          config_producer *pr) {
  yaml_node_t *v[SCHEMA_MAX_FIELDS];

  pr->pos = schema_pos(node);
  int rc = schema_mapping(&p->w, node, &config_producer_schema, pr, v, NULL);
  if (pr->queue) {
    pr->queue_pos = schema_pos(v[PR_QUEUE]);
    if (config_queue_name(p, v[PR_QUEUE], &pr->queue) < 0)
      rc = DURO_E_CONFIG;
  }
  if (config_unique(p, "binding name", pr->binding, v[PR_BINDING]) < 0)
    rc = DURO_E_CONFIG;
  return rc;
}

/* The no-code consumer's keys go together; whether its workflow exists is
 * known once every plugin is read (check_consumers).  `bad` has the bits
 * of the fields parse_mapping refused: one of the pair refused is not
 * reported again as missing. */
static int check_id_from(config_parser *p, config_consumer *c, yaml_node_t **v,
                         unsigned bad) {
  int rc = 0;
  if (c->workflow)
    c->workflow_pos = schema_pos(v[CO_WORKFLOW]);
  bool pair_given = !(bad & (1u << CO_WORKFLOW | 1u << CO_ID_FROM));
  if (pair_given && c->id_from && !c->workflow)
    rc = schema_fail(
        &p->w, v[CO_ID_FROM],
        "\"id_from\" needs \"workflow\": it names where a message's "
        "instance id is");
  if (pair_given && c->workflow && !c->id_from)
    rc = schema_fail(&p->w, v[CO_WORKFLOW],
                     "\"workflow\" needs \"id_from\", the JSON pointer to each "
                     "message's instance id (e.g. \"/jobId\")");
  if (c->id_from && !duro_json_pointer_valid(c->id_from)) {
    schema_shown b;
    rc = schema_fail(&p->w, v[CO_ID_FROM],
                     "\"id_from\" is not a JSON pointer (RFC 6901: \"\" or "
                     "\"/a/b\", with ~0 for '~' and ~1 for '/'): \"%s\"",
                     schema_show(&b, c->id_from));
  }
  return rc;
}

/* A consumer's concurrency by key: a JSON pointer, and only on a queue
 * handler (a no-code consumer's instances are limited by key by their
 * workflow's flow.concurrency, which counts them while they run). */
static int parse_keyed(config_parser *p, yaml_node_t *node,
                       config_consumer *c) {
  int section = schema_section(&p->w, node, "concurrency");
  if (section <= 0)
    return section;
  yaml_node_t *v[SCHEMA_MAX_FIELDS];
  int rc = schema_mapping(&p->w, node, &config_consumer_concurrency_schema, c,
                          v, NULL);
  if (c->concurrency_key && !duro_json_pointer_valid(c->concurrency_key)) {
    schema_shown b;
    rc = schema_fail(&p->w, v[CK_KEY],
                     "\"key\" is not a JSON pointer into the message body "
                     "(RFC 6901: \"/account\", with ~0 for '~' and ~1 for "
                     "'/'): \"%s\"",
                     schema_show(&b, c->concurrency_key));
  }
  if (c->workflow)
    rc = schema_fail(&p->w, node,
                     "\"concurrency\" limits a queue handler's messages by "
                     "key; a no-code consumer's instances are limited by "
                     "their workflow's flow.concurrency");
  return rc;
}

static int parse_consumer(config_parser *p, yaml_node_t *node,
                          config_consumer *c) {
  yaml_node_t *v[SCHEMA_MAX_FIELDS];
  unsigned bad;

  c->max_batch_size = 10;
  c->max_batch_timeout_ms = 5 * SECOND_MS;
  c->max_retries = 3;
  c->retry_delay_ms = 0;
  c->message_retention_ms = 4 * DAY_MS;
  c->visibility_timeout_ms = 30 * SECOND_MS;
  c->concurrency_limit = 1;
  c->pos = schema_pos(node);
  int rc = schema_mapping(&p->w, node, &config_consumer_schema, c, v, &bad);
  if (parse_keyed(p, v[CO_KEYED], c) < 0)
    rc = DURO_E_CONFIG;
  if (c->message_retention_ms < MINUTE_MS)
    rc = schema_fail(&p->w, v[CO_RETENTION],
                     "\"message_retention\" must be at least 1 minute");
  if (c->queue && config_queue_name(p, v[CO_QUEUE], &c->queue) < 0)
    rc = DURO_E_CONFIG;
  if (c->dead_letter_queue &&
      config_queue_name(p, v[CO_DLQ], &c->dead_letter_queue) < 0)
    rc = DURO_E_CONFIG;
  /* What this consumer consumes or dead-letters into is not known. */
  if (!c->queue || (bad & (1u << CO_DLQ)) ||
      (v[CO_DLQ] && !c->dead_letter_queue))
    p->unsure_queues = true;
  /* Dead-lettering into the queue itself would retry a message forever. */
  if (c->queue && c->dead_letter_queue &&
      strcmp(c->dead_letter_queue, c->queue) == 0) {
    schema_shown b;
    rc = schema_fail(
        &p->w, v[CO_DLQ],
        "\"dead_letter_queue\" must differ from the consumer's queue "
        "\"%s\"",
        schema_show(&b, c->queue));
  }
  if (check_id_from(p, c, v, bad) < 0 ||
      config_unique(p, "consumer for queue", c->queue, v[CO_QUEUE]) < 0)
    rc = DURO_E_CONFIG;
  return rc;
}

int config_parse_queues(config_parser *p, yaml_node_t *node,
                        config_plugin *pl) {
  yaml_node_t *v[SCHEMA_MAX_FIELDS];
  size_t n;

  unsigned bad;
  int rc = schema_mapping(&p->w, node, &config_queues_schema, pl, v, &bad);
  if (bad & SCHEMA_BAD_UNKNOWN) /* "consumer:" may be the consumers */
    p->unsure_queues = true;
  if (schema_list(&p->w, v[QS_PRODUCERS], "producers", &n) < 0)
    rc = DURO_E_CONFIG;
  if (n > 0) {
    pl->producers = xcalloc(n, sizeof *pl->producers);
    pl->n_producers = n;
  }
  for (size_t i = 0; i < n; i++) {
    yaml_node_t *item = schema_item(&p->w, v[QS_PRODUCERS], i);
    if (schema_entry(&p->w, item, "producers") < 0 ||
        parse_producer(p, item, &pl->producers[i]) < 0)
      rc = DURO_E_CONFIG;
  }

  if (schema_list(&p->w, v[QS_CONSUMERS], "consumers", &n) < 0) {
    p->unsure_queues = true;
    rc = DURO_E_CONFIG;
  }
  if (n > 0) {
    pl->consumers = xcalloc(n, sizeof *pl->consumers);
    pl->n_consumers = n;
  }
  for (size_t i = 0; i < n; i++) {
    yaml_node_t *item = schema_item(&p->w, v[QS_CONSUMERS], i);
    if (schema_entry(&p->w, item, "consumers") < 0) {
      p->unsure_queues = true;
      rc = DURO_E_CONFIG;
    } else if (parse_consumer(p, item, &pl->consumers[i]) < 0) {
      rc = DURO_E_CONFIG;
    }
  }
  return rc;
}
