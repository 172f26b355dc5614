/* json_access.c — duro.h's JSON accessors (json_access.h) over jansson:
 * each read parses the text again (params and results are small, and a
 * plugin keeps no parsed document to free); a pack walks its format once,
 * taking one argument per conversion. */
#include "json_access.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_pointer.h"
#include "util.h"

/* 1 when every real in v reads back the same from 15 significant
 * digits: then they print so (19.99, not 19.989999999999998), else with
 * 17, which any double survives. */
static int reals_fit_15(json_t *v) {
  if (json_is_real(v)) {
    char text[32];
    snprintf(text, sizeof text, "%.15g", json_real_value(v));
    return strtod(text, NULL) == json_real_value(v);
  }
  size_t i;
  const char *key;
  json_t *item;
  if (json_is_array(v)) {
    json_array_foreach(v, i, item) if (!reals_fit_15(item)) return 0;
  } else if (json_is_object(v)) {
    json_object_foreach(v, key, item) if (!reals_fit_15(item)) return 0;
  }
  return 1;
}

/* v as compact text (malloc'ed). */
static char *dump(json_t *v) {
  int digits = reals_fit_15(v) ? 15 : 17;
  return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY |
                           JSON_REAL_PRECISION(digits));
}

/* The value at ptr in the parsed text (*doc to decref), or NULL. */
static json_t *value_at(const char *json, const char *ptr, json_t **doc) {
  *doc = json ? json_loads(json, JSON_DECODE_ANY, NULL) : NULL;
  return *doc ? duro_json_pointer_get(*doc, ptr ? ptr : "") : NULL;
}

char *json_access_string(const char *json, const char *ptr) {
  json_t *doc, *v = value_at(json, ptr, &doc);
  char *s = json_is_string(v) ? xstrdup(json_string_value(v)) : NULL;
  json_decref(doc);
  return s;
}

char *json_access_value(const char *json, const char *ptr) {
  json_t *doc, *v = value_at(json, ptr, &doc);
  char *s = v ? dump(v) : NULL;
  json_decref(doc);
  return s;
}

int json_access_integer(const char *json, const char *ptr, int64_t *out) {
  json_t *doc, *v = value_at(json, ptr, &doc);
  int ok = json_is_integer(v);
  if (ok)
    *out = (int64_t)json_integer_value(v);
  json_decref(doc);
  return ok;
}

int json_access_number(const char *json, const char *ptr, double *out) {
  json_t *doc, *v = value_at(json, ptr, &doc);
  int ok = json_is_number(v);
  if (ok)
    *out = json_number_value(v);
  json_decref(doc);
  return ok;
}

int json_access_boolean(const char *json, const char *ptr, int *out) {
  json_t *doc, *v = value_at(json, ptr, &doc);
  int ok = json_is_boolean(v);
  if (ok)
    *out = json_is_true(v);
  json_decref(doc);
  return ok;
}

/* ---- pack ---- */

typedef struct packer {
  const char *fmt, *p;
  va_list *ap;
  char *err;
  size_t err_len;
} packer;

static json_t *pack_fail(packer *k, const char *what) {
  if (!k->err[0])
    snprintf(k->err, k->err_len, "%s at offset %zu of format \"%s\"", what,
             (size_t)(k->p - k->fmt), k->fmt);
  return NULL;
}

/* The next conversion character, past spaces, ':' and ','. */
static char pack_next(packer *k) {
  while (*k->p == ' ' || *k->p == '\t' || *k->p == '\n' || *k->p == ':' ||
         *k->p == ',')
    k->p++;
  return *k->p;
}

static json_t *pack_value(packer *k);

static json_t *pack_object(packer *k) {
  json_t *obj = json_object();
  for (;;) {
    char c = pack_next(k);
    if (c == '}') {
      k->p++;
      return obj;
    }
    if (c != 's') {
      json_decref(obj);
      return pack_fail(k, c ? "expected 's' for a key or '}'"
                            : "unterminated '{'");
    }
    k->p++;
    const char *key = va_arg(*k->ap, const char *);
    if (!key) {
      json_decref(obj);
      return pack_fail(k, "a NULL key");
    }
    json_t *v = pack_value(k);
    if (!v || json_object_set_new(obj, key, v) != 0) {
      json_decref(obj);
      return v ? pack_fail(k, "a key that is not UTF-8") : NULL;
    }
  }
}

static json_t *pack_array(packer *k) {
  json_t *arr = json_array();
  for (;;) {
    char c = pack_next(k);
    if (c == ']') {
      k->p++;
      return arr;
    }
    if (!c) {
      json_decref(arr);
      return pack_fail(k, "unterminated '['");
    }
    json_t *v = pack_value(k);
    if (!v) {
      json_decref(arr);
      return NULL;
    }
    json_array_append_new(arr, v);
  }
}

static json_t *pack_value(packer *k) {
  char c = pack_next(k);
  k->p++;
  switch (c) {
  case '{':
    return pack_object(k);
  case '[':
    return pack_array(k);
  case 's': {
    const char *s = va_arg(*k->ap, const char *);
    json_t *v = s ? json_string(s) : json_null();
    return v ? v : pack_fail(k, "a string that is not UTF-8");
  }
  case 'i':
    return json_integer(va_arg(*k->ap, int));
  case 'I':
    return json_integer((json_int_t)va_arg(*k->ap, int64_t));
  case 'f': {
    json_t *v = json_real(va_arg(*k->ap, double));
    return v ? v : pack_fail(k, "a number that is NaN or infinite");
  }
  case 'b':
    return json_boolean(va_arg(*k->ap, int));
  case 'n':
    return json_null();
  case 'j': {
    const char *text = va_arg(*k->ap, const char *);
    json_error_t jerr;
    json_t *v = text ? json_loads(text, JSON_DECODE_ANY, &jerr) : json_null();
    if (!v) {
      char what[256];
      snprintf(what, sizeof what, "'j' given text that is not JSON (%s)",
               jerr.text);
      return pack_fail(k, what);
    }
    return v;
  }
  case '\0':
    k->p--;
    return pack_fail(k, "a format that ends before its value");
  default:
    k->p--;
    return pack_fail(k, "an unknown conversion");
  }
}

char *json_access_vpack(const char *fmt, va_list ap, char *err,
                        size_t err_len) {
  if (err_len)
    err[0] = '\0';
  if (!fmt) {
    snprintf(err, err_len, "no format");
    return NULL;
  }
  char none[1];
  va_list copy;
  va_copy(copy, ap);
  packer k = {.fmt = fmt,
              .p = fmt,
              .ap = &copy,
              .err = err_len ? err : none,
              .err_len = err_len ? err_len : sizeof none};
  none[0] = '\0';
  json_t *v = pack_value(&k);
  if (v && pack_next(&k)) {
    json_decref(v);
    v = pack_fail(&k, "text after the value");
  }
  va_end(copy);
  char *s = v ? dump(v) : NULL;
  json_decref(v);
  return s;
}
