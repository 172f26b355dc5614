/* view_keys.h — the keys of storage.encryption and their rotation
 * (keys/keys.h) as the JSON GET /storage/keys sends and the CLI reads. */
#ifndef DURO_VIEW_KEYS_H
#define DURO_VIEW_KEYS_H

#include <jansson.h>

#include "keys.h"

/* A run: {kind: "rotation"|"count", state, active (a rotation's),
 * started_ms, ended_ms (null while it runs), instances_done,
 * messages_done (whether each walk is through), plaintext (values in the
 * clear), keys: {id: values sealed under it} (a rotation's: the keys
 * other than the active one), rewritten, changed, unopened, error (a
 * failed one's)}. */
json_t *duro_keys_run_json(const duro_keys_run *r);
/* GET /storage/keys: {keys: [{id, active}], active (null: none), run (null
 * before the first)}. */
json_t *duro_keys_json(duro_engine *e);

#endif
