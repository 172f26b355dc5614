/* nightly.c — a cron trigger with a scheduled handler: a plugin to copy
 * when something must run on a schedule, durably.
 *
 * The handler runs once per tick of each cron the plugin declares as a
 * string; each tick is claimed in the journal before it runs, so no tick
 * fires twice, even across crashes and restarts.  A handler is not
 * retried, though, so it does the one thing that is safe to do there:
 * it creates a workflow instance whose id comes from the tick, and the
 * workflow does the work, step by step, with retries.  A tick handled
 * twice (a fire by hand with `duro cron trigger`, say) finds the
 * instance already there.  Declare it like this:
 *
 *   plugins:
 *     - name: nightly
 *       path: ../build/examples/libnightly.so  # from a config in config/
 *       workflows:
 *         - { name: nightly-report, binding: REPORT, class_name: Report }
 *       triggers:
 *         crons: ["0 3 * * *"]            # 03:00 UTC every day
 *
 * Without any code the same is
 *   crons: [{schedule: "0 3 * * *", workflow: nightly-report,
 *            id: "report-{date}"}]
 * which creates the instance and records the tick in one transaction. */
#include <stdio.h>
#include <time.h>

#include "duro.h"

static int gather(duro_attempt *a, void *arg) {
  (void)arg;
  return duro_attempt_result(a, "{\"orders\":128,\"revenue_cents\":1045000}");
}

static duro_rc report(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  const char *totals;
  DURO_TRY(duro_do(step, "gather totals", NULL, gather, NULL, &totals));
  duro_log(DURO_LOG_INFO, "report %s: %s", ev->instance_id, totals);
  return duro_set_output(step, totals);
}

/* One instance per tick: "report-YYYY-MM-DD" of the tick's UTC date. */
static int on_tick(const duro_scheduled_event *ev, duro_env *env) {
  duro_workflow *wf = duro_env_workflow(env, "REPORT");
  if (!wf)
    return 1;
  time_t t = (time_t)(ev->scheduled_ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  char id[32], params[96];
  strftime(id, sizeof id, "report-%Y-%m-%d", &tm);
  snprintf(params, sizeof params, "{\"cron\":\"%s\",\"scheduled_ms\":%lld}",
           ev->cron, (long long)ev->scheduled_ms);
  int rc = duro_workflow_create(wf, id, params);
  return rc == 0 || rc == DURO_E_ALREADY_EXISTS ? 0 : 1;
}

static const duro_workflow_def workflows[] = {{"Report", report}};

DURO_PLUGIN(.name = "nightly", .version = "1.0", DURO_WORKFLOWS(workflows),
            .scheduled = on_tick);
