/* config_free.c — config_free(): every string and array a parsed config
 * owns (config.h). */
#include <stdlib.h>

#include "config.h"

void config_free(config *cfg) {
  if (!cfg)
    return;
  for (size_t i = 0; i < cfg->n_plugins; i++) {
    config_plugin *pl = &cfg->plugins[i];
    for (size_t j = 0; j < pl->n_workflows; j++) {
      free(pl->workflows[j].name);
      free(pl->workflows[j].binding);
      free(pl->workflows[j].class_name);
      free(pl->workflows[j].lifecycle_queue);
      for (size_t k = 0; k < pl->workflows[j].n_flow; k++)
        free(pl->workflows[j].flow[k].key);
      free(pl->workflows[j].flow);
      for (size_t k = 0; k < pl->workflows[j].n_rates; k++)
        free(pl->workflows[j].rates[k].key);
      free(pl->workflows[j].rates);
      free(pl->workflows[j].priority_key);
      free(pl->workflows[j].fairness_key);
      for (size_t k = 0; k < pl->workflows[j].n_weights; k++)
        free(pl->workflows[j].weights[k].value);
      free(pl->workflows[j].weights);
      free(pl->workflows[j].singleton_key);
      free(pl->workflows[j].debounce_key);
      for (size_t k = 0; k < pl->workflows[j].n_index; k++) {
        free(pl->workflows[j].index[k].name);
        free(pl->workflows[j].index[k].from);
      }
      free(pl->workflows[j].index);
      for (size_t k = 0; k < pl->workflows[j].n_tail_consumers; k++)
        free(pl->workflows[j].tail_consumers[k]);
      free(pl->workflows[j].tail_consumers);
      free(pl->workflows[j].tail_pos);
    }
    for (size_t k = 0; k < pl->n_tail_consumers; k++)
      free(pl->tail_consumers[k]);
    free(pl->tail_consumers);
    free(pl->tail_pos);
    free(pl->workflows);
    for (size_t j = 0; j < pl->n_producers; j++) {
      free(pl->producers[j].binding);
      free(pl->producers[j].queue);
    }
    free(pl->producers);
    for (size_t j = 0; j < pl->n_consumers; j++) {
      free(pl->consumers[j].queue);
      free(pl->consumers[j].dead_letter_queue);
      free(pl->consumers[j].workflow);
      free(pl->consumers[j].id_from);
      free(pl->consumers[j].concurrency_key);
    }
    free(pl->consumers);
    for (size_t j = 0; j < pl->n_crons; j++) {
      free(pl->crons[j].schedule);
      free(pl->crons[j].timezone);
      free(pl->crons[j].workflow);
      free(pl->crons[j].id);
      free(pl->crons[j].weekday_note);
      free(pl->crons[j].params);
    }
    free(pl->crons);
    free(pl->name);
    free(pl->path);
  }
  free(cfg->plugins);
  for (size_t i = 0; i < cfg->n_pipelines; i++) {
    free(cfg->pipelines[i].name);
    free(cfg->pipelines[i].binding);
    free(cfg->pipelines[i].path);
    free(cfg->pipelines[i].partition);
    for (size_t k = 0; k < cfg->pipelines[i].n_columns; k++)
      free(cfg->pipelines[i].columns[k]);
    free(cfg->pipelines[i].columns);
    free(cfg->pipelines[i].s3.endpoint);
    free(cfg->pipelines[i].s3.bucket);
    free(cfg->pipelines[i].s3.prefix);
    free(cfg->pipelines[i].s3.region);
    free(cfg->pipelines[i].s3.access_key_env);
    free(cfg->pipelines[i].s3.secret_key_env);
  }
  free(cfg->pipelines);
  for (size_t i = 0; i < cfg->n_resources; i++)
    free(cfg->resources[i].name);
  free(cfg->resources);
  free(cfg->storage.path);
  free(cfg->storage.postgresql);
  for (size_t i = 0; i < cfg->storage.encryption.n_keys; i++) {
    free(cfg->storage.encryption.keys[i].id);
    free(cfg->storage.encryption.keys[i].key_env);
  }
  free(cfg->storage.encryption.keys);
  free(cfg->storage.encryption.active);
  free(cfg->http.listen);
  free(cfg->http.token_env);
  free(cfg->telemetry.otlp_endpoint);
  free(cfg->telemetry.service_name);
  for (size_t i = 0; i < cfg->http.n_allowed_hosts; i++)
    free(cfg->http.allowed_hosts[i]);
  free(cfg->http.allowed_hosts);
  free(cfg->http.tls.cert);
  free(cfg->http.tls.key);
  free(cfg->http.tls.client_ca);
  for (size_t i = 0; i < cfg->http.n_keys; i++) {
    config_api_key *k = &cfg->http.keys[i];
    free(k->name);
    free(k->token_env);
    for (size_t j = 0; j < k->n_workflows; j++)
      free(k->workflows[j]);
    free(k->workflows);
    for (size_t j = 0; j < k->n_queues; j++)
      free(k->queues[j]);
    free(k->queues);
  }
  free(cfg->http.keys);
  free(cfg->file);
  free(cfg);
}
