/* fuzz_cron.c — libFuzzer target for cron expressions (cron/expr.h) and
 * instance id templates (cron/trigger.h).
 *
 * An input is an expression's text; after the first NUL byte, if any, an
 * id template.  A refusal's offset lies within the text; an accepted
 * expression's next fire, from a time taken from the input, is a whole
 * minute strictly later (or CRON_NEVER), and the weekday note fits its
 * buffer.  A template expands to a valid instance id or is refused.
 * Never a crash, a hang or an overflow (UBSan). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "expr.h"
#include "trigger.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text)
    return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  size_t len = strlen(text);
  const char *tmpl = len < size ? text + len + 1 : NULL;
  cron_expr e;
  cron_error err;
  if (cron_parse(text, &e, &err) == 0) {
    /* a start between 1970 and 2100, from the input's bytes */
    uint64_t seed = 0;
    for (size_t i = 0; i < size; i++)
      seed = seed * 131 + data[i];
    int64_t after = (int64_t)(seed % (4102444800000ULL));
    int64_t next = cron_next(&e, after, NULL);
    if (next != CRON_NEVER && (next <= after || next % 60000 != 0))
      __builtin_trap();
    char note[256];
    if (cron_weekday_note(&e, note, sizeof note) && strlen(note) >= sizeof note)
      __builtin_trap();
  } else if (err.offset > len) {
    __builtin_trap();
  }
  if (tmpl) {
    char id[128];
    if (cron_expand_id(tmpl, 1767225600000LL, NULL, id, sizeof id) == 0 &&
        !duro_instance_id_valid(id))
      __builtin_trap();
  }
  free(text);
  return 0;
}
