/* export.h: what a plan turns into for other tools and for people.
 *
 *  - torch.distributed.pipelining `compute_only` CSV (row d = rank d, cells like 2F0 / 1I3 /
 *    1W3 / 0B7 in execution order), checked by a C port of torch's own rules
 *    (_validate_schedule, then the _add_send_recv lowering and the _simulate_comms_compute dry
 *    run), for any placement; the compute_comms CSV torch lowers it into (torch_lower.c); the
 *    stage -> rank map as JSON; torchtitan's module_fqns_per_model_part as JSON;
 *  - Megatron-LM: --pipeline-model-parallel-layout (transformer models) or
 *    --hybrid-layer-pattern with `|` segment boundaries (hybrid models);
 *  - a Chrome trace (Perfetto) with per-device memory counters and P2P flow arrows;
 *  - an SVG timeline.
 *
 * Every exporter appends to an op_buf and writes nothing to disk: callers collect all outputs
 * first and then write them atomically, so bad input never leaves a partial file.  Exporters
 * that need times (trace, SVG, memory) use the ops' start/end (ms) as the plan holds them. */
#ifndef OCTOPIPE_EXPORT_H
#define OCTOPIPE_EXPORT_H
#include "octopipe/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- torch.distributed.pipelining / torchtitan ------------------------------------------ */

/* Placement shapes torchtitan builds itself (stages per rank equal, and the stage -> rank map
 * torchtitan generates).  Any other placement still runs in torch's _PipelineScheduleRuntime,
 * which takes the stage -> rank map from the CSV rows: build the stages with the map from
 * op_export_torch_stage_map (python/octopipe_torch does). */
typedef enum op_torch_style {
    OP_TORCH_IRREGULAR = 0, /* any other map: unequal stage counts, sequential, ... */
    OP_TORCH_LOOP = 1,      /* stage s on rank s % P (includes one stage per rank) */
    OP_TORCH_V = 2          /* exactly 2 stages per rank: s and 2P-1-s on rank s */
} op_torch_style;

/* Classifies p's placement; on OP_TORCH_IRREGULAR, why torchtitan's own maps do not fit
 * (when err is non-NULL). */
op_torch_style op_export_torch_style(const op_plan *p, op_err *err);

/* compute_only CSV of p's per-device orders, any placement.  Runs op_export_torch_csv_check
 * on the result and refuses, with torch's reason, a plan torch cannot run. */
int op_export_torch_csv(const op_plan *p, op_buf *out, op_err *err);

/* The same schedule as the compute_comms CSV torch's runtime itself makes from it
 * (op_export_torch_csv_lower): what `_load_csv(path, format="compute_comms")` runs as is. */
int op_export_torch_comms_csv(const op_plan *p, op_buf *out, op_err *err);

/* The stage -> rank map and partition as JSON, for runtimes that build the stages first:
 *   {"format": "octopipe.torch-stages/1", "ranks": P, "stages": S, "microbatches": M,
 *    "style": "loop"|"v"|"irregular", "stage_to_rank": [S], "stage_layers": [[first, last)...],
 *    "layer_kinds": ["E", ...], "split_backward": [0|1 per stage],
 *    "activation": ["keep"|"selective"|"full"|"offload" per stage]}
 * and on a mixed plan "rank_types": ["h100-80gb", ...] (each rank's GPU type, [P]). */
int op_export_torch_stage_map(const op_plan *p, op_buf *out, op_err *err);

/* One line telling the torchtitan settings that build the stages this CSV expects (batch,
 * parallel degrees, activation checkpointing as the plan records them), then any notes on
 * settings torchtitan cannot take from the plan. */
void op_export_torch_hint(const op_plan *p, op_buf *out);

/* torchtitan's parallelism.module_fqns_per_model_part as JSON (one FQN list per stage):
 * EMBED -> tok_embeddings, DECODER k -> layers.k, HEAD -> norm, output; vision layers all in
 * stage 0 -> vision_encoder.  Other layer kinds have no torchtitan module: error. */
int op_export_torch_fqns(const op_plan *p, op_buf *out, op_err *err);

typedef struct op_torch_check_info {
    int P, S, M;      /* ranks (rows), stages, microbatches the CSV was checked for */
    int n_compute;    /* compute actions in the CSV */
    int n_comms;      /* SEND_* + RECV_* actions the lowering inserted */
    int sim_steps;    /* unit-time steps of the comms+compute dry run */
} op_torch_check_info;

/* Checks compute_only CSV text as torch would, for P ranks, S stages and M microbatches
 * (S or M <= 0: inferred as the largest id + 1).  Rules (torch's _validate_schedule): exactly
 * P rows; cells are <stage>F|I|W|B<mb> or (a;b)OVERLAP_F_B or empty; each stage on exactly one
 * rank; per stage M distinct forwards, #I == #W, B + I == M; in row order I/B follow their F
 * and W its I.  Then the compute-only -> compute+comms lowering (_add_send_recv) must make
 * progress ("Malformed compute schedule" otherwise) and the lowered lists must run to the end
 * in the unit-time dry run (_simulate_comms_compute: "Schedule is not progressing").
 * Errors name the row, cell and action.  info may be NULL. */
int op_export_torch_csv_check(const char *csv, int P, int S, int M, op_torch_check_info *info,
                              op_err *err);

/* The compute_comms rows torch's _PipelineScheduleRuntime lowers a compute_only CSV into at
 * its defaults (torch 2.15: max_active_stages 3, unshard_lookahead "full"): UNSHARD/RESHARD
 * around each stage's window, REDUCE_GRAD + WAIT_REDUCE_GRAD after a stage's last backward,
 * the lock-step SEND/RECV insertion, and WAIT_SEND_F after the local I/B that consumes the
 * gradient (other waits at the row's end).  Checks as op_export_torch_csv_check first;
 * OVERLAP_F_B cells are refused. */
int op_export_torch_csv_lower(const char *csv, int P, int S, int M, op_buf *out, op_err *err);

/* ---- Megatron-LM ------------------------------------------------------------------------ */

typedef enum op_megatron_kind {
    OP_MEGATRON_LAYOUT = 1, /* --pipeline-model-parallel-layout (E t m L) */
    OP_MEGATRON_HYBRID = 2  /* --hybrid-layer-pattern (M * - E with | segment boundaries) */
} op_megatron_kind;

/* The layout string (transformer models: layers E, T, m, L) or hybrid layer pattern (layers
 * M * - # plus E and L) for p, without quotes.  Only loop placement with equal stages per
 * device maps (Megatron's flat stage i = vpp_rank * P + pp_rank); anything else is an error
 * saying why.  Layouts compress repeats (t*3, (tt|)*29) where that is shorter.  notes (may be
 * NULL) gets lines worth telling the user (e.g. an empty hybrid segment). */
int op_export_megatron(const op_plan *p, op_buf *out, op_megatron_kind *kind, op_buf *notes,
                       op_err *err);
/* The training settings p's costs assume, appended to out as Megatron flags, each with a
 * leading space: --seq-length, --micro-batch-size, --global-batch-size (M x mbs x dp) where
 * the plan records them, --use-distributed-optimizer for ZeRO-1, and --recompute-* for the
 * strongest activation policy any stage has (Megatron sets one for all; notes say where that
 * differs from the plan).  kind: which layer count --recompute-num-layers counts; Megatron's
 * hybrid stack has no full-layer recomputation, so a hybrid plan with full or offload stages
 * gets selective and a note that its memory will not hold. */
void op_export_megatron_settings(const op_plan *p, op_megatron_kind kind, op_buf *out,
                                 op_buf *notes);
/* The same as torchtitan settings ("key=value, " each) for the export's hint line. */
void op_export_torchtitan_settings(const op_plan *p, op_buf *out, op_buf *notes);
/* The policy that frees the most memory among p's stages (offload given as full, which the
 * frameworks have per stage-wide setting), and in *mixed whether the stages differ. */
int op_export_act_strongest(const op_plan *p, int *mixed);
const char *op_megatron_flag(op_megatron_kind k); /* "--pipeline-model-parallel-layout", ... */

/* Compresses an expanded layout ("Ettt|tt|tt|m|L": tokens E t m L, `|` between stages). */
void op_megatron_compress(const char *expanded, op_buf *out);

/* ---- mixed clusters ------------------------------------------------------------------- */

/* Device d's GPU type name on a mixed plan (more than one type, named), else NULL. */
const char *op_export_dev_type(const op_plan *p, int d);
/* "4 h100-80gb + 4 a100-80gb" (types in order of first appearance) appended to out; returns
 * the number of types written (0 on a plan op_export_dev_type names nothing of). */
int op_export_type_counts(const op_plan *p, op_buf *out);

/* ---- timelines: memory, Chrome trace, SVG ------------------------------------------------ */

/* Device d's memory after each distinct event time under the plan's memory rule (sim.h):
 * static bytes of d's stages, + act_bytes at F start, + act_i_bytes at I and B start,
 * - act_i_bytes - (act_bytes - act_w_bytes) at I end, - act_w_bytes at W end,
 * - act_i_bytes - act_bytes at B end.  Point 0 is (0, static).  (An I/B of zero duration
 * nets its act_i away; the simulator's peak still counts it.) */
typedef struct op_mem_point {
    double t_ms;
    int64_t bytes;
} op_mem_point;
/* Fills *pts (malloc'd, caller frees) and returns the number of points; -1 and *pts = NULL
 * for a device out of range or a plan whose layout, ops on d or their times (finite, >= 0)
 * are not usable.  op_export_peak_bytes: the largest point, -1 likewise. */
int op_export_mem_timeline(const op_plan *p, int d, op_mem_point **pts);
int64_t op_export_peak_bytes(const op_plan *p, int d);
/* Activation policies are drawn too: stash at F and re-materialised bytes from I's start
 * (plan.h), offload copies off the device and back (sim.h).  The copy engine's times, read
 * off the timeline as the simulator does: malloc'd [S * M * 4] as pred.copy_ms (caller
 * frees), or NULL when no stage offloads. */
double *op_export_copy_times(const op_plan *p);

/* Partition and placement only (no schedule): stages contiguous, non-empty, covering all
 * layers, each on a device in 0..P-1.  For exports that do not read the orders. */
int op_export_check_partition(const op_plan *p, op_err *err);

/* Checks that ops carry usable times: finite, 0 <= start <= end, serial per device in order,
 * and not all zero (a plan that was never simulated).  Names the first bad op. */
int op_export_check_times(const op_plan *p, op_err *err);

/* Summary numbers as drawn: makespan = latest end, bubble = 1 - busy / (P * makespan). */
typedef struct op_export_summary {
    double makespan_ms, bubble_ratio;
    int64_t peak_bytes_max;
    int peak_dev;
} op_export_summary;
void op_export_summarize(const op_plan *p, op_export_summary *s);

/* Chrome trace JSON (Perfetto / chrome://tracing): per device a process "device d" with one
 * compute thread; ph:"X" ops in microseconds named "F s3 mb5" with args stage, mb, layers;
 * ph:"C" memory counter "memory" (args.bytes); flow arrows for cross-device messages. */
int op_export_chrome_trace(const op_plan *p, op_buf *out, op_err *err);

/* SVG timeline: devices as rows, one <rect class="op ..."> per op coloured by kind, mb
 * labels where they fit, ms axis, legend, title with makespan, bubble and peak memory. */
int op_export_svg(const op_plan *p, op_buf *out, op_err *err);

#ifdef __cplusplus
}
#endif
#endif
