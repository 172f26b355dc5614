/* main.c — the `duro` command line.  `duro run [CONFIG]` and `duro check
 * [CONFIG]` run the host in this process (host.c); `duro workflows …` is a
 * client that talks HTTP to a running host (cli.c); `duro migrate` copies
 * a stopped host's journal (migrate_cmd.c).  Everything else lives
 * in the host library. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "duro.h"
#include "duro_config.h"
#include "host.h"
#include "migrate_cmd.h"
#include "reload.h"
#include "replay.h"
#include "supervisor.h"
#include "worker.h"

#define DEFAULT_CONFIG "config/duro.yaml"

static int usage(FILE *out) {
  fprintf(
      out,
      "usage: duro run [CONFIG]     run the host (default %s)\n"
      "       duro check [CONFIG]   validate the config and its plugins\n"
      "       duro check [CONFIG] --replay NEW.so [--plugin NAME] [--json]\n"
      "                             replay the instances in flight on a "
      "new build,\n"
      "                             running nothing: which would "
      "diverge?\n"
      "       duro version          the version, and the plugin ABI it "
      "loads\n"
      "       duro help             print this\n",
      DEFAULT_CONFIG);
  migrate_usage(out);
  cli_usage(out);
  fputs("  paths in CONFIG (storage.path, a plugin's path) are relative to "
        "CONFIG's\n"
        "  directory, not the current one\n",
        out);
  return out == stderr ? 2 : 0;
}

/* duro check [CONFIG] [--replay NEW.so [--plugin NAME] [--json]] */
static int check(int argc, char **argv) {
  const char *cfg = DEFAULT_CONFIG, *replay = NULL, *plugin = NULL;
  int as_json = 0;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--replay") && i + 1 < argc)
      replay = argv[++i];
    else if (!strcmp(argv[i], "--plugin") && i + 1 < argc)
      plugin = argv[++i];
    else if (!strcmp(argv[i], "--json"))
      as_json = 1;
    else if (argv[i][0] == '-')
      return usage(stderr);
    else
      cfg = argv[i];
  }
  return replay ? replay_check_main(cfg, replay, plugin, as_json)
                : host_check(cfg);
}

/* `duro version`, `duro --version`: this build, and which plugins it
 * loads (a plugin built against duro.h of the same ABI major and a minor
 * up to this one's; the loader refuses the others). */
static int version(void) {
  printf("duro %s\nplugin ABI %d.%d (loads plugins built for %d.0 to "
         "%d.%d)\n",
         DURO_VERSION, DURO_ABI_MAJOR, DURO_ABI_MINOR, DURO_ABI_MAJOR,
         DURO_ABI_MAJOR, DURO_ABI_MINOR);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2)
    return usage(stderr);
  const char *verb = argv[1];
  const char *cfg = argc > 2 ? argv[2] : DEFAULT_CONFIG;
  if (!strcmp(verb, "run"))
    return supervisor_run(cfg);
  if (!strcmp(verb, "check"))
    return check(argc, argv);
  if (!strcmp(verb, "migrate"))
    return migrate_main(argc, argv);
  if (!strcmp(verb, "__load")) /* the reload probe (reload/reload.h) */
    return reload_probe_main(argc, argv);
  if (!strcmp(verb, "__worker")) /* a plugin's worker (worker/worker.h) */
    return worker_process_main(argc, argv);
  if (!strcmp(verb, "workflows") || !strcmp(verb, "reload") ||
      !strcmp(verb, "plugins") || !strcmp(verb, "queues") ||
      !strcmp(verb, "pipelines") || !strcmp(verb, "cron") ||
      !strcmp(verb, "hosts") || !strcmp(verb, "keys") ||

      !strcmp(verb, "bulk"))
    return cli_main(argc, argv);
  if (!strcmp(verb, "version") || !strcmp(verb, "--version"))
    return version();
  if (!strcmp(verb, "help") || !strcmp(verb, "--help") || !strcmp(verb, "-h"))
    return usage(stdout);
  fprintf(stderr, "duro: unknown command \"%s\"\n", verb);
  return usage(stderr);
}
