/* lock.h — one host per database: an exclusive lock beside the journal.
 *
 * `duro run` takes flock(LOCK_EX) on "<storage.path>.lock" and writes its
 * pid there; the lock is held by the supervisor and handed to each engine
 * process it starts, so it lasts as long as either lives.  A second host on
 * the same storage waits a few seconds (a host that is just stopping lets
 * go), then refuses, naming the holder's pid.  The lock is advisory and
 * separate from SQLite's own locks, which it never touches.  `duro migrate`
 * holds the same lock on its source while it copies it.  In store/ with
 * the journal it guards, so that the server and the client's migrate
 * both take it from there. */
#ifndef DURO_LOCK_H
#define DURO_LOCK_H

#include <stddef.h>

/* Creates the directories above db_path, takes the lock within wait_ms,
 * and returns its descriptor (close-on-exec) in *fd_out.  On refusal or
 * error returns -1 with a message naming the path (and the holder's pid)
 * in err. */
int storage_lock(const char *db_path, int wait_ms, int *fd_out, char *err,
                 size_t errlen);

#endif
