/* pipeline_driver.h — the pipelines as an engine driver (driver.h), for
 * drivers.c, the one file that names the drivers. */
#ifndef DURO_PIPELINE_DRIVER_H
#define DURO_PIPELINE_DRIVER_H

#include "driver.h"

extern const duro_driver pipeline_driver;

#endif
