/* ids.h — the syntax of instance ids, which the HTTP routes also apply to
 * workflow names, event types and queue names: 1-100 characters of
 * A-Z a-z 0-9 _ . : -.  In base/ so that the engine, the config and the
 * client check one rule without depending on each other. */
#ifndef DURO_IDS_H
#define DURO_IDS_H

/* 1 when `id` is 1-100 chars of [A-Za-z0-9_.:-]; 0 otherwise and for
 * NULL. */
int duro_instance_id_valid(const char *id);

#endif
