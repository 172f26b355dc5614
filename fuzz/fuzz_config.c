/* fuzz_config.c — libFuzzer target for the YAML config loader.
 *
 * Each input is a config file's text, handed to config_parse_all() as
 * config_load_all() would hand it the file: it must come back as a config
 * or as a list of "file:line:column: message" errors in file order, never
 * crash, leak or hang. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  errlist errs = {0};
  config *cfg = config_parse_all("fuzz.yaml", (const char *)data, size, &errs);
  if (cfg) {
    if (errlist_total(&errs) != 0)
      __builtin_trap(); /* a config is returned only without an error */
    /* A returned config is whole: what the host reads from it is there. */
    for (size_t i = 0; i < cfg->n_plugins; i++)
      for (size_t k = 0; k < cfg->plugins[i].n_workflows; k++)
        (void)config_find_workflow(cfg, cfg->plugins[i].workflows[k].name,
                                   NULL);
    config_free(cfg);
  } else if (errs.n == 0) {
    __builtin_trap(); /* a refusal says why */
  }
  for (size_t i = 0; i < errs.n; i++) {
    const errlist_item *it = &errs.items[i];
    if (strncmp(it->text, "fuzz.yaml:", 10) != 0)
      __builtin_trap(); /* each error names file:line:column */
    if (i > 0 && (it->line < it[-1].line ||
                  (it->line == it[-1].line && it->column < it[-1].column)))
      __builtin_trap(); /* in file order */
  }
  errlist_clear(&errs);
  return 0;
}
