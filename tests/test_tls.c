/* test_tls.c — http.tls and http.keys on a real `duro run` of the
 * order-flow example.
 *
 * Each case makes its own throwaway CA with the openssl command line in
 * its directory, a server certificate for 127.0.0.1 and localhost from it
 * and, where it needs them, a client certificate and a second, unrelated
 * CA; then talks to the host over HTTPS with libcurl, a new connection a
 * request.
 *
 *  - TLS: a request with the CA is served; plain HTTP to the port and a
 *    client trusting another CA are not; with client_ca, a client without
 *    a certificate, or with one of another CA, is refused at the handshake
 *    and one with the CA's is served; SIGHUP with a new certificate pair
 *    serves the new one to new connections (the certificate's SHA-256
 *    fingerprint compared), and a broken one leaves the old one served;
 *    `duro check` and `duro run` name a missing key file and a key that
 *    is not the certificate's with where the config gives them; the CLI
 *    over https with --cacert, and refused without it.
 *  - keys: for each scope, a route it is allowed and one of another class
 *    it is refused 403 naming the scope; a key limited to one workflow
 *    (queue) refused another and the metrics (GET /queues lists the
 *    key's queues alone); a key limited to one workflow of two and one
 *    queue of two shown only those in every listing (plugins, crons,
 *    queues, health), its own bulk jobs and refused the other's naming
 *    its workflow, every data route of the dashboard's pages answered
 *    200, and GET /key saying what it may do; no token or a
 *    wrong one 401; the audit line naming the key of each control
 *    request, allowed or refused; a key whose token variable is unset
 *    refuses the start, naming the variable.
 *
 * Nothing here sleeps for a fixed time: the SIGHUP cases wait for the
 * host's line saying what it did with the files. */
#include <check.h>
#include <curl/curl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_run.h"
#include "http_client.h"
#include "proc.h"

#ifndef ORDERS_PLUGIN
#error "build with -DORDERS_PLUGIN=\"<path of liborders.so>\""
#endif

#define WAIT_MS 20000

/* ---- certificates, made with the openssl command line ---------------- */

/* Runs `cmd` (a shell command line) in the case's directory. */
static void sh(const char *cmd) {
  char line[2048];
  snprintf(line, sizeof line, "cd '%s' && (%s) >/dev/null 2>&1", proc_tmp_dir,
           cmd);
  ck_assert_msg(system(line) == 0, "failed: %s", cmd);
}

/* NAME.pem and NAME.key: a self-signed CA. */
static void make_ca(const char *name) {
  char cmd[512];
  snprintf(cmd, sizeof cmd,
           "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 "
           "-nodes -keyout %s.key -out %s.pem -days 2 -subj /CN=%s",
           name, name, name);
  sh(cmd);
}

/* NAME.pem and NAME.key: a certificate of CA `ca`, for 127.0.0.1 and
 * localhost. */
static void make_cert(const char *name, const char *ca) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > %s.ext && "
           "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
           "-keyout %s.key -out %s.csr -subj /CN=%s && "
           "openssl x509 -req -in %s.csr -CA %s.pem -CAkey %s.key "
           "-CAcreateserial -out %s.pem -days 2 -extfile %s.ext",
           name, name, name, name, name, ca, ca, name, name);
  sh(cmd);
}

/* The case's file NAME, as a path. */
static const char *file(const char *name) {
  static char paths[8][400];
  static int next;
  char *p = paths[next++ % 8];
  snprintf(p, sizeof paths[0], "%s/%s", proc_tmp_dir, name);
  return p;
}

/* The SHA-256 fingerprint of the first certificate of PEM text, in hex. */
static void fingerprint(const char *pem, char out[65]) {
  BIO *b = BIO_new_mem_buf(pem, -1);
  X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
  BIO_free(b);
  ck_assert_msg(x != NULL, "not a PEM certificate:\n%s", pem);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  ck_assert(X509_digest(x, EVP_sha256(), md, &n) == 1);
  X509_free(x);
  for (unsigned i = 0; i < n; i++)
    snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static void file_fingerprint(const char *name, char out[65]) {
  char *pem = proc_slurp(file(name));
  fingerprint(pem, out);
  free(pem);
}

/* ---- requests over HTTPS ----------------------------------------------- */

typedef struct treq {
  const char *method; /* NULL: GET */
  const char *path;
  const char *body;
  const char *token;           /* NULL: no Authorization */
  const char *ca, *cert, *key; /* the case's file names, or NULL */
  int plain;                   /* http:// instead of https:// */
} treq;

typedef struct tresp {
  CURLcode rc;
  long status;
  char *body;
  size_t len;
  json_t *json;
  char fp[65]; /* the server certificate's fingerprint ("" unknown) */
} tresp;

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
  tresp *r = ud;
  size_t len = size * n;
  r->body = realloc(r->body, r->len + len + 1);
  ck_assert(r->body != NULL);
  memcpy(r->body + r->len, p, len);
  r->len += len;
  r->body[r->len] = '\0';
  return len;
}

static void tresp_free(tresp *r) {
  free(r->body);
  json_decref(r->json);
  memset(r, 0, sizeof *r);
}

/* One request on a connection of its own to 127.0.0.1:port. */
static void tsend(int port, const treq *q, tresp *r) {
  memset(r, 0, sizeof *r);
  CURL *c = curl_easy_init();
  ck_assert(c != NULL);
  char url[512], auth[300];
  snprintf(url, sizeof url, "%s://127.0.0.1:%d%s", q->plain ? "http" : "https",
           port, q->path);
  struct curl_slist *h = curl_slist_append(NULL, "Content-Type: "
                                                 "application/json");
  if (q->token) {
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", q->token);
    h = curl_slist_append(h, auth);
  }
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 15000L);
  curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
  curl_easy_setopt(c, CURLOPT_CERTINFO, 1L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
  if (q->ca)
    curl_easy_setopt(c, CURLOPT_CAINFO, file(q->ca));
  if (q->cert)
    curl_easy_setopt(c, CURLOPT_SSLCERT, file(q->cert));
  if (q->key)
    curl_easy_setopt(c, CURLOPT_SSLKEY, file(q->key));
  if (q->body) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, q->body);
  }
  if (q->method)
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, q->method);
  r->rc = curl_easy_perform(c);
  if (r->rc == CURLE_OK) {
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    struct curl_certinfo *ci = NULL;
    if (curl_easy_getinfo(c, CURLINFO_CERTINFO, &ci) == CURLE_OK && ci &&
        ci->num_of_certs > 0)
      for (struct curl_slist *s = ci->certinfo[0]; s; s = s->next)
        if (!strncmp(s->data, "Cert:", 5))
          fingerprint(s->data + 5, r->fp);
    if (r->body)
      r->json = json_loads(r->body, 0, NULL);
  }
  curl_slist_free_all(h);
  curl_easy_cleanup(c);
}

/* GET path with the CA and token: its status (0 when no answer came). */
static long tget(int port, const char *path, const char *token) {
  tresp r;
  tsend(port, &(treq){.path = path, .token = token, .ca = "ca.pem"}, &r);
  long status = r.rc == CURLE_OK ? r.status : 0;
  tresp_free(&r);
  return status;
}

/* ---- the host ---------------------------------------------------------- */

/* The order flow on 127.0.0.1:0 with `http_extra` (lines of the http
 * mapping) after `listen`, `workflows` (entries) after order-flow's and
 * `plugin` (lines of the plugin's mapping) after its queues. */
static void write_config_with(host_run *h, const char *http_extra,
                              const char *workflows, const char *plugin) {
  FILE *f = fopen(h->config, "w");
  ck_assert(f != NULL);
  fprintf(f,
          "storage: { path: var/duro.db, synchronous: normal }\n"
          "http:\n"
          "  listen: 127.0.0.1:0\n"
          "%s"
          "engine: { workers: 2 }\n"
          "plugins:\n"
          "  - name: orders\n"
          "    path: %s\n"
          "    workflows:\n"
          "      - name: order-flow\n"
          "        binding: ORDER_FLOW\n"
          "        class_name: OrderFlow\n"
          "%s"
          "    queues:\n"
          "      consumers:\n"
          "        - {queue: orders, workflow: order-flow, id_from: /orderId}\n"
          "        - {queue: jobs, workflow: order-flow, id_from: /orderId}\n"
          "%s",
          http_extra, ORDERS_PLUGIN, workflows, plugin);
  ck_assert(fclose(f) == 0);
}

static void write_config(host_run *h, const char *http_extra) {
  write_config_with(h, http_extra, "", "");
}

#define TLS_FILES                                                              \
  "  tls:\n"                                                                   \
  "    cert: server.pem\n"                                                     \
  "    key: server.key\n"

/* A host serving server.pem of a fresh CA ca.pem, with `http_extra`
 * after the tls mapping. */
static void tls_host(host_run *h, const char *http_extra) {
  make_ca("ca");
  make_cert("server", "ca");
  host_init(h, "tls");
  char http[2048];
  snprintf(http, sizeof http, TLS_FILES "%s", http_extra ? http_extra : "");
  write_config(h, http);
  host_start(h);
}

/* ---- TLS ----------------------------------------------------------------- */

START_TEST(https_with_the_ca) {
  host_run h;
  tls_host(&h, NULL);
  tresp r;
  tsend(h.port, &(treq){.path = "/healthz", .ca = "ca.pem"}, &r);
  ck_assert_msg(r.rc == CURLE_OK, "%s", curl_easy_strerror(r.rc));
  ck_assert_int_eq(r.status, 200);
  char want[65];
  file_fingerprint("server.pem", want);
  ck_assert_str_eq(r.fp, want);
  tresp_free(&r);
  /* the dashboard is on the same listener */
  tsend(h.port, &(treq){.path = "/", .ca = "ca.pem"}, &r);
  ck_assert_int_eq(r.rc, CURLE_OK);
  ck_assert_int_eq(r.status, 200);
  tresp_free(&r);
  host_stop(&h, proc_now_ms() + WAIT_MS, 0);
}
END_TEST

START_TEST(plain_http_and_another_ca_refused) {
  host_run h;
  tls_host(&h, NULL);
  make_ca("other");
  tresp r;
  tsend(h.port, &(treq){.path = "/healthz", .plain = 1}, &r);
  ck_assert_msg(r.rc != CURLE_OK || r.status == 0, "plain HTTP answered %ld",
                r.status);
  tresp_free(&r);
  tsend(h.port, &(treq){.path = "/healthz", .ca = "other.pem"}, &r);
  ck_assert_msg(r.rc == CURLE_PEER_FAILED_VERIFICATION, "got %s",
                curl_easy_strerror(r.rc));
  tresp_free(&r);
  /* still serving */
  ck_assert_int_eq(tget(h.port, "/healthz", NULL), 200);
  host_stop(&h, proc_now_ms() + WAIT_MS, 0);
}
END_TEST

START_TEST(client_ca_required) {
  make_ca("ca");
  make_cert("server", "ca");
  make_cert("client", "ca");
  make_ca("other");
  make_cert("stranger", "other");
  host_run h;
  host_init(&h, "tls");
  write_config(&h, TLS_FILES "    client_ca: ca.pem\n");
  host_start(&h);
  tresp r;
  tsend(h.port, &(treq){.path = "/healthz", .ca = "ca.pem"}, &r);
  ck_assert_msg(r.rc != CURLE_OK, "served without a client certificate: %ld",
                r.status);
  tresp_free(&r);
  tsend(h.port,
        &(treq){.path = "/healthz",
                .ca = "ca.pem",
                .cert = "stranger.pem",
                .key = "stranger.key"},
        &r);
  ck_assert_msg(r.rc != CURLE_OK, "served another CA's client: %ld", r.status);
  tresp_free(&r);
  tsend(h.port,
        &(treq){.path = "/healthz",
                .ca = "ca.pem",
                .cert = "client.pem",
                .key = "client.key"},
        &r);
  ck_assert_msg(r.rc == CURLE_OK, "%s", curl_easy_strerror(r.rc));
  ck_assert_int_eq(r.status, 200);
  tresp_free(&r);
  host_stop(&h, proc_now_ms() + WAIT_MS, 0);
}
END_TEST

/* The fingerprint a new connection sees. */
static void served_fingerprint(int port, char out[65]) {
  tresp r;
  tsend(port, &(treq){.path = "/healthz", .ca = "ca.pem"}, &r);
  ck_assert_msg(r.rc == CURLE_OK, "%s", curl_easy_strerror(r.rc));
  memcpy(out, r.fp, 65);
  tresp_free(&r);
}

START_TEST(sighup_serves_the_new_certificate) {
  host_run h;
  tls_host(&h, NULL);
  char old_fp[65], new_fp[65], seen[65];
  file_fingerprint("server.pem", old_fp);
  served_fingerprint(h.port, seen);
  ck_assert_str_eq(seen, old_fp);

  make_cert("next", "ca");
  sh("cp next.pem server.pem && cp next.key server.key");
  file_fingerprint("server.pem", new_fp);
  ck_assert_str_ne(new_fp, old_fp);
  ck_assert_int_eq(kill(h.pid, SIGHUP), 0);
  host_wait_lines(&h, "http.tls: certificate", 1, proc_now_ms() + WAIT_MS);
  served_fingerprint(h.port, seen);
  ck_assert_str_eq(seen, new_fp);

  /* a broken pair keeps the one served */
  sh("echo 'not a certificate' > server.pem");
  ck_assert_int_eq(kill(h.pid, SIGHUP), 0);
  host_wait_lines(&h, "keeping the certificate served", 1,
                  proc_now_ms() + WAIT_MS);
  served_fingerprint(h.port, seen);
  ck_assert_str_eq(seen, new_fp);
  /* and a key that is not the certificate's too */
  sh("cp next.pem server.pem && cp ca.key server.key");
  ck_assert_int_eq(kill(h.pid, SIGHUP), 0);
  host_wait_lines(&h, "not the key of the certificate", 1,
                  proc_now_ms() + WAIT_MS);
  served_fingerprint(h.port, seen);
  ck_assert_str_eq(seen, new_fp);
  host_stop(&h, proc_now_ms() + WAIT_MS, 0);
}
END_TEST

/* `duro check` of the config of h: its exit code, its output in *out. */
static int check_config(host_run *h, char **out) {
  pid_t pid = host_spawn(h, "check");
  int code = proc_wait_exit(pid, proc_now_ms() + WAIT_MS);
  *out = proc_slurp(h->log);
  return code;
}

START_TEST(check_names_bad_files) {
  make_ca("ca");
  make_cert("server", "ca");
  host_run h;
  host_init(&h, "tls");
  char *out;
  write_config(&h, "  tls:\n    cert: server.pem\n    key: missing.key\n");
  ck_assert_int_eq(check_config(&h, &out), 1);
  assert_contains(out, "tls.yaml:6:10: http.tls.key: ");
  assert_contains(out, "missing.key: No such file or directory");
  free(out);
  write_config(&h, "  tls:\n    cert: server.pem\n    key: ca.key\n");
  ck_assert_int_eq(check_config(&h, &out), 1);
  assert_contains(out, "tls.yaml:6:10: http.tls.key: ");
  assert_contains(out, "ca.key: not the key of the certificate");
  free(out);
  write_config(&h, "  tls:\n    cert: server.key\n    key: server.key\n");
  ck_assert_int_eq(check_config(&h, &out), 1);
  assert_contains(out, "tls.yaml:5:11: http.tls.cert: ");
  free(out);
  /* `duro run` refuses to start the same way */
  write_config(&h, "  tls:\n    cert: server.pem\n    key: missing.key\n");
  pid_t pid = host_spawn(&h, "run");
  proc_live = pid;
  int code = proc_wait_exit(pid, proc_now_ms() + WAIT_MS);
  out = proc_slurp(h.log);
  ck_assert_msg(code > 0, "exit %d:\n%s", code, proc_tail(out));
  assert_contains(out, "tls.yaml:6:10: http.tls.key: ");
  ck_assert_ptr_null(strstr(out, "engine started"));
  free(out);
  write_config(&h, TLS_FILES);
  ck_assert_int_eq(check_config(&h, &out), 0);
  free(out);
}
END_TEST

/* `duro plugins list --url https://... ARGS` with DURO_TOKEN unset: its
 * exit code, its output in *out. */
static int cli(const host_run *h, const char *extra, char **out) {
  const char *argv[] = {DURO_BIN,
                        "plugins",
                        "list",
                        "--url",
                        NULL,
                        extra,
                        extra ? file("ca.pem") : NULL,
                        NULL};
  char url[64], path[460];
  snprintf(url, sizeof url, "https://127.0.0.1:%d", h->port);
  argv[4] = url;
  snprintf(path, sizeof path, "%s/cli.out", proc_tmp_dir);
  pid_t pid = proc_spawn(argv, NULL, path, path);
  int code = proc_wait_exit(pid, proc_now_ms() + WAIT_MS);
  *out = proc_slurp(path);
  return code;
}

START_TEST(cli_over_https) {
  host_run h;
  tls_host(&h, NULL);
  char *out;
  ck_assert_int_eq(cli(&h, "--cacert", &out), 0);
  assert_contains(out, "orders");
  free(out);
  ck_assert_int_eq(cli(&h, NULL, &out), 1);
  assert_contains(out, "SSL certificate problem");
  free(out);
  host_stop(&h, proc_now_ms() + WAIT_MS, 0);
}
END_TEST

/* ---- keys ---------------------------------------------------------------- */

#define KEYS                                                                   \
  "  token_env: TLS_TEST_ADMIN\n"                                              \
  "  keys:\n"                                                                  \
  "    - {name: reader, token_env: TLS_TEST_READER, scopes: [read]}\n"         \
  "    - {name: feeder, token_env: TLS_TEST_FEEDER, scopes: [events]}\n"       \
  "    - name: operator\n"                                                     \
  "      token_env: TLS_TEST_OPERATOR\n"                                       \
  "      scopes: [read, operate]\n"                                            \
  "      workflows: [order-flow]\n"                                            \
  "    - name: queues\n"                                                       \
  "      token_env: TLS_TEST_QUEUES\n"                                         \
  "      scopes: [read]\n"                                                     \
  "      queues: [orders]\n"

static void set_tokens(void) {
  setenv("TLS_TEST_ADMIN", "admin-token", 1);
  setenv("TLS_TEST_READER", "reader-token", 1);
  setenv("TLS_TEST_FEEDER", "feeder-token", 1);
  setenv("TLS_TEST_OPERATOR", "operator-token", 1);
  setenv("TLS_TEST_QUEUES", "queues-token", 1);
}

/* The request with `token`: its status, and, for a 403, the error's
 * code and `field` must be `code` and `value`. */
static long ask(int port, const char *method, const char *path,
                const char *body, const char *token) {
  tresp r;
  tsend(port,
        &(treq){.method = method,
                .path = path,
                .body = body,
                .token = token,
                .ca = "ca.pem"},
        &r);
  ck_assert_msg(r.rc == CURLE_OK, "%s %s: %s", method, path,
                curl_easy_strerror(r.rc));
  long status = r.status;
  tresp_free(&r);
  return status;
}

static void refused(int port, const char *method, const char *path,
                    const char *body, const char *token, const char *code,
                    const char *field, const char *value) {
  tresp r;
  tsend(port,
        &(treq){.method = method,
                .path = path,
                .body = body,
                .token = token,
                .ca = "ca.pem"},
        &r);
  ck_assert_msg(r.rc == CURLE_OK, "%s", curl_easy_strerror(r.rc));
  ck_assert_msg(r.status == 403, "%s %s with %s: %ld %s", method, path, token,
                r.status, r.body ? r.body : "");
  json_t *e = json_object_get(r.json, "error");
  ck_assert_msg(e != NULL, "no error in %s", r.body);
  ck_assert_str_eq(json_string_value(json_object_get(e, "code")), code);
  const char *got = json_string_value(json_object_get(e, field));
  ck_assert_msg(got && !strcmp(got, value), "%s: want %s \"%s\" in %s", path,
                field, value, r.body);
  tresp_free(&r);
}

/* Allowed: anything the route itself answers, neither 401 nor 403. */
static void allowed(int port, const char *method, const char *path,
                    const char *body, const char *token) {
  long s = ask(port, method, path, body, token);
  ck_assert_msg(s != 401 && s != 403, "%s %s with %s: %ld", method, path, token,
                s);
}

static const char CREATE[] = "{\"id\":\"o-1\",\"params\":{\"orderId\":\"1\","
                             "\"email\":\"a@b.c\",\"amount\":10}}";

START_TEST(each_scope_allowed_and_refused) {
  set_tokens();
  host_run h;
  tls_host(&h, KEYS);
  int p = h.port;
  /* read: every GET, nothing else */
  ck_assert_int_eq(ask(p, NULL, "/workflows/order-flow", NULL, "reader-token"),
                   200);
  refused(p, "POST", "/workflows/order-flow/instances", CREATE, "reader-token",
          "request.forbidden_scope", "scope", "operate");
  refused(p, "POST", "/workflows/order-flow/instances/o-1/events/approval",
          "{}", "reader-token", "request.forbidden_scope", "scope", "events");
  /* operate: creates, status changes; on its workflow only */
  ck_assert_int_eq(ask(p, "POST", "/workflows/order-flow/instances", CREATE,
                       "operator-token"),
                   201);
  allowed(p, "PATCH", "/workflows/order-flow/instances/o-1/status",
          "{\"status\":\"pause\"}", "operator-token");
  /* a wait parked on a TLS connection is answered (paused: at its end) */
  ck_assert_int_eq(ask(p, NULL,
                       "/workflows/order-flow/instances/o-1?wait=200ms", NULL,
                       "reader-token"),
                   200);
  refused(p, "POST", "/plugins/reload", NULL, "operator-token",
          "request.forbidden_scope", "scope", "admin");
  refused(p, "POST", "/workflows/other-flow/instances", CREATE,
          "operator-token", "request.forbidden_workflow", "workflow",
          "other-flow");
  refused(p, NULL, "/workflows/other-flow", NULL, "operator-token",
          "request.forbidden_workflow", "workflow", "other-flow");
  refused(p, NULL, "/metrics", NULL, "operator-token",
          "request.forbidden_listing", "scope", "read");
  /* events: an event, a queue's message; no reads */
  allowed(p, "POST", "/workflows/order-flow/instances/o-1/events/approval",
          "{\"approved\":true}", "feeder-token");
  ck_assert_int_eq(ask(p, "POST", "/queues/orders/messages",
                       "{\"body\":{\"orderId\":\"q-1\",\"email\":"
                       "\"a@b.c\",\"amount\":5}}",
                       "feeder-token"),
                   201);
  refused(p, NULL, "/healthz", NULL, "feeder-token", "request.forbidden_scope",
          "scope", "read");
  refused(p, "PATCH", "/workflows/order-flow/instances/o-1/status",
          "{\"status\":\"resume\"}", "feeder-token", "request.forbidden_scope",
          "scope", "operate");
  /* a key limited to a queue */
  allowed(p, NULL, "/queues/orders", NULL, "queues-token");
  refused(p, NULL, "/queues/jobs", NULL, "queues-token",
          "request.forbidden_queue", "queue", "jobs");
  tresp r;
  tsend(p, &(treq){.path = "/queues", .token = "queues-token", .ca = "ca.pem"},
        &r);
  ck_assert_int_eq(r.status, 200);
  ck_assert_msg(json_array_size(r.json) == 1 &&
                    !strcmp(json_string_value(json_object_get(
                                json_array_get(r.json, 0), "name")),
                            "orders"),
                "GET /queues for a key of [orders]: %s", r.body);
  tresp_free(&r);
  tsend(p, &(treq){.path = "/queues", .token = "reader-token", .ca = "ca.pem"},
        &r);
  ck_assert_msg(json_array_size(r.json) == 2, "%s", r.body);
  tresp_free(&r);
  /* admin (token_env's key "default"): everything */
  ck_assert_int_eq(ask(p, "POST", "/plugins/reload", NULL, "admin-token"), 200);
  allowed(p, NULL, "/plugins", NULL, "admin-token");
  /* no key, a wrong one */
  ck_assert_int_eq(ask(p, NULL, "/healthz", NULL, NULL), 401);
  ck_assert_int_eq(ask(p, NULL, "/healthz", NULL, "reader-tokem"), 401);

  /* the audit lines: control requests, allowed or refused, by key */
  host_wait_lines(&h,
                  "audit: key operator: POST /workflows/order-flow/instances "
                  "-> 201",
                  1, proc_now_ms() + WAIT_MS);
  host_wait_lines(&h,
                  "audit: key reader: POST /workflows/order-flow/instances "
                  "-> 403",
                  1, proc_now_ms() + WAIT_MS);
  host_wait_lines(&h, "audit: key default: POST /plugins/reload -> 200", 1,
                  proc_now_ms() + WAIT_MS);
  ck_assert_int_eq(host_count_lines(&h, "audit: key reader: GET"), 0);
  host_stop(&h, proc_now_ms() + WAIT_MS, 0);
}
END_TEST

/* ---- a key limited to some workflows and queues ------------------------- */

#define LIMITED_KEYS                                                           \
  "  token_env: TLS_TEST_ADMIN\n"                                              \
  "  keys:\n"                                                                  \
  "    - name: viewer\n"                                                       \
  "      token_env: TLS_TEST_VIEWER\n"                                         \
  "      scopes: [read]\n"                                                     \
  "      workflows: [order-flow]\n"                                            \
  "      queues: [orders]\n"                                                   \
  "    - name: operator\n"                                                     \
  "      token_env: TLS_TEST_OPERATOR\n"                                       \
  "      scopes: [read, operate]\n"                                            \
  "      workflows: [order-flow]\n"                                            \
  "      queues: [orders]\n"

/* A second workflow of the same class, and a no-code cron each. */
#define OTHER_FLOW                                                             \
  "      - {name: other-flow, binding: OTHER_FLOW, class_name: OrderFlow}\n"
#define TWO_CRONS                                                              \
  "    triggers:\n"                                                            \
  "      crons:\n"                                                             \
  "        - {schedule: \"0 3 * * *\", workflow: order-flow, id: "             \
  "\"a-{date}\"}\n"                                                            \
  "        - {schedule: \"0 4 * * *\", workflow: other-flow, id: "             \
  "\"b-{date}\"}\n"

/* GET path with `token`, which must answer 200: its JSON (caller owns). */
static json_t *get_json(int port, const char *path, const char *token) {
  tresp r;
  tsend(port, &(treq){.path = path, .token = token, .ca = "ca.pem"}, &r);
  ck_assert_msg(r.status == 200 && r.json, "GET %s with %s: %ld %s", path,
                token, r.status, r.body ? r.body : "");
  json_t *j = json_incref(r.json);
  tresp_free(&r);
  return j;
}

/* The strings of array `a`, joined with ',' ("" for none). */
static void joined(const json_t *a, char *out, size_t len) {
  size_t i, at = 0;
  json_t *v;
  out[0] = '\0';
  json_array_foreach(a, i, v) {
    at += (size_t)snprintf(out + at, len - at, "%s%s", i ? "," : "",
                           json_string_value(v) ? json_string_value(v) : "?");
    ck_assert(at < len);
  }
}

/* The members `field` of the objects of array `a`, joined with ','. */
static void joined_field(const json_t *a, const char *field, char *out,
                         size_t len) {
  json_t *names = json_array();
  size_t i;
  json_t *v;
  json_array_foreach(a, i, v)
      json_array_append(names, json_object_get(v, field));
  joined(names, out, len);
  json_decref(names);
}

/* POST /workflows/{wf}/bulk pausing every instance, with `token`: the
 * job's id (a copy). */
static char *bulk_job(int port, const char *wf, const char *token) {
  char path[128];
  snprintf(path, sizeof path, "/workflows/%s/bulk", wf);
  tresp r;
  tsend(port,
        &(treq){.method = "POST",
                .path = path,
                .body = "{\"action\":\"pause\"}",
                .token = token,
                .ca = "ca.pem"},
        &r);
  ck_assert_msg(r.status == 202, "%s: %ld %s", path, r.status, r.body);
  char *id = strdup(json_string_value(json_object_get(r.json, "id")));
  tresp_free(&r);
  return id;
}

START_TEST(a_limited_key_sees_its_part) {
  set_tokens();
  setenv("TLS_TEST_VIEWER", "viewer-token", 1);
  make_ca("ca");
  make_cert("server", "ca");
  host_run h;
  host_init(&h, "tls");
  write_config_with(&h, TLS_FILES LIMITED_KEYS, OTHER_FLOW, TWO_CRONS);
  host_start(&h);
  int p = h.port;
  const char *v = "viewer-token";
  char got[512], path[256];
  ck_assert_int_eq(
      ask(p, "POST", "/workflows/order-flow/instances", CREATE, "admin-token"),
      201);
  ck_assert_int_eq(
      ask(p, "POST", "/workflows/other-flow/instances", CREATE, "admin-token"),
      201);

  /* GET /plugins: what the plugin serves of the key's */
  json_t *j = get_json(p, "/plugins", v);
  json_t *serves = json_object_get(
      json_array_get(json_object_get(j, "plugins"), 0), "serves");
  joined(json_object_get(serves, "workflows"), got, sizeof got);
  ck_assert_str_eq(got, "order-flow");
  joined(json_object_get(serves, "queues"), got, sizeof got);
  ck_assert_str_eq(got, "orders");
  joined(json_object_get(serves, "crons"), got, sizeof got);
  ck_assert_str_eq(got, "0 3 * * *");
  json_decref(j);
  j = get_json(p, "/plugins", "admin-token");
  serves = json_object_get(json_array_get(json_object_get(j, "plugins"), 0),
                           "serves");
  joined(json_object_get(serves, "workflows"), got, sizeof got);
  ck_assert_str_eq(got, "order-flow,other-flow");
  joined(json_object_get(serves, "queues"), got, sizeof got);
  ck_assert_str_eq(got, "orders,jobs");
  json_decref(j);

  /* GET /crons: the trigger of its workflow */
  j = get_json(p, "/crons", v);
  joined_field(j, "workflow", got, sizeof got);
  ck_assert_str_eq(got, "order-flow");
  json_decref(j);
  j = get_json(p, "/crons", "admin-token");
  joined_field(j, "workflow", got, sizeof got);
  ck_assert_str_eq(got, "order-flow,other-flow");
  json_decref(j);

  /* GET /queues: its queue */
  j = get_json(p, "/queues", v);
  joined_field(j, "name", got, sizeof got);
  ck_assert_str_eq(got, "orders");
  json_decref(j);

  /* GET /key: what it is and may do */
  j = get_json(p, "/key", v);
  ck_assert_str_eq(json_string_value(json_object_get(j, "name")), "viewer");
  joined(json_object_get(j, "scopes"), got, sizeof got);
  ck_assert_str_eq(got, "read");
  joined(json_object_get(j, "workflows"), got, sizeof got);
  ck_assert_str_eq(got, "order-flow");
  joined(json_object_get(j, "queues"), got, sizeof got);
  ck_assert_str_eq(got, "orders");
  json_decref(j);
  j = get_json(p, "/key", "admin-token");
  ck_assert(json_is_null(json_object_get(j, "workflows")));
  json_decref(j);

  /* bulk jobs: its workflow's, not the other's, which is named */
  char *mine = bulk_job(p, "order-flow", "operator-token");
  char *other = bulk_job(p, "other-flow", "admin-token");
  snprintf(path, sizeof path, "/bulk/%s", mine);
  json_decref(get_json(p, path, v));
  snprintf(path, sizeof path, "/bulk/%s", other);
  refused(p, NULL, path, NULL, v, "request.forbidden_workflow", "workflow",
          "other-flow");
  snprintf(path, sizeof path, "/bulk/%s/cancel", other);
  refused(p, "POST", path, NULL, "operator-token", "request.forbidden_workflow",
          "workflow", "other-flow");
  ck_assert_int_eq(ask(p, NULL, "/bulk/999999", NULL, v), 404);
  free(mine);
  free(other);

  /* a request naming the other workflow or queue: 403 naming it */
  refused(p, NULL, "/workflows/other-flow", NULL, v,
          "request.forbidden_workflow", "workflow", "other-flow");
  refused(p, NULL, "/workflows/other-flow/instances", NULL, v,
          "request.forbidden_workflow", "workflow", "other-flow");
  refused(p, NULL, "/workflows/other-flow/instances/o-1", NULL, v,
          "request.forbidden_workflow", "workflow", "other-flow");
  refused(p, NULL, "/queues/jobs", NULL, v, "request.forbidden_queue", "queue",
          "jobs");
  /* what cannot be cut to its part */
  refused(p, NULL, "/metrics", NULL, v, "request.forbidden_listing", "scope",
          "read");
  refused(p, "POST", "/__scheduled?cron=0+3+*+*+*", NULL, "operator-token",
          "request.forbidden_listing", "scope", "operate");

  /* the dashboard's pages: every data route they read answers 200 */
  static const char *const dashboard[] = {
      "/healthz",
      "/key",
      "/plugins",
      "/queues",
      "/crons",
      "/pipelines",
      "/hosts",
      "/workflows/order-flow",
      "/workflows/order-flow/instances?limit=20",
      "/workflows/order-flow/instances/o-1",
      "/workflows/order-flow/instances/o-1/logs?limit=1000",
      "/workflows/order-flow/bulk",
      "/queues/orders/messages?limit=20",
  };
  for (size_t i = 0; i < sizeof dashboard / sizeof *dashboard; i++)
    ck_assert_msg(ask(p, NULL, dashboard[i], NULL, v) == 200, "GET %s",
                  dashboard[i]);
  ck_assert_int_eq(tget(p, "/", NULL), 200);
  host_stop(&h, proc_now_ms() + WAIT_MS, 0);
}
END_TEST

START_TEST(unset_token_refuses_start) {
  set_tokens();
  unsetenv("TLS_TEST_FEEDER");
  host_run h;
  host_init(&h, "keys");
  write_config(&h, KEYS);
  pid_t pid = host_spawn(&h, "run");
  proc_live = pid;
  int code = proc_wait_exit(pid, proc_now_ms() + WAIT_MS);
  char *out = proc_slurp(h.log);
  ck_assert_msg(code != 0 && code != -1, "exit %d:\n%s", code, proc_tail(out));
  assert_contains(out, "keys.yaml:7:33: the token_env of key \"feeder\" names "
                       "TLS_TEST_FEEDER, which is not set or empty");
  free(out);
}
END_TEST

static Suite *tls_suite(void) {
  Suite *s = suite_create("tls");
  TCase *tc = tcase_create("tls");
  proc_fixtures(tc, "duro-tls");
  tcase_set_timeout(tc, 90);
  tcase_add_test(tc, https_with_the_ca);
  tcase_add_test(tc, plain_http_and_another_ca_refused);
  tcase_add_test(tc, client_ca_required);
  tcase_add_test(tc, sighup_serves_the_new_certificate);
  tcase_add_test(tc, check_names_bad_files);
  tcase_add_test(tc, cli_over_https);
  suite_add_tcase(s, tc);

  tc = tcase_create("keys");
  proc_fixtures(tc, "duro-tls");
  tcase_set_timeout(tc, 90);
  tcase_add_test(tc, each_scope_allowed_and_refused);
  tcase_add_test(tc, a_limited_key_sees_its_part);
  tcase_add_test(tc, unset_token_refuses_start);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return http_suite_run(tls_suite()); }
