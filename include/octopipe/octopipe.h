/* octopipe.h: the whole public API in one include.
 *
 *   #include <octopipe/octopipe.h>
 *   cc prog.c $(pkg-config --cflags --libs octopipe)
 *
 * Layers, left to right (each includes what it builds on): model -> cost -> plan (+ problem,
 * plan_io, cluster) -> sched / sim / tune -> export -> exec -> nn -> train -> ptrain.
 * Every header compiles as C17 and as C++ (extern "C"). */
#ifndef OCTOPIPE_OCTOPIPE_H
#define OCTOPIPE_OCTOPIPE_H

#include "octopipe/version.h"
#include "octopipe/common.h"
#include "octopipe/model.h"
#include "octopipe/cost.h"
#include "octopipe/plan.h"
#include "octopipe/problem.h"
#include "octopipe/plan_io.h"
#include "octopipe/cluster.h"
#include "octopipe/sched.h"
#include "octopipe/sim.h"
#include "octopipe/tune.h"
#include "octopipe/export.h"
#include "octopipe/exec.h"
#include "octopipe/nn.h"
#include "octopipe/train.h"
#include "octopipe/ptrain.h"

#endif
