/* sidelog.h — the side-effect log of the test plugins (chain, faults): what
 * their step callbacks did, written outside the journal to the file named
 * by an environment variable, so a test can tell a completed step that
 * ran again.  Header-only (static inline), so each plugin stays one .so
 * built from its own .c.  The records:
 *
 *   exec <instance> <i> <token>   step i's callback ran (token is unique)
 *   seen <instance> <i> <token>   run() got step i's result from duro_do
 *
 * Each record is SIDELOG_RECORD bytes, padded with spaces and ending in a
 * newline, written with one O_APPEND write: at offsets that are multiples
 * of 64 a record never straddles a page, so a SIGKILL or a crash can cut
 * the log only between records, never leave half of one.  The tests
 * (test_crash.c, test_faults.c) read the file in SIDELOG_RECORD-byte
 * steps: the format must not change. */
#ifndef DURO_PLUGINS_SIDELOG_H
#define DURO_PLUGINS_SIDELOG_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "duro.h"

#define SIDELOG_RECORD 64

/* Appends "KIND INSTANCE INDEX TOKEN" to the file at `path`; does nothing
 * when the record would not fit. */
static inline void sidelog_append_to(const char *path, const char *kind,
                                     const char *instance, int index,
                                     const char *token) {
  char line[SIDELOG_RECORD + 1];
  int n =
      snprintf(line, sizeof line, "%s %s %d %s", kind, instance, index, token);
  if (n < 0 || n >= SIDELOG_RECORD)
    return;
  memset(line + n, ' ', (size_t)(SIDELOG_RECORD - 1 - n));
  line[SIDELOG_RECORD - 1] = '\n';
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd < 0)
    return;
  if (write(fd, line, SIDELOG_RECORD) != SIDELOG_RECORD)
    duro_log(DURO_LOG_ERROR, "short write to %s", path);
  close(fd);
}

/* sidelog_append_to the file named by $`env`; nothing when it is unset. */
static inline void sidelog_append(const char *env, const char *kind,
                                  const char *instance, int index,
                                  const char *token) {
  const char *path = getenv(env);
  if (path)
    sidelog_append_to(path, kind, instance, index, token);
}

/* A token unique to this run of a callback: pid and wall time in ns.  The
 * pid comes first, so a test can tell which engine process ran it. */
static inline void sidelog_token(char *buf, size_t len) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  snprintf(buf, len, "%d-%lld%09ld", (int)getpid(), (long long)ts.tv_sec,
           ts.tv_nsec);
}

/* The "seen" record of step `index`, whose result duro_do gave back as
 * `result`: the token as a JSON string.  Call it only after duro_do
 * returned DURO_OK, which the host allows only once the result is
 * committed: an "exec" after a "seen" of the same step is then a
 * completed step that ran again. */
static inline void sidelog_seen(const char *env, const char *instance,
                                int index, const char *result) {
  char token[64];
  /* the token without the quotes of the JSON string */
  snprintf(token, sizeof token, "%.*s", (int)strlen(result) - 2, result + 1);
  sidelog_append(env, "seen", instance, index, token);
}

#endif
