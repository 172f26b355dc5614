/* error.h — the host's view of the DURO_E_* codes declared in duro.h.
 *
 * One list (DURO_ERRORS) produces the enum, the stable names
 * ("instance.already_exists") and the descriptions, so the engine, the HTTP
 * API and plugins agree on every code. */
#ifndef DURO_ERROR_H
#define DURO_ERROR_H

#include "duro.h"

/* "instance.already_exists" for DURO_E_ALREADY_EXISTS; "unknown" otherwise. */
const char *duro_err_name(int code);

/* A one-line description of the code. */
const char *duro_err_str(int code);

#endif
