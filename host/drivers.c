/* drivers.c — the drivers built into duro (engine/driver.h): the one
 * place that names the features the engine runs, in the order it calls
 * them on each scheduler pass (the queues' consumers, the cron triggers,
 * the children of ended parents, the pipelines' flusher, the traces'
 * exporter, which also reads every commit, the tail handlers' batches,
 * which an activation's end fills, then the admission gates:
 * flow.debounce, asked first (a start not due takes no other gate's
 * turn), flow.singleton and flow control; then the shared
 * resources steps claim, then the bulk actions' jobs, the key rotations, and
 * each workflow's last hour counted from the commits) and drains them at stop;
 * it frees them in the reverse order, so cron handlers that send to queues are
 * gone before the queues. */
#include "bulk.h"
#include "children.h"
#include "debounce.h"
#include "driver.h"
#include "flow.h"
#include "keys.h"
#include "outcomes.h"
#include "pipeline_driver.h"
#include "queue_driver.h"
#include "resources.h"
#include "singleton.h"
#include "tail.h"
#include "telemetry.h"
#include "trigger.h"

const duro_driver *const duro_builtin_drivers[] = {
    &queue_driver,     &cron_driver,
    &children_driver,  &pipeline_driver,
    &telemetry_driver, &tail_driver,
    &debounce_driver,  &singleton_driver,
    &flow_driver,      &resources_driver,
    &bulk_driver,      &keys_driver,
    &outcomes_driver,  NULL};
