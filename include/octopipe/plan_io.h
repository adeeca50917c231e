/* plan_io.h: plan file details beyond plan.h's op_plan_write / op_plan_read.
 *
 * The plan file `octopipe.plan/1` (plan/plan_json*.c):
 *   { "format": "octopipe.plan/1", "name", "model", "devices": P, "microbatches": M,
 *     "tokens_per_mb", "op_overhead_ms", "mem_limit_bytes",
 *     "batch": {"seq", "mbs"} (tokens per sample and samples per microbatch the costs assume;
 *              seq x mbs = tokens_per_mb; absent for a profile of only measured layers that
 *              does not say the batch it was measured at),
 *     "parallel": {"tp", "ep" (the TP and EP degrees the costs assume, 1..1024), "dp" (the
 *                  data-parallel degree), "zero1" (true: optimizer state sharded over dp >= 2)},
 *     "comm": {"none", "nodes_of", "intra_lat_ms", "intra_bw_GBps", "inter_lat_ms", "inter_bw_GBps",
 *              "host_lat_ms", "host_bw_GBps", "host_mem_bytes" (the host link offload uses)},
 *     "layers": [{"name", "kind" (symbol, e.g. "M"), "F", "I", "W" (ms per microbatch),
 *                 "out_bytes", "act_bytes", "act_w_bytes", "act_i_bytes", "param_bytes",
 *                 "static_bytes", "F_sel" (ms of F that selective recomputation re-runs),
 *                 "act_sel_bytes" (F's stash under selective)}],
 *     "stages": [[first, last), ...], "split": [true = I+W | false = B, per stage],
 *     "activation": ["keep" | "selective" | "full" | "offload", per stage],
 *     "placement": [[stage, ...] per device],
 *     "schedule": [[{"op": "F|I|W|B", "stage", "mb", "start", "end"}, ...] per device],
 *     "predicted": {"makespan_ms", "bubble_ratio", "lower_bound_ms", "tokens_per_s",
 *                   "peak_bytes_max", "peak_bytes": [P], "static_bytes": [P], "busy_ms": [P],
 *                   "warmup_ms": [P], "cooldown_ms": [P], "residual_ms": [P]},
 *     mixed clusters only (docs/cluster.md):
 *     "device_types": [{"name"}, {"name", "layers": [as "layers"]}, ...] (type 0's costs are
 *                     "layers"; every later type gives its own), "device_type": [P] type index
 *                     per device, "device_mem_limit_bytes": [P] (when limits differ),
 *     and in "comm": "pair_lat_ms", "pair_bw_GBps" ([P][P], a -> b) for measured pair links,
 *     "host_bw_GBps_per_device" ([P], where the devices' host links differ) }
 * Required: format, devices, microbatches, layers, stages, placement, schedule.  Optional:
 * name, model, tokens_per_mb, op_overhead_ms, mem_limit_bytes (0), batch (absent: not recorded;
 * both keys when present), parallel (written only where a degree is above 1; absent, and each
 * key absent: 1, zero1 false), comm (none; its host link
 * 0.01 ms and 25 GB/s, no host budget), split (inferred from the op kinds), activation (keep
 * on every stage), the mixed-cluster keys (absent: uniform; device_types and device_type
 * together, pair_lat_ms and pair_bw_GBps together), start/end (all ops or none), predicted
 * (makespan_ms, bubble_ratio, lower_bound_ms and peak_bytes required inside it); per layer
 * name, out_bytes, act_w_bytes, act_i_bytes, param_bytes, static_bytes, F_sel, act_sel_bytes
 * (0; act_sel_bytes 0 means act_bytes).  Byte counts are
 * integers >= 0; act_w_bytes may exceed act_bytes (sim.h gives the memory rule).  Unknown
 * keys are errors.
 *
 * Reading checks, each error one line "FILE: PATH: what is wrong" (JSON syntax errors
 * "FILE:LINE:COL: ..."): types and ranges, contiguous stages covering every layer, each stage
 * on exactly one device, every op present once and on its stage's device, recorded durations
 * equal to the stage's cost, no op starting before its device's previous op ends or before
 * its input arrives (producer end + transfer), no deadlock, and recorded times and prediction
 * equal to a re-simulation (relative tolerance 1e-9, for hand-edited files).  After a
 * successful read the plan's op times and p->pred are the re-simulated ones. */
#ifndef OCTOPIPE_PLAN_IO_H
#define OCTOPIPE_PLAN_IO_H
#include "octopipe/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OP_PLAN_FORMAT "octopipe.plan/1"

/* How a read plan's recorded numbers compare with the re-simulation. */
typedef struct op_plan_file_info {
    int has_times;         /* ops carried start/end */
    int has_pred;          /* a "predicted" object was present */
    int exact;             /* every recorded time and prediction is bit-identical */
    double max_time_diff_ms; /* largest |recorded - simulated| over op times */
    double max_pred_rel_diff; /* largest relative difference over predicted numbers */
} op_plan_file_info;

/* Appends x as the shortest JSON number that reads back to the same double; returns 0 (and
 * appends nothing) when x is inf or NaN, which JSON cannot hold. */
int op_json_num(op_buf *b, double x);

int op_plan_read_ex(const char *path, op_plan *p, op_plan_file_info *info, op_err *err);
int op_plan_from_json_ex(const char *text, const char *srcname, op_plan *p,
                         op_plan_file_info *info, op_err *err);

#ifdef __cplusplus
}
#endif
#endif
