/* json_access.h — values read at a JSON pointer out of JSON text, and
 * JSON text built from a format: what duro.h's accessors (duro_json_string,
 * duro_json_pack, ...) do, alike in the engine and in a worker process.
 * Strings come back malloc'ed: the API member that calls these hands them
 * to whatever owns the plugin's memory where it runs (the activation, a
 * handler's call). */
#ifndef DURO_JSON_ACCESS_H
#define DURO_JSON_ACCESS_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* The string at `ptr` in `json`, unescaped; NULL when the text is not
 * JSON, nothing is there or it is not a string. */
char *json_access_string(const char *json, const char *ptr);
/* The value at `ptr` as compact JSON text (an object, an array, a
 * scalar), or NULL. */
char *json_access_value(const char *json, const char *ptr);
/* 1 and *out when the value at `ptr` is of the type, else 0 (*out
 * untouched).  An integer is a number without a fraction or exponent
 * that fits 64 bits; a number either kind. */
int json_access_integer(const char *json, const char *ptr, int64_t *out);
int json_access_number(const char *json, const char *ptr, double *out);
int json_access_boolean(const char *json, const char *ptr, int *out);

/* JSON text built from `fmt` (duro.h's duro_json_pack: { } [ ] s i I f b
 * n j; spaces, ':' and ',' are for the eye), or NULL with what went wrong
 * and where in `err`. */
char *json_access_vpack(const char *fmt, va_list ap, char *err, size_t err_len);

#endif
