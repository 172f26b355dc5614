/* fuzz_duration.c — libFuzzer target for the duration parser.
 *
 * Each input is a duration's text ("10 seconds", "30d", "500"): parsed,
 * it is a non-negative number of milliseconds no longer than
 * DURATION_MAX_MS, or a refusal; never a crash or an overflow (UBSan). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "duration.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text)
    return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  int64_t ms = -1;
  int too_long = 0;
  if (duration_parse_detail(text, &ms, &too_long) == 0) {
    if (ms < 0 || ms > DURATION_MAX_MS)
      __builtin_trap();
    int64_t again = -1;
    if (duration_parse(text, &again) != 0 || again != ms)
      __builtin_trap(); /* the two entry points agree */
  }
  free(text);
  return 0;
}
