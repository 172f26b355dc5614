/* http_tls.c — HTTPS on the listener (http.tls): the OpenSSL context
 * H2O's accept makes each connection's handshake with
 * (h2o_accept_ctx_t.ssl_ctx), built from the certificate chain and key
 * files and, with client_ca, requiring a client certificate from that CA
 * at the handshake.
 *
 * The files are read at start, where a missing, unreadable or broken
 * file, or a key that is not the certificate's, refuses the start (and
 * `duro check`) naming the file and where the config gives it; and again
 * on SIGHUP (http_reload_tls): new connections then get the new certificate,
 * open ones keep theirs (each SSL holds a reference to its context), and
 * files that do not load leave the old context serving, logged.
 *
 * HTTP/1.1 only, as on plain sockets (http.c): no ALPN h2, whose streams
 * would each buffer a body outside the budget.  The gate (http_gate.c)
 * cannot read an encrypted head: it hands a TLS connection to H2O at
 * accept, and the bounded reads check the token of the decrypted head. */
#include "http_internal.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "util.h"

/* OpenSSL's reason for the last failure (its queue emptied), or errno's
 * when the file could not be opened at all. */
static const char *why(const char *path, char *buf, size_t len) {
  FILE *f = fopen(path, "re");
  if (!f) {
    ERR_clear_error();
    snprintf(buf, len, "%s", strerror(errno));
    return buf;
  }
  fclose(f);
  unsigned long e = ERR_peek_error();
  const char *r = e ? ERR_reason_error_string(e) : NULL;
  snprintf(buf, len, "%s", r ? r : "not a PEM file OpenSSL can read");
  ERR_clear_error();
  return buf;
}

/* A server context for the files of `t`, or NULL with what failed in err
 * ("PATH: reason"); *which gets the index of the failing file (0 cert,
 * 1 key, 2 client_ca) for the caller to place. */
static SSL_CTX *context_new(const tls_files *t, int *which, char *err,
                            size_t errlen) {
  char reason[256];
  SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
  if (!ctx) {
    *which = 0;
    snprintf(err, errlen, "cannot make a TLS context");
    return NULL;
  }
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION);
  ERR_clear_error();
  int cert_ok = SSL_CTX_use_certificate_chain_file(ctx, t->cert) == 1;
  /* OpenSSL checks the key against the certificate as it loads it */
  int key_ok = cert_ok &&
               SSL_CTX_use_PrivateKey_file(ctx, t->key, SSL_FILETYPE_PEM) == 1;
  int mismatch = cert_ok && (key_ok ? SSL_CTX_check_private_key(ctx) != 1
                                    : ERR_GET_REASON(ERR_peek_error()) ==
                                          X509_R_KEY_VALUES_MISMATCH);
  if (!cert_ok) {
    *which = 0;
    snprintf(err, errlen, "%s: %s", t->cert,
             why(t->cert, reason, sizeof reason));
  } else if (mismatch) {
    *which = 1;
    ERR_clear_error();
    snprintf(err, errlen, "%s: not the key of the certificate %s", t->key,
             t->cert);
  } else if (!key_ok) {
    *which = 1;
    snprintf(err, errlen, "%s: %s", t->key, why(t->key, reason, sizeof reason));
  } else if (t->client_ca &&
             SSL_CTX_load_verify_locations(ctx, t->client_ca, NULL) != 1) {
    *which = 2;
    snprintf(err, errlen, "%s: %s", t->client_ca,
             why(t->client_ca, reason, sizeof reason));
  } else {
    if (t->client_ca) {
      /* the CA's names, which the handshake tells the client to pick by */
      SSL_CTX_set_client_CA_list(ctx, SSL_load_client_CA_file(t->client_ca));
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                         NULL);
      /* a resumed session skips the client's certificate: it must be one
       * of this context's */
      static const unsigned char sid[] = "duro";
      SSL_CTX_set_session_id_context(ctx, sid, sizeof sid - 1);
    }
    return ctx;
  }
  SSL_CTX_free(ctx);
  return NULL;
}

int tls_files_of(const config *cfg, tls_files *t) {
  memset(t, 0, sizeof *t);
  if (!cfg->http.tls.cert)
    return 0;
  t->cert = xstrdup(cfg->http.tls.cert);
  t->key = xstrdup(cfg->http.tls.key);
  t->client_ca =
      cfg->http.tls.client_ca ? xstrdup(cfg->http.tls.client_ca) : NULL;
  return 1;
}

void tls_files_clear(tls_files *t) {
  free(t->cert);
  free(t->key);
  free(t->client_ca);
  memset(t, 0, sizeof *t);
}

int tls_context_of(const config *cfg, SSL_CTX **out, char *err, size_t errlen) {
  *out = NULL;
  tls_files t;
  if (!tls_files_of(cfg, &t))
    return 0;
  int which = 0;
  char what[1024];
  *out = context_new(&t, &which, what, sizeof what);
  tls_files_clear(&t);
  if (*out)
    return 0;
  static const char *const keys[] = {"http.tls.cert", "http.tls.key",
                                     "http.tls.client_ca"};
  const config_pos *at[] = {&cfg->http.tls.cert_pos, &cfg->http.tls.key_pos,
                            &cfg->http.tls.client_ca_pos};
  snprintf(err, errlen, "%s:%d:%d: %s: %s", cfg->file, at[which]->line,
           at[which]->column, keys[which], what);
  return -1;
}

void http_reload_tls(http_server *s) {
  if (!s || !s->accept_ctx.ssl_ctx)
    return;
  int which;
  char err[1024];
  SSL_CTX *ctx = context_new(&s->tls, &which, err, sizeof err);
  if (!ctx) {
    log_warn("http.tls: keeping the certificate served: %s", err);
    return;
  }
  SSL_CTX_free(s->accept_ctx.ssl_ctx); /* open connections hold theirs */
  s->accept_ctx.ssl_ctx = ctx;
  log_info("http.tls: certificate %s loaded again", s->tls.cert);
}
