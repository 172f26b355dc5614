/* replay.h — `duro check CONFIG --replay NEW.so [--plugin NAME] [--json]`:
 * a dry run of a new build against the journals of in-flight instances,
 * before it is deployed (replay.c). */
#ifndef DURO_REPLAY_H
#define DURO_REPLAY_H

/* Returns the exit code: 0 nothing would diverge, 1 some instance would,
 * 2 the check could not run. */
int replay_check_main(const char *config_path, const char *so,
                      const char *plugin, int as_json);

#endif
