/* test_encryption.c — values encrypted at rest (storage.encryption;
 * store/journal_crypt.c, journal_seal.c) on the in-process engine (and on
 * PostgreSQL in `make test`): an instance's params, step results, attempt
 * errors, events, output, log lines and queue bodies holding a known
 * marker are read back in the clear through the engine while the store's
 * bytes (the SQLite file and its write-ahead log; PostgreSQL's rows as
 * text) never hold it; values written before encryption was turned on
 * still read; a value under a key not listed, or altered, or moved onto
 * another row fails its read with an error naming the key, and nothing
 * else; two keys: the old one's values read after the active one
 * changed; the codec alone: keys as hex and base64, refused ones. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "duro_config.h"
#include "harness.h"
#include "journal.h"
#include "journal_crypt.h"
#include "queue.h"
#include "suite_run.h"
#include "view_instance.h"
#include "view_journal.h"
#include <sqlite3.h>
#if DURO_HAVE_PG
#include <libpq-fe.h>
#endif

#define MARKER "Zq7-marker-8Kd"

static harness h;
static journal_crypt *keys, *extra[2]; /* freed once the engine is closed */
static char err[256];

/* A key of 32 bytes, all `fill`. */
static void key_of(unsigned char fill, unsigned char key[32]) {
  memset(key, fill, 32);
}

/* Keys ids[0..n) (key i filled with byte i + 1), the last active. */
static journal_crypt *keys_new(const char *const *ids, size_t n,
                               const char *active) {
  journal_crypt *c = journal_crypt_new();
  unsigned char k[32];
  for (size_t i = 0; i < n; i++) {
    key_of((unsigned char)(ids[i][1] - '0'), k);
    ck_assert_int_eq(journal_crypt_add(c, ids[i], k), 0);
  }
  ck_assert_int_eq(journal_crypt_activate(c, active), 0);
  return c;
}

static int reveal(duro_attempt *a, void *arg) {
  (void)arg;
  if (duro_attempt_number(a) == 1)
    return duro_attempt_fail(a, "declined " MARKER);
  return duro_attempt_result(a, "{\"card\":\"" MARKER "\"}");
}

/* Everything a value can hold: a log line, a step's failed attempt and
 * result, an event, the output. */
static duro_rc secret(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  duro_log(DURO_LOG_INFO, "seen " MARKER);
  duro_step_config cfg = {
      .retries = &(duro_retries){
          .limit = 2, .delay = "1 second", .backoff = DURO_BACKOFF_CONSTANT}};
  DURO_TRY(duro_do(step, "reveal", &cfg, reveal, NULL, NULL));
  const char *e = NULL;
  DURO_TRY(duro_wait_for_event(step, "w", "go", NULL, &e));
  return duro_set_output(step, "\"done " MARKER "\"");
}

static void setup(void) {
  harness_open(&h);
  harness_register(&h, "secret", secret);
  harness_start(&h);
  harness_register_queue(&h, "jobs", NULL);
  keys = extra[0] = extra[1] = NULL;
}

static void teardown(void) {
  harness_close(&h);
  journal_crypt_free(keys);
  journal_crypt_free(extra[0]);
  journal_crypt_free(extra[1]);
}

/* Runs instance `id` of "secret" to its end, a queue message sent. */
static void run_secret(const char *id) {
  harness_create(&h, "secret", id, "{\"ssn\":\"" MARKER "\"}", 0);
  harness_run(&h);
  harness_advance(&h, 1000); /* the second attempt */
  ck_assert_int_eq(duro_instance_send_event(h.e, "secret", id, "go",
                                            "{\"pin\":\"" MARKER "\"}"),
                   0);
  harness_run(&h);
  ck_assert_str_eq(harness_status(&h, "secret", id), "complete");
  ck_assert_int_eq(duro_queue_enqueue(h.e, "jobs", "{\"to\":\"" MARKER "\"}", 0,
                                      NULL, err, sizeof err),
                   0);
}

/* How many times the marker is in s. */
static int count(const char *s) {
  int n = 0;
  for (const char *p = s; (p = strstr(p, MARKER)); p++)
    n++;
  return n;
}

/* Every value of instance `id` read through the engine, in the clear:
 * params, the attempt's error, the result, the event, the output, and
 * its log line. */
static void reads_clear(const char *id) {
  json_t *d = harness_describe(&h, "secret", id);
  char *text = json_dumps(d, 0);
  ck_assert_msg(count(text) >= 5, "%s", text);
  ck_assert_ptr_null(strstr(text, JOURNAL_CRYPT_PREFIX));
  free(text);
  json_decref(d);
  duro_log_list l = {0};
  ck_assert_int_eq(duro_instance_logs(h.e, "secret", id, 0, 10, &l), 0);
  ck_assert_uint_eq(l.n, 1);
  ck_assert_str_eq(l.v[0].message, "seen " MARKER);
  duro_log_list_free(&l);
}

/* The message bodies browsed, then pulled: each in the clear. */
static void queue_clear(size_t n) {
  duro_queue_message_list l = {0};
  ck_assert_int_eq(
      duro_queue_peek_messages(h.e, "jobs", 100, &l, err, sizeof err), 0);
  ck_assert_uint_eq(l.n, n);
  for (size_t i = 0; i < l.n; i++)
    ck_assert_str_eq(l.v[i].body, "{\"to\":\"" MARKER "\"}");
  duro_queue_message_list_free(&l);
  ck_assert_int_eq(
      duro_queue_pull_messages(h.e, "jobs", 100, 0, &l, err, sizeof err), 0);
  ck_assert_uint_eq(l.n, n);
  for (size_t i = 0; i < l.n; i++)
    ck_assert_str_eq(l.v[i].body, "{\"to\":\"" MARKER "\"}");
  duro_queue_message_list_free(&l);
}

/* ---- the store's own bytes ------------------------------------------------
 */

static int on_pg(void) { return harness_backend() != NULL; }

/* How many times the marker is in the file at `path` (0 when absent). */
static int file_count(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return 0;
  size_t cap = 1 << 20, len = 0, got;
  char *buf = malloc(cap + 1);
  while ((got = fread(buf + len, 1, cap - len, f)) > 0) {
    len += got;
    if (len == cap)
      buf = realloc(buf, (cap *= 2) + 1);
  }
  fclose(f);
  int n = 0;
  for (size_t i = 0; i + sizeof MARKER - 1 <= len; i++)
    n += memcmp(buf + i, MARKER, sizeof MARKER - 1) == 0;
  free(buf);
  return n;
}

/* The marker's rows in the store: in the SQLite file and its log, or in
 * every table of the PostgreSQL database, each row as text. */
static int stored_count(void) {
  if (!on_pg()) {
    char path[400];
    int n = file_count(h.db);
    snprintf(path, sizeof path, "%s-wal", h.db);
    return n + file_count(path);
  }
#if DURO_HAVE_PG
  PGconn *c = PQconnectdb(h.db);
  ck_assert_int_eq(PQstatus(c), CONNECTION_OK);
  PGresult *r = PQexec(c, "SELECT table_name FROM information_schema.tables "
                          "WHERE table_schema='public'");
  ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
  int n = 0;
  for (int i = 0; i < PQntuples(r); i++) {
    char sql[300];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM \"%s\" x WHERE x::text LIKE '%%%s%%'",
             PQgetvalue(r, i, 0), MARKER);
    PGresult *q = PQexec(c, sql);
    ck_assert_msg(PQresultStatus(q) == PGRES_TUPLES_OK, "%s",
                  PQerrorMessage(c));
    n += atoi(PQgetvalue(q, 0, 0));
    PQclear(q);
  }
  PQclear(r);
  PQfinish(c);
  return n;
#else
  return 0;
#endif
}

/* Runs `sql` on the store behind the engine's back. */
static void raw_exec(const char *sql) {
  if (!on_pg()) {
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(h.db, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    char *e = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &e);
    ck_assert_msg(rc == SQLITE_OK, "%s: %s", sql, e ? e : "?");
    sqlite3_close(db);
    return;
  }
#if DURO_HAVE_PG
  PGconn *c = PQconnectdb(h.db);
  PGresult *r = PQexec(c, sql);
  ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s: %s", sql,
                PQerrorMessage(c));
  PQclear(r);
  PQfinish(c);
#endif
}

/* ---- cases ----------------------------------------------------------------
 */

START_TEST(marker_never_stored) {
  keys = keys_new((const char *[]){"k1"}, 1, "k1");
  harness_set_crypt(&h, keys);
  run_secret("s1");
  reads_clear("s1");
  queue_clear(1);
  json_t *doc = NULL;
  ck_assert_int_eq(duro_instance_export(h.e, "secret", "s1", &doc), 0);
  char *text = json_dumps(doc, 0);
  ck_assert_msg(count(text) >= 5, "%s", text); /* an export is in the clear */
  free(text);
  json_decref(doc);
  ck_assert_int_eq(stored_count(), 0);
  harness_reopen(&h); /* and again from the store alone */
  reads_clear("s1");
  ck_assert_int_eq(stored_count(), 0);
}
END_TEST

/* The control: without keys the same run stores the marker. */
START_TEST(marker_stored_without_keys) {
  run_secret("s1");
  reads_clear("s1");
  ck_assert_int_gt(stored_count(), 0);
}
END_TEST

START_TEST(plaintext_from_before_still_reads) {
  run_secret("old");
  keys = keys_new((const char *[]){"k1"}, 1, "k1");
  harness_set_crypt(&h, keys);
  run_secret("new");
  reads_clear("old");
  reads_clear("new");
  queue_clear(2);
}
END_TEST

/* A journal read without the key its values need: the read fails, naming
 * the key, and the values stay for a host that has it. */
START_TEST(missing_key_named) {
  keys = keys_new((const char *[]){"k1"}, 1, "k1");
  harness_set_crypt(&h, keys);
  run_secret("s1");
  extra[0] = keys_new((const char *[]){"k2"}, 1, "k2");
  harness_set_crypt(&h, extra[0]);
  duro_instance_info info = {0};
  ck_assert_int_eq(duro_instance_read(h.e, "secret", "s1", &info),
                   DURO_E_STORAGE);
  journal *j = harness_journal_open(&h); /* no keys at all */
  journal_instance in = {0};
  ck_assert_int_eq(journal_instance_get(j, "secret", "s1", &in),
                   DURO_E_STORAGE);
  ck_assert_msg(strstr(journal_errmsg(j), "key \"k1\""), "%s",
                journal_errmsg(j));
  journal_close(j);
  /* a message under a key not listed is not delivered sealed */
  duro_queue_message_list l = {0};
  ck_assert_int_eq(
      duro_queue_pull_messages(h.e, "jobs", 100, 0, &l, err, sizeof err), 0);
  ck_assert_uint_eq(l.n, 0);
  duro_queue_message_list_free(&l);
  harness_set_crypt(&h, keys);
  reads_clear("s1");
}
END_TEST

/* A queue message under a key taken off the list, on a queue that drops
 * what runs out of retries: leases pass it over without counting an
 * attempt however long the key is away, and it is delivered, in the
 * clear and as a first attempt, once the key is listed again. */
START_TEST(message_waits_for_its_key) {
  keys = keys_new((const char *[]){"k1"}, 1, "k1");
  harness_set_crypt(&h, keys);
  ck_assert_int_eq(duro_queue_enqueue(h.e, "jobs", "{\"to\":\"" MARKER "\"}", 0,
                                      NULL, err, sizeof err),
                   0);
  extra[0] = keys_new((const char *[]){"k2"}, 1, "k2");
  harness_set_crypt(&h, extra[0]);
  duro_queue_message_list l = {0};
  for (int i = 0; i < 8; i++) { /* past any queue's retries */
    ck_assert_int_eq(
        duro_queue_pull_messages(h.e, "jobs", 10, 1000, &l, err, sizeof err),
        0);
    ck_assert_uint_eq(l.n, 0);
    duro_queue_message_list_free(&l);
    harness_advance(&h, JOURNAL_PARKED_MS);
  }
  ck_assert_int_eq(
      duro_queue_peek_messages(h.e, "jobs", 10, &l, err, sizeof err),
      DURO_E_STORAGE); /* still there, unreadable */
  duro_queue_message_list_free(&l);
  harness_set_crypt(&h, keys);
  ck_assert_int_eq(
      duro_queue_pull_messages(h.e, "jobs", 10, 1000, &l, err, sizeof err), 0);
  ck_assert_uint_eq(l.n, 1);
  ck_assert_str_eq(l.v[0].body, "{\"to\":\"" MARKER "\"}");
  ck_assert_uint_eq(l.v[0].attempts, 1);
  duro_queue_message_list_free(&l);
}
END_TEST

/* An output moved onto another instance's row, and a step result with
 * one character changed: each fails its read, cleanly. */
START_TEST(tampered_values_refused) {
  keys = keys_new((const char *[]){"k1"}, 1, "k1");
  harness_set_crypt(&h, keys);
  run_secret("a");
  run_secret("b");
  raw_exec("UPDATE instances SET output=(SELECT output FROM instances "
           "WHERE id='a') WHERE id='b'");
  raw_exec("UPDATE steps SET result=substr(result,1,30) || CASE WHEN "
           "substr(result,31,1)='A' THEN 'B' ELSE 'A' END || "
           "substr(result,32) WHERE instance=(SELECT rowid FROM instances "
           "WHERE id='a') AND result IS NOT NULL");
  harness_reopen(&h);
  duro_instance_info info = {0};
  ck_assert_int_eq(duro_instance_read(h.e, "secret", "b", &info),
                   DURO_E_STORAGE);
  ck_assert_int_eq(duro_instance_read(h.e, "secret", "a", &info),
                   DURO_E_STORAGE);
  journal *j = harness_journal_open(&h);
  journal_set_crypt(j, keys);
  journal_instance in = {0};
  ck_assert_int_eq(journal_instance_get(j, "secret", "b", &in), DURO_E_STORAGE);
  ck_assert_msg(strstr(journal_errmsg(j), "does not decrypt"), "%s",
                journal_errmsg(j));
  journal_close(j);
}
END_TEST

/* k1, then k2 active with k1 kept: both instances read; k2 alone: the
 * first fails, naming k1, the second reads. */
START_TEST(old_key_reads_after_rotation) {
  keys = keys_new((const char *[]){"k1"}, 1, "k1");
  harness_set_crypt(&h, keys);
  run_secret("one");
  extra[0] = keys_new((const char *[]){"k1", "k2"}, 2, "k2");
  harness_set_crypt(&h, extra[0]);
  run_secret("two");
  reads_clear("one");
  reads_clear("two");
  queue_clear(2);
  extra[1] = keys_new((const char *[]){"k2"}, 1, "k2");
  harness_set_crypt(&h, extra[1]);
  reads_clear("two");
  duro_instance_info info = {0};
  ck_assert_int_eq(duro_instance_read(h.e, "secret", "one", &info),
                   DURO_E_STORAGE);
}
END_TEST

/* A keyed consumer's lease and held count read each message's key from
 * its body: from the opened body, so the same key holds the second
 * message back as it would in the clear. */
START_TEST(keyed_lease_reads_keys_of_sealed_bodies) {
  keys = keys_new((const char *[]){"k1"}, 1, "k1");
  journal *j = harness_journal_open(&h);
  journal_set_crypt(j, keys);
  journal_batch b = {0};
  const char *bodies[] = {"{\"k\":\"a\",\"s\":\"" MARKER "\"}",
                          "{\"k\":\"a\",\"n\":2}",
                          "{\"k\":\"b\",\"s\":\"" MARKER "\"}"};
  for (size_t i = 0; i < 3; i++) {
    journal_op *op = journal_batch_add(&b, JOP_MESSAGE_INSERT);
    op->queue = "q";
    op->body = bodies[i];
    op->ts_ms = 1 + (int64_t)i;
    op->visible_ms = 1;
  }
  ck_assert_int_eq(journal_commit(j, &b), 0);
  journal_batch_reset(&b);
  int64_t held = -1;
  ck_assert_int_eq(journal_queue_held(j, "q", 10, "/k", 1, &held), 0);
  ck_assert_int_eq(held, 1);
  journal_op *op = journal_batch_add(&b, JOP_MESSAGE_LEASE);
  op->queue = "q";
  op->ts_ms = 10;
  op->visible_ms = 100000;
  op->lease_token = "t";
  op->n_leases = 10;
  op->key_pointer = "/k";
  op->key_limit = 1;
  ck_assert_int_eq(journal_commit(j, &b), 0);
  ck_assert_uint_eq(b.ops[0].n_messages, 2);
  ck_assert_str_eq(b.ops[0].messages[0].body, bodies[0]);
  ck_assert_str_eq(b.ops[0].messages[1].body, bodies[2]);
  journal_messages_free(b.ops[0].messages, b.ops[0].n_messages);
  journal_batch_free(&b);
  journal_close(j);
  ck_assert_int_eq(stored_count(), 0);
}
END_TEST

/* The codec alone. */
START_TEST(codec) {
  unsigned char k[32], want[32];
  for (int i = 0; i < 32; i++)
    want[i] = (unsigned char)i;
  ck_assert_int_eq(journal_crypt_parse_key("000102030405060708090a0b0c0d0e0f"
                                           "101112131415161718191A1B1C1D1E1F",
                                           k),
                   0);
  ck_assert_int_eq(memcmp(k, want, 32), 0);
  ck_assert_int_eq(journal_crypt_parse_key(
                       " AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n", k),
                   0);
  ck_assert_int_eq(memcmp(k, want, 32), 0);
  ck_assert_int_eq(journal_crypt_parse_key("secret", k), -1);
  ck_assert_int_eq(journal_crypt_parse_key("00010203", k), -1);
  ck_assert_int_eq(journal_crypt_parse_key("zz0102030405060708090a0b0c0d0e0f"
                                           "101112131415161718191A1B1C1D1E1F",
                                           k),
                   -1);
  journal_crypt *c = journal_crypt_new();
  ck_assert_int_eq(journal_crypt_add(c, "k1", want), 0);
  ck_assert_int_eq(journal_crypt_add(c, "k1", want), -1);
  ck_assert_int_eq(journal_crypt_add(c, "bad id", want), -1);
  ck_assert_int_eq(journal_crypt_activate(c, "k9"), -1);
  ck_assert_int_eq(journal_crypt_activate(c, "k1"), 0);
  char *s = journal_crypt_seal(c, JOURNAL_FIELD_EVENT, 7, NULL, "{\"a\":1}");
  ck_assert(journal_crypt_sealed(s));
  char id[JOURNAL_CRYPT_ID_MAX + 1], *plain = NULL;
  ck_assert_int_eq(journal_crypt_key_of(s, id), 0);
  ck_assert_str_eq(id, "k1");
  ck_assert_int_eq(journal_crypt_open(c, JOURNAL_FIELD_EVENT, 7, NULL, s,
                                      &plain, err, sizeof err),
                   0);
  ck_assert_str_eq(plain, "{\"a\":1}");
  free(plain);
  /* another row, another field */
  ck_assert_int_eq(journal_crypt_open(c, JOURNAL_FIELD_EVENT, 8, NULL, s,
                                      &plain, err, sizeof err),
                   -1);
  ck_assert_int_eq(journal_crypt_open(c, JOURNAL_FIELD_LOG, 7, NULL, s, &plain,
                                      err, sizeof err),
                   -1);
  /* cut short */
  s[strlen(s) - 8] = '\0';
  ck_assert_int_eq(journal_crypt_open(c, JOURNAL_FIELD_EVENT, 7, NULL, s,
                                      &plain, err, sizeof err),
                   -1);
  free(s);
  /* plaintext passes as it is */
  ck_assert_int_eq(journal_crypt_open(c, JOURNAL_FIELD_EVENT, 7, NULL, "{}",
                                      &plain, err, sizeof err),
                   0);
  ck_assert_ptr_null(plain);
  journal_crypt_free(c);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("encryption");
  TCase *tc = tcase_create("at_rest");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, marker_never_stored);
  tcase_add_test(tc, marker_stored_without_keys);
  tcase_add_test(tc, plaintext_from_before_still_reads);
  tcase_add_test(tc, missing_key_named);
  tcase_add_test(tc, message_waits_for_its_key);
  tcase_add_test(tc, tampered_values_refused);
  tcase_add_test(tc, old_key_reads_after_rotation);
  tcase_add_test(tc, keyed_lease_reads_keys_of_sealed_bodies);
  tcase_add_test(tc, codec);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return suite_run(suite()); }
