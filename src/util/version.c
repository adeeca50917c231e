/* version.c: op_version() (see octopipe/version.h). */
#include "octopipe/version.h"

const char *op_version(void) { return OCTOPIPE_VERSION; }
