/* orders.c — the order flow of the README as a duro plugin: a tutorial to
 * copy from.
 *
 *   reserve stock -> charge card -> manual review -> grace period
 *     -> notify (mail, warehouse and CRM at once)
 *
 * The workflow class "OrderFlow" takes params
 *
 *   {"orderId": "A-1001", "email": "ada@example.com", "amount": 42.5,
 *    "flakyCard": true,     optional: the first charge attempt fails
 *    "graceSeconds": 5}     optional: the grace period, default "1 hour"
 *
 * and ends with the output {"orderId","charge":{...},"approved":true}, or
 * {"approved":false,"reason":...} when the review rejects the order or does
 * not answer within two days: then the charge is refunded and the stock
 * released, by the rollbacks of those two steps (duro_rollback).  Nothing here
 * touches the network: each step simulates its service.  It reads its params
 * and builds its results with duro.h's JSON accessors (duro_json_string,
 * duro_json_pack, ...), so it needs no JSON library and frees nothing: what
 * they return lives until the activation, or the step's callback, returns to
 * the host.
 *
 * Send the review with the event type "approval" and a payload such as
 * {"approved": true} or {"approved": false, "reason": "fraud"}.
 *
 * duro.h lists seven rules for workflow authors; the comments marked
 * "Rule N" below show each one where it applies.
 *
 * Build it in tree (examples/meson.build) or out of tree:
 *
 *   cc -shared -fPIC -fvisibility=hidden -Wl,-z,defs \
 *      $(pkg-config --cflags duro-plugin) orders.c -o liborders.so
 *
 * -fvisibility=hidden keeps everything but the duro_plugin entry private;
 * -Wl,-z,defs proves that nothing is left for the host to resolve (the host
 * exports no symbols: the API reaches the plugin as a table at load). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "duro.h"

/* ---- the order, read from params -----------------------------------------
 *
 * Rule 3 says to branch only on params and step results.  Params never
 * change for an instance, so reading them outside any step is fine: every
 * activation reads the same values and takes the same branches. */

typedef struct order {
  const char *id;    /* the host's until the activation ends (Rule 6) */
  const char *email; /* the same */
  double amount;
  int flaky_card;
  char grace[32];    /* the duro_sleep duration: "1 hour" or "N seconds" */
  char problem[160]; /* non-empty when the params are unusable */
} order;

/* Order ids are short and plain: they go into charge and mail ids. */
static int plain_id(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 64)
    return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
          (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
          c == ':'))
      return 0;
  }
  return 1;
}

static int plain_email(const char *s) {
  size_t n = strlen(s);
  if (n < 3 || n > 254 || !strchr(s, '@'))
    return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c < 0x20 || c == 0x7f || c == '"' || c == '\\')
      return 0;
  }
  return 1;
}

/* Fills *o from the params text.  A problem is not reported here: the
 * first step refuses the order with o->problem as a final failure, and
 * the message lands in the instance's error where `duro workflows
 * instances describe` shows it.  Each accessor reads the params at a JSON
 * pointer; a value of another type reads as absent. */
static void parse_order(const char *params, order *o) {
  memset(o, 0, sizeof *o);
  snprintf(o->grace, sizeof o->grace, "1 hour");

  const char *whole = duro_json_value(params, "");
  if (!whole || whole[0] != '{') {
    snprintf(o->problem, sizeof o->problem,
             "params must be a JSON object with orderId, email and amount");
    o->id = o->email = "";
    return;
  }

  o->id = duro_json_string(params, "/orderId");
  o->email = duro_json_string(params, "/email");
  int has_amount = duro_json_number(params, "/amount", &o->amount);
  int64_t grace = -1;
  int has_grace = duro_json_value(params, "/graceSeconds") != NULL;
  duro_json_integer(params, "/graceSeconds", &grace);
  duro_json_boolean(params, "/flakyCard", &o->flaky_card);

  if (!o->id || !plain_id(o->id))
    snprintf(o->problem, sizeof o->problem,
             "params.orderId must be 1-64 characters of [A-Za-z0-9_.:-]");
  else if (!o->email || !plain_email(o->email))
    snprintf(o->problem, sizeof o->problem,
             "params.email must be an e-mail address");
  else if (!has_amount || o->amount > 1e9)
    snprintf(o->problem, sizeof o->problem,
             "params.amount must be a number up to 1000000000");
  else if (has_grace && !(grace >= 0 && grace <= 365LL * 24 * 3600))
    snprintf(o->problem, sizeof o->problem,
             "params.graceSeconds must be an integer from 0 to 31536000");

  if (!o->id)
    o->id = "";
  if (!o->email)
    o->email = "";
  if (grace >= 0)
    snprintf(o->grace, sizeof o->grace, "%lld seconds", (long long)grace);
}

/* A stand-in for the id a payment provider would hand back.  Derived from
 * the idempotency key, so the same key always yields the same charge, which
 * is what a real provider's deduplication guarantees. */
static uint64_t fnv1a(const char *s) {
  uint64_t h = UINT64_C(0xcbf29ce484222325);
  for (; *s; s++) {
    h ^= (unsigned char)*s;
    h *= UINT64_C(0x100000001b3);
  }
  return h;
}

/* ---- the steps -----------------------------------------------------------
 *
 * A step callback is where the world is touched.  Rule 1: run() starts from
 * the top on every activation, and a completed step is replayed from the
 * journal without calling its callback, so a side effect written outside a
 * step would happen again on every activation, while one inside a step
 * happens once per attempt.  duro_log() goes inside the callback for the
 * same reason: the host logs it once per attempt, with the instance and the
 * step attached, and not again on replay.
 *
 * duro_json_pack builds each result, escaping what needs it; what it
 * returns lives until the callback returns, and duro_attempt_result copies
 * it. */

static int reserve_stock(duro_attempt *a, void *arg) {
  const order *o = arg;

  /* Bad params will not get better with retries: a final failure ends the
   * step now, and its message becomes the instance's error. */
  if (o->problem[0])
    return duro_attempt_fail_final(a, "invalid order: %s", o->problem);

  duro_log(DURO_LOG_INFO, "reserving stock for order %s", o->id);
  char reservation[80];
  snprintf(reservation, sizeof reservation, "res-%s", o->id);
  return duro_attempt_result(a, duro_json_pack("{s:s, s:s}", "orderId", o->id,
                                               "reservationId", reservation));
}

static int charge_card(duro_attempt *a, void *arg) {
  const order *o = arg;
  uint32_t attempt = duro_attempt_number(a);

  /* Rule 4: an attempt can run twice (the host may die after the provider
   * charged the card but before the result was committed).  The key is
   * "instance-id/charge card#1", the same on every attempt and after a
   * restart, so the provider sees a repeat and charges once. */
  const char *key = duro_attempt_idempotency_key(a);
  duro_log(DURO_LOG_INFO, "charging %.2f for order %s (attempt %u, key %s)",
           o->amount, o->id, attempt, key);

  /* A refusal that no retry can fix: fail final, skipping the retries. */
  if (o->amount <= 0)
    return duro_attempt_fail_final(a, "amount must be positive, got %.2f",
                                   o->amount);

  /* A transient failure: return duro_attempt_fail() and the host retries
   * after the back-off of the step's config (here 10 s, then 20 s, ...). */
  if (o->flaky_card && attempt == 1)
    return duro_attempt_fail(a, "card issuer timed out (simulated)");

  /* The timeout is cooperative: a long call checks it and gives up.  A
   * result set after the deadline would be discarded anyway. */
  if (duro_attempt_cancelled(a))
    return duro_attempt_fail(a, "gave up: attempt deadline passed");

  char charge_id[32];
  snprintf(charge_id, sizeof charge_id, "ch_%016llx",
           (unsigned long long)fnv1a(key));
  return duro_attempt_result(
      a, duro_json_pack("{s:s, s:f, s:s, s:s}", "chargeId", charge_id, "amount",
                        o->amount, "currency", "EUR", "idempotencyKey", key));
}

/* A notice to one service, one branch of the "notify" steps. */
typedef struct notice {
  const order *o;
  const char *service; /* "warehouse", "crm" */
} notice;

static int send_mail(duro_attempt *a, void *arg) {
  const order *o = ((const notice *)arg)->o;
  /* The same key as a Message-ID lets the mail service drop a duplicate
   * (Rule 4 again). */
  const char *key = duro_attempt_idempotency_key(a);
  duro_log(DURO_LOG_INFO, "mailing %s about order %s", o->email, o->id);
  char message_id[300];
  snprintf(message_id, sizeof message_id, "<%s@orders>", key);
  return duro_attempt_result(
      a, duro_json_pack("{s:s, s:s}", "to", o->email, "messageId", message_id));
}

/* The warehouse and the CRM: each a call to a service of its own, keyed
 * as the mail is (Rule 4). */
static int tell(duro_attempt *a, void *arg) {
  const notice *n = arg;
  const char *key = duro_attempt_idempotency_key(a);
  duro_log(DURO_LOG_INFO, "telling the %s about order %s", n->service,
           n->o->id);
  return duro_attempt_result(
      a, duro_json_pack("{s:s, s:s}", "service", n->service, "requestId", key));
}

/* ---- the rollbacks -------------------------------------------------------
 *
 * What undoes a completed step, handed that step's output: run newest
 * first when the instance fails on an error run() did not handle, or when
 * run() asks (duro_rollback), each a journaled step of its own with its own
 * retries, never run twice once it completed.  Its argument must outlive
 * run() (rollbacks may run after run() returned): these need none, the
 * step's output says what to undo. */

static int refund_charge(duro_attempt *a, const char *charge, void *arg) {
  (void)arg;
  const char *id = duro_json_string(charge, "/chargeId");
  /* Rule 4 again: the rollback's own key ("order-7/charge card#1/rollback")
   * lets the provider refund once. */
  duro_log(DURO_LOG_INFO, "refunding %s (key %s)", id ? id : "?",
           duro_attempt_idempotency_key(a));
  return duro_attempt_result(
      a, duro_json_pack("{s:s, s:b}", "chargeId", id, "refunded", 1));
}

static int release_stock(duro_attempt *a, const char *reservation, void *arg) {
  (void)arg;
  const char *id = duro_json_string(reservation, "/reservationId");
  duro_log(DURO_LOG_INFO, "releasing %s", id ? id : "?");
  return duro_attempt_result(
      a, duro_json_pack("{s:s, s:b}", "reservationId", id, "released", 1));
}

static const duro_rollback_cfg release = {.fn = release_stock};
static const duro_retries refund_retries = {
    .limit = 5, .delay = "30 seconds", .backoff = DURO_BACKOFF_LINEAR};
static const duro_rollback_cfg refund = {.fn = refund_charge,
                                         .retries = &refund_retries};

/* ---- the workflow -------------------------------------------------------- */

/* Rule 7: no mutable globals.  A step config is constant data, so it can
 * be a static const: 3 retries (4 attempts at most), 10 s doubling each
 * time, and 2 minutes per attempt. */
static const duro_retries charge_retries = {
    .limit = 3, .delay = "10 seconds", .backoff = DURO_BACKOFF_EXPONENTIAL};
static const duro_step_config charge_config = {.retries = &charge_retries,
                                               .timeout = "2 minutes"};

/* Sets the output.  `charge` is the charge step's result, NULL when the
 * order was not approved; 'j' puts that JSON text in as it is.  `reason`
 * may be the reviewer's free text: 's' escapes it.  Rule 6: duro_set_output
 * copies the text. */
static duro_rc finish(duro_step *step, const order *o, const char *charge,
                      const char *reason) {
  const char *out =
      charge ? duro_json_pack("{s:s, s:j, s:b}", "orderId", o->id, "charge",
                              charge, "approved", 1)
             : duro_json_pack("{s:b, s:s}", "approved", 0, "reason", reason);
  return duro_set_output(step, out ? out : "null");
}

static duro_rc run_order(duro_step *step, order *o) {
  /* Rule 5: every step call returns DURO_OK, DURO_SUSPEND or DURO_ERROR.
   * DURO_TRY returns from run() on anything but DURO_OK: a suspension
   * yields the activation, an error fails the instance with the step's
   * error.  Rule 2: the step names are string constants, so each
   * activation asks for the same keys in the same order. */

  /* NULL config: the defaults (5 retries, 10 s exponential, 10 min). */
  const char *reservation; /* borrowed until the activation ends (Rule 6) */
  DURO_TRY(duro_do_with_rollback(step, "reserve stock", NULL, reserve_stock, o,
                                 &release, &reservation));
  (void)reservation;

  const char *charge;
  DURO_TRY(duro_do_with_rollback(step, "charge card", &charge_config,
                                 charge_card, o, &refund, &charge));

  /* Waiting costs a database row: the activation returns here
   * (DURO_SUSPEND), and the event, or the timeout, starts a new one that
   * replays the two steps above from the journal and gets past this line.
   * Handling a failure is an `if` on the code instead of DURO_TRY: the
   * timeout is caught, anything else still fails the instance. */
  const char *review; /* {"type","payload","timestamp"} */
  duro_rc rc =
      duro_wait_for_event(step, "manual review", "approval", "2 days", &review);
  if (rc == DURO_SUSPEND)
    return rc;
  if (rc == DURO_ERROR) {
    if (!duro_error_is(step, DURO_ERR_TIMEOUT))
      return rc; /* unhandled: the rollbacks run, then it errors */
    /* refund the charge, then release the stock */
    DURO_TRY(duro_rollback(step));
    return finish(step, o, NULL, "review timed out");
  }

  /* Rule 3: the event is a step result, journaled like any other, so
   * branching on it is deterministic: a replay sees the same payload.
   * (Asking the reviewer service here, outside a step, would not be.)
   * When the order is not approved (here or on the timeout above), the
   * charge is refunded and the stock released: duro_rollback runs the
   * rollbacks of the steps above, newest first. */
  int approved = 1;
  duro_json_boolean(review, "/payload/approved", &approved);
  if (!approved) {
    const char *why = duro_json_string(review, "/payload/reason");
    char reason[256];
    snprintf(reason, sizeof reason, "rejected%s%s", why ? ": " : "",
             why ? why : "");
    DURO_TRY(duro_rollback(step));
    return finish(step, o, NULL, reason);
  }

  /* A durable sleep: no thread waits, the instance is a row with a wake
   * time.  The duration comes from params, so it is the same on every
   * activation. */
  DURO_TRY(duro_sleep(step, "grace period", o->grace));

  /* Three services told at once: duro_do_all runs each branch as a step
   * of its own ("notify#1" to "notify#3", each journaled and retried by
   * itself, its callback on a thread of its own) and returns once all
   * three completed; a replay runs only those that had not.  The
   * notices live on run()'s stack, which the call outlives. */
  notice mail = {o, "mail"}, warehouse = {o, "warehouse"}, crm = {o, "crm"};
  duro_branch notify[] = {{.fn = send_mail, .arg = &mail},
                          {.fn = tell, .arg = &warehouse},
                          {.fn = tell, .arg = &crm}};
  DURO_TRY(duro_do_all(step, "notify", notify, 3, 0, 0));

  return finish(step, o, charge, NULL);
}

/* The entrypoint.  Nothing here needs freeing: the strings parse_order()
 * read are the host's, so DURO_TRY may return early anywhere. */
static duro_rc order_flow(duro_step *step, const duro_event *ev,
                          duro_env *env) {
  (void)env; /* this flow starts no other workflows */
  order o;
  parse_order(ev->params, &o);
  return run_order(step, &o);
}

static const duro_workflow_def workflows[] = {
    {.class_name = "OrderFlow", .run = order_flow},
};

/* The one exported symbol.  The host checks the descriptor this writes
 * (magic, size, ABI, layout fingerprint) before it calls anything else. */
DURO_PLUGIN(.name = "orders", .version = "1.0", DURO_WORKFLOWS(workflows));
