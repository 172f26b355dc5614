/* json_pointer.h — JSON pointers (RFC 6901: "" or "/a/b~1c~0"), which
 * the config checks (a no-code consumer's id_from) and the queues'
 * workflow consumer follows into a message body.  In base/ so that both
 * use one rule without depending on each other. */
#ifndef DURO_JSON_POINTER_H
#define DURO_JSON_POINTER_H

#include <jansson.h>

/* 1 when `ptr` is a well-formed JSON pointer ("" or "/a/b~1c~0"); 0
 * otherwise and for NULL. */
int duro_json_pointer_valid(const char *ptr);
/* The value `ptr` designates in `doc` (borrowed), or NULL. */
json_t *duro_json_pointer_get(json_t *doc, const char *ptr);

#endif
