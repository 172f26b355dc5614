/* migrate_cmd.c — `duro migrate --from PATH --to CONNINFO`: the command
 * line of migrate.h's copy.  It holds the source's storage lock
 * (store/lock.h) from before the copy reads a row until it has ended, so that
 * no host runs on the journal meanwhile, and a host still running on it
 * makes the command refuse. */
#include "migrate_cmd.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lock.h"
#include "migrate.h"

void migrate_usage(FILE *out) {
  fputs("       duro migrate --from PATH --to CONNINFO\n"
        "                             copy a stopped host's SQLite journal "
        "into an\n"
        "                             empty PostgreSQL database\n",
        out);
}

static int usage_error(const char *what) {
  fprintf(stderr,
          "duro migrate: %s\nusage: duro migrate --from PATH --to "
          "CONNINFO\n",
          what);
  return 2;
}

int migrate_main(int argc, char **argv) {
  const char *from = NULL, *to = NULL;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--from") && i + 1 < argc && !from)
      from = argv[++i];
    else if (!strcmp(argv[i], "--to") && i + 1 < argc && !to)
      to = argv[++i];
    else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      fputs("usage: duro migrate --from PATH --to CONNINFO\n", stdout);
      return 0;
    } else
      return usage_error(argv[i][0] == '-' ? "unknown or repeated option"
                                           : "unexpected argument");
  }
  if (!from || !to || !*from || !*to)
    return usage_error("needs --from PATH and --to CONNINFO");
  struct stat sb;
  if (stat(from, &sb) != 0) {
    fprintf(stderr, "duro migrate: %s: %s\n", from, strerror(errno));
    return 1;
  }
  char err[1024];
  int lock_fd = -1;
  /* A host that is just stopping lets go within a second. */
  if (storage_lock(from, 1000, &lock_fd, err, sizeof err) != 0) {
    fprintf(stderr, "duro migrate: %s; stop that host first\n", err);
    return 1;
  }
  int rc = migrate_copy(from, to, stdout, err, sizeof err);
  if (rc)
    fprintf(stderr, "duro migrate: %s\n", err);
  close(lock_fd);
  return rc ? 1 : 0;
}
