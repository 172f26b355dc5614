/* error.c — names and descriptions of the DURO_E_* codes, generated from
 * the one list in duro.h. */
#include "error.h"

const char *duro_err_name(int code) {
  switch (code) {
#define X(name, value, str, desc)                                              \
  case value:                                                                  \
    return str;
    DURO_ERRORS(X)
#undef X
  default:
    return "unknown";
  }
}

const char *duro_err_str(int code) {
  switch (code) {
  case 0:
    return "success";
#define X(name, value, str, desc)                                              \
  case value:                                                                  \
    return desc;
    DURO_ERRORS(X)
#undef X
  default:
    return "unknown error";
  }
}
