/* problem.h: a planning problem (op_problem, plan.h) built the way `octopipe plan` and
 * `compare` build it, so a program does not repeat that glue:
 *   per-layer costs of the model on the GPU (op_cost_layers), tokens per microbatch
 *   (seq * mbs), links (default NVLink/IB model, a measured cluster file, or free), and the
 *   per-device memory limit (by default 90% of the GPU's memory: the CUDA context, NCCL
 *   buffers and fragmentation are not modelled).
 *
 *   op_problem_built b;
 *   if (op_problem_build(&b, "nemotron-h-8b", "h100-80gb", 8, 32, NULL, &err) != OP_OK) ...
 *   op_tune(&b.pr, &topts, &plan, &err);
 *   op_problem_built_free(&b);
 */
#ifndef OCTOPIPE_PROBLEM_H
#define OCTOPIPE_PROBLEM_H
#include "octopipe/cluster.h"
#include "octopipe/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Default memory limit as a fraction of the device's memory. */
#define OP_MEM_HEADROOM 0.9

typedef struct op_problem_opts {
    op_train_cfg train;       /* seq, mbs, tp, dp, zero1 (op_train_cfg_default) */
    int nodes_of;             /* devices per node for the default links (8) */
    int comm_none;            /* 1: free communication (analytic comparisons) */
    const char *cluster_file; /* cluster file (cluster.h): links, and devices when it lists
                                 them; NULL: default links */
    const char *gpus;         /* "h100-80gb:4,a100-80gb:4": each device's GPU in rank order
                                 (counts must add up to P); NULL: every device `dev` */
    op_cluster *cluster;      /* storage a cluster of several types needs (its per-type costs
                                 and limits live there): zeroed and filled by
                                 op_problem_from_model, op_cluster_free after the problem;
                                 NULL: gpus and files with devices are refused */
    double mem_limit_bytes;   /* > 0: this limit; 0: OP_MEM_HEADROOM x the GPU's memory;
                                 < 0: no limit */
    double op_overhead_ms;    /* per-op dispatch cost added to every op (0) */
} op_problem_opts;

void op_problem_opts_default(op_problem_opts *o);

/* Fills *pr for model m on device dev, P devices, M microbatches.  costs is the caller's
 * array of m->n_layers entries, filled here; *pr points into m (name), costs and o->cluster,
 * which must outlive it.  o NULL: defaults.  Returns OP_OK, or OP_EINVAL / OP_EIO with err set.
 * With o->gpus (or a cluster file listing devices) the devices' GPUs replace dev: costs is
 * the first device's type (row 0), each type's costs are the analytic model on its preset,
 * and each device's limit is OP_MEM_HEADROOM x its own memory (unless o->mem_limit_bytes says
 * otherwise; pr->mem_limit_bytes is then the smallest, dev_mem_limit NULL when all are equal).
 * The host link (offload) is each device's own type's (op_comm_set_host_devs): one link where
 * all are the same, else per device with comm.host_bw_GBps the slowest.
 * A profile's measured times are taken as measured on dev (--gpu); a type the profile measured
 * too (its "by_gpu") gets those, any other type the times on dev scaled per layer kind by the
 * analytic ratio of the two presets (op_cost_kind_ratio). */
int op_problem_from_model(op_problem *pr, const op_model *m, const op_device *dev, int P, int M,
                          const op_problem_opts *o, op_layer_cost *costs, op_err *err);

/* 1 when pr (built by op_problem_from_model for m) has device types, m has measured layers
 * and some type has no times of its own in the profile (by_gpu): their times on the types
 * other than --gpu were scaled by the analytic model, which callers say. */
int op_problem_profile_scaled(const op_problem *pr, const op_model *m);

/* A problem with everything it points to.  pr points into the struct itself: use it where it
 * was built (pass pointers), do not copy it by value. */
typedef struct op_problem_built {
    op_model model;
    op_device dev;
    op_layer_cost *costs; /* [model.n_layers] */
    op_problem pr;
    op_cluster cluster; /* device types and their costs (mixed clusters) */
} op_problem_built;

/* Loads model (HF config.json, profile JSON or preset name, as op_model_load), looks up gpu
 * (op_device_preset; NULL: "h100-80gb") and calls op_problem_from_model.  On failure nothing
 * is left to free.  Free a success with op_problem_built_free. */
int op_problem_build(op_problem_built *b, const char *model, const char *gpu, int P, int M,
                     const op_problem_opts *o, op_err *err);
void op_problem_built_free(op_problem_built *b);

#ifdef __cplusplus
}
#endif
#endif
