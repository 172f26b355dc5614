/* journal_rekey.c — a key rotation's rewrite of the values encrypted at
 * rest, page by page (journal_rekey.h).  A page's values are copied out
 * of the scan (its rows are the backend's), opened, sealed under the
 * active key and written back in one batch. */
#include "journal_rekey.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "duro.h"
#include "util.h"

/* A page's values, copied. */
typedef struct page {
  journal_value *v;
  size_t n, cap;
  journal_rekey *r;
} page;

static void count_key(journal_rekey *r, const char *stored) {
  char id[JOURNAL_CRYPT_ID_MAX + 1];
  if (journal_crypt_key_of(stored, id) != 0) {
    r->unopened++; /* malformed: no key could open it */
    return;
  }
  for (size_t i = 0; i < r->n_keys; i++)
    if (!strcmp(r->keys[i].id, id)) {
      r->keys[i].n++;
      return;
    }
  if (r->n_keys < JOURNAL_REKEY_KEYS) {
    snprintf(r->keys[r->n_keys].id, sizeof r->keys[0].id, "%s", id);
    r->keys[r->n_keys++].n = 1;
  }
}

static int take(void *ctx, const journal_value *v) {
  page *p = ctx;
  if (journal_crypt_sealed(v->stored))
    count_key(p->r, v->stored);
  else
    p->r->plaintext++;
  if (p->n == p->cap) {
    p->cap = p->cap ? 2 * p->cap : 64;
    p->v = xrealloc(p->v, p->cap * sizeof *p->v);
  }
  journal_value *c = &p->v[p->n++];
  *c = *v;
  c->name = v->name ? xstrdup(v->name) : NULL;
  c->stored = xstrdup(v->stored);
  return 0;
}

static void page_free(page *p) {
  for (size_t i = 0; i < p->n; i++) {
    free((char *)p->v[i].name);
    free((char *)p->v[i].stored);
  }
  free(p->v);
}

/* The scope a value was sealed for (journal_seal.c): params are bound to
 * their workflow, queue messages to nothing, the rest to their instance
 * (and a step's and an attempt's to the step key). */
static void scope_of(const journal_value *v, int64_t *rowid,
                     const char **name) {
  *rowid = v->field == JOURNAL_FIELD_PARAMS ||
                   v->field == JOURNAL_FIELD_MESSAGE ||
                   v->field == JOURNAL_FIELD_MESSAGE_ERROR
               ? 0
               : v->rowid;
  *name = v->field == JOURNAL_FIELD_PARAMS ||
                  v->field == JOURNAL_FIELD_STEP_RESULT ||
                  v->field == JOURNAL_FIELD_STEP_ERROR ||
                  v->field == JOURNAL_FIELD_ATTEMPT_ERROR
              ? v->name
              : NULL;
}

/* The page's values sealed again under c's active key, in one commit. */
static int rewrite(journal *j, const journal_crypt *c, page *p,
                   journal_rekey *r) {
  journal_batch b = {0};
  for (size_t i = 0; i < p->n; i++) {
    const journal_value *v = &p->v[i];
    int64_t rowid;
    const char *name;
    scope_of(v, &rowid, &name);
    char *plain = NULL, err[200];
    if (journal_crypt_sealed(v->stored) &&
        journal_crypt_open(c, (journal_field)v->field, rowid, name, v->stored,
                           &plain, err, sizeof err) != 0) {
      r->unopened++;
      continue;
    }
    char *sealed = journal_crypt_seal(c, (journal_field)v->field, rowid, name,
                                      plain ? plain : v->stored);
    free(plain);
    journal_op *op = journal_batch_add(&b, JOP_VALUE_RESEAL);
    op->value = v;
    op->body = journal_batch_own(&b, sealed);
  }
  int rc = b.n ? journal_commit(j, &b) : 0;
  for (size_t i = 0; rc == 0 && i < b.n; i++) {
    if (b.ops[i].out_rowid > 0)
      r->rewritten++;
    else
      r->changed++;
  }
  journal_batch_free(&b);
  return rc;
}

int journal_rekey_page(journal *j, journal_rekey *r, size_t limit,
                       int count_only) {
  const journal_crypt *c = journal_get_crypt(j);
  const char *active = journal_crypt_active(c);
  if (!count_only && !active)
    return DURO_E_INVALID_ARGUMENT;
  if (journal_rekey_done(r))
    return 0;
  /* a rotation leaves the active key's values on the server */
  char *skip =
      count_only ? NULL : xasprintf(JOURNAL_CRYPT_PREFIX "%s:", active);
  journal_rekey before = *r; /* a page that fails counts nothing */
  page p = {.r = r};
  int which =
      r->instances_done ? JOURNAL_VALUES_MESSAGES : JOURNAL_VALUES_INSTANCES;
  int64_t *after = r->instances_done ? &r->after_message : &r->after_instance;
  int64_t last = *after;
  int rc = journal_values_each(j, which, *after, limit, skip, take, &p, &last);
  if (rc == 0 && !count_only)
    rc = rewrite(j, c, &p, r);
  if (rc)
    *r = before;
  else {
    if (last == *after)
      *(r->instances_done ? &r->messages_done : &r->instances_done) = 1;
    *after = last;
  }
  page_free(&p);
  free(skip);
  return rc;
}

int journal_value_places(int field) {
  switch (field) {
  case JOURNAL_FIELD_PARAMS:
  case JOURNAL_FIELD_OUTPUT:
  case JOURNAL_FIELD_ERROR:
    return JOURNAL_AT_ROWID;
  case JOURNAL_FIELD_STEP_RESULT:
  case JOURNAL_FIELD_STEP_ERROR:
    return JOURNAL_AT_ROWID | JOURNAL_AT_NAME;
  case JOURNAL_FIELD_ATTEMPT_ERROR:
    return JOURNAL_AT_ROWID | JOURNAL_AT_NAME | JOURNAL_AT_NUMBER;
  case JOURNAL_FIELD_EVENT:
  case JOURNAL_FIELD_LOG:
    return JOURNAL_AT_ROWID | JOURNAL_AT_NUMBER;
  case JOURNAL_FIELD_MESSAGE:
  case JOURNAL_FIELD_MESSAGE_ERROR:
    return JOURNAL_AT_NUMBER;
  default:
    return 0;
  }
}

int journal_rekey_done(const journal_rekey *r) {
  return r->instances_done && r->messages_done;
}
