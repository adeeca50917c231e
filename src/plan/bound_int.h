/* bound_int.h: what the lower-bound files of plan/ share. */
#ifndef OP_PLAN_BOUND_INT_H
#define OP_PLAN_BOUND_INT_H

#include "octopipe/plan.h"

/* Devices grouped by (type, memory limit): n groups, type[g] a row of the per-type arrays,
 * cnt[g] devices, lim[g] their limit in bytes (<= 0: none; lim may be NULL: no limits). */
typedef struct {
    int n;
    const int *type, *cnt;
    const double *lim;
} op_bound_groups;

/* The whole-layer counting bound (bound_count.c says why it holds): w [T * L] per-type work
 * (F + I + W of one microbatch), st [T * L] per-type static bytes (may be NULL when no group
 * has a limit). */
double op_bound_count(const double *w, const double *st, int T, int L, int M,
                      const op_bound_groups *gr);

/* The joint bound per device with its memory (bound_memjoint.c says why it holds): whole
 * layers' static bytes within each device's limit, and the recomputation its own stashes of
 * one microbatch force, in bound_joint.c's per-device warm-up x balance x drain inequality.
 * Arguments as op_lower_bound_mem_mixed; returns the largest T above lo it proves impossible,
 * else lo. */
double op_bound_mem_joint(const op_layer_cost *type_layers, int n_types, int n_layers,
                          const int *dev_type, const double *dev_lim, double lim_all, int P, int M,
                          const op_comm *comm, double lo);

/* The same without memory: bound_joint.c's bound with each device's layers at its own type's
 * times (the warm-up and drain chains at each layer's fastest).  Valid for any plan; returns
 * the largest T above lo it proves impossible, else lo. */
double op_bound_joint_types(const op_layer_cost *type_layers, int n_types, int n_layers,
                            const int *dev_type, int P, int M, double lo);

#endif
