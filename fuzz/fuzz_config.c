/* fuzz_config.c — libFuzzer target for the YAML config loader.
 *
 * Each input is a config file's text, handed to config_parse() as
 * config_load() would hand it the file: it must come back as a config or
 * as one "file:line:column: message", never crash, leak or hang. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[1024];
  err[0] = '\0';
  config *cfg =
      config_parse("fuzz.yaml", (const char *)data, size, err, sizeof err);
  if (cfg) {
    /* A returned config is whole: what the host reads from it is there. */
    for (size_t i = 0; i < cfg->n_plugins; i++)
      for (size_t k = 0; k < cfg->plugins[i].n_workflows; k++)
        (void)config_find_workflow(cfg, cfg->plugins[i].workflows[k].name,
                                   NULL);
    config_free(cfg);
  } else if (strncmp(err, "fuzz.yaml:", 10) != 0) {
    __builtin_trap(); /* a refusal always names file:line:column */
  }
  return 0;
}
