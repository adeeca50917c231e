/* cost.h: per-layer time and memory on a device, and the link model between devices.
 *
 * Input: an op_model plus a training setup (sequence length, micro-batch size, TP degree,
 * dtype, optimizer sharding) and a device spec.  Output: one op_layer_cost per layer, per
 * microbatch, which is what plans, the simulator and the tuner consume. */
#ifndef OCTOPIPE_COST_H
#define OCTOPIPE_COST_H
#include "octopipe/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What one layer costs for one microbatch on one device.
 *
 * Memory rule (per microbatch, shared by the simulator, the timeline export and the tuner):
 * F allocates act_bytes at its start; while I (or B) runs the peak additionally includes
 * act_i_bytes (gradients and temporaries live only during the op); at I's end the held amount
 * becomes act_w_bytes (which MAY exceed act_bytes: I can stash output gradients for W, leaving
 * more than F stored); W frees act_w_bytes at its end; B frees everything at its end. */
typedef struct op_layer_cost {
    char name[40];
    char sym;                /* op_layer_kind_sym of the layer */
    double f_ms, i_ms, w_ms; /* forward, backward-input, backward-weight; B = I + W */
    int64_t out_bytes;       /* boundary message to the next layer (same size for its gradient) */
    int64_t act_bytes;       /* held from F's start until I (or B) ends */
    int64_t act_w_bytes;     /* held from I's end until W's end (may exceed act_bytes) */
    int64_t param_bytes;     /* weights */
    int64_t static_bytes;    /* weights + gradients + optimizer state while training */
    /* added by the cost model (0 for measured layers without dimensions): */
    int64_t params;          /* parameter count of the whole layer, before TP/EP sharding */
    int64_t params_active;   /* of them, what one token passes through: a routed expert counts
                              * top_k / E (= params where the layer has no routed experts) */
    double flops_f, flops_i, flops_w; /* per device (after TP), per microbatch */
    double comm_f_ms, comm_i_ms;      /* TP / EP collectives included in f_ms, i_ms */
    int64_t act_i_bytes;     /* transient: live only while I (or B) runs, on top of what is held */
    /* activation policies (stage_act in plan.h): */
    double f_sel_ms;         /* the attention core's share of f_ms (scores, softmax, weighted
                              * values): what selective recomputation re-runs; 0 = no core */
    int64_t act_sel_bytes;   /* what F stashes under selective: act_bytes less the attention
                              * core's activations; <= 0 = act_bytes (nothing to drop) */
} op_layer_cost;

/* What F stashes for one layer under selective (act_sel_bytes, never above act_bytes). */
static inline int64_t op_layer_sel_bytes(const op_layer_cost *l) {
    return l->act_sel_bytes > 0 && l->act_sel_bytes < l->act_bytes ? l->act_sel_bytes
                                                                    : l->act_bytes;
}

/* Activation policy of a stage: what happens to the activations F stashes for I.
 *   keep       stash everything until I (the memory rule above)
 *   selective  Megatron's selective recomputation: drop the attention core's activations after F,
 *              recompute them right before I
 *   full       keep only the stage input; re-run the stage's forward right before its I
 *   offload    copy the stash to host memory after F on a copy engine, copy it back before I */
typedef enum op_act_policy {
    OP_ACT_KEEP = 0, OP_ACT_SELECTIVE = 1, OP_ACT_FULL = 2, OP_ACT_OFFLOAD = 3, OP_ACT_N = 4
} op_act_policy;
const char *op_act_policy_name(int policy); /* "keep", "selective", "full", "offload" */
/* Parses a policy name; returns OP_OK or OP_EINVAL with err naming the valid ones. */
int op_act_policy_parse(const char *name, op_act_policy *out, op_err *err);

/* Point-to-point links.  Devices d are grouped into nodes of `nodes_of` consecutive ranks
 * (0 = one node).  A transfer of n bytes takes lat + n / bw.  none = free communication.
 * The host link (device <-> host memory, what offload uses) is per device and independent of
 * `none`: a copy of n bytes takes host_lat_ms + n / host_bw_GBps on the device's copy engine. */
typedef struct op_comm {
    int none;
    int nodes_of;
    double intra_lat_ms, intra_bw_GBps; /* GB/s = 1e9 bytes per second */
    double inter_lat_ms, inter_bw_GBps;
    double host_lat_ms, host_bw_GBps;   /* host link per device; bw <= 0: no offload possible */
    double host_mem_bytes;              /* host memory per device for offloaded stashes; 0 = no limit */
    /* Optional measured links per device pair (mixed clusters, `octopipe profile comm`):
     * pair_n devices, row-major [pair_n * pair_n] latency and bandwidth of a -> b; where set
     * they replace the intra/inter model for pairs a, b < pair_n.  The arrays belong to whoever
     * filled the struct (a plan copies them into its arena).  pair_n = 0: none. */
    int pair_n;
    const double *pair_lat_ms, *pair_bw_GBps;
    /* Optional host link per device (mixed clusters: each GPU's own, PCIe Gen4 on an A100,
     * Gen5 on an H100): host_n devices, host_bw_dev_GBps[d] replaces host_bw_GBps for device
     * d < host_n (host_lat_ms is shared).  Set only where devices differ, so a uniform cluster
     * has host_n = 0 and host_bw_GBps, the slowest, is what code that knows one link uses.  The
     * array belongs to whoever filled the struct (a plan copies it into its arena). */
    int host_n;
    const double *host_bw_dev_GBps;
} op_comm;

/* ms to move bytes from dev_a to dev_b: latency + bytes / bandwidth (0 on one device or with
 * none); HUGE_VAL for bytes over a link without bandwidth (op_comm_validate refuses one). */
double op_comm_ms(const op_comm *c, int dev_a, int dev_b, int64_t bytes);

typedef struct op_device {
    char name[32];
    double peak_tflops;  /* dense bf16 */
    double mem_bw_GBps;  /* HBM */
    double mem_GiB;
    double mfu;          /* achievable fraction of peak on large GEMMs */
    double bw_eff;       /* achievable fraction of HBM bandwidth */
    double launch_ms;    /* fixed cost per kernel (launch + tail), added to every kernel group */
    double tp_bw_GBps;   /* achievable collective bus bandwidth inside a node (NVLink), for TP/EP */
    double tp_lat_ms;    /* latency of one collective step inside a node */
    double host_bw_GBps; /* effective host link (PCIe): Gen5 x16 ~50 (H100/H200), Gen4 ~25 (A100) */
} op_device;

typedef struct op_train_cfg {
    int seq;          /* tokens per sample */
    int mbs;          /* samples per microbatch */
    int tp;           /* tensor-parallel degree */
    int dtype_bytes;  /* activations and weights: 2 (bf16) */
    int dp;           /* data-parallel degree, for ZeRO-1 sharding */
    int zero1;        /* 1: optimizer state sharded over dp */
    int ep;           /* expert-parallel degree (0 or 1: none): routed experts split over ep */
} op_train_cfg;

void op_train_cfg_default(op_train_cfg *t); /* seq 4096, mbs 1, tp 1, bf16, dp 1 */
/* a100-40gb a100-80gb h100-80gb h200 b200, or an alias (op_gpu_name) */
int op_device_preset(const char *name, op_device *d, op_err *err);
const char *const *op_device_preset_names(void);
void op_comm_default(op_comm *c, int nodes_of); /* NVLink inside a node, IB between nodes;
                                                  * host link PCIe Gen4 (25 GB/s, 10 us) */
/* Host link of device d (its host_bw_GBps when > 0); leaves host_mem_bytes alone. */
void op_comm_set_host(op_comm *c, const op_device *d);
/* The links between devices of `links` (a cluster file's: none, nodes_of, intra/inter, per
 * pair) replace c's; c's host link (latency, bandwidth, per device, host memory) stays, since
 * a cluster file carries none. */
void op_comm_set_links(op_comm *c, const op_comm *links);
/* One host copy of n bytes (offload or reload); +inf when there is no host link. */
double op_comm_host_ms(const op_comm *c, int64_t bytes);
/* The same on device d's own host link (host_bw_dev_GBps when set), and that link's GB/s. */
double op_comm_host_ms_dev(const op_comm *c, int d, int64_t bytes);
double op_comm_host_bw(const op_comm *c, int d);
/* Each of P devices gets its own type's host link (types[dev_type[d]].host_bw_GBps, when
 * > 0): where they differ, bw (the caller's [P], kept as long as c) holds them and c points to
 * it; host_bw_GBps becomes the slowest.  Where all are the same, c keeps one link. */
void op_comm_set_host_devs(op_comm *c, const op_device *types, const int *dev_type, int P, double *bw);

/* Ratio, per pass (F, I, W), of a layer of `kind` (op_layer_kind) on preset `to` to the same
 * layer on `from`, by the analytic model over the layers of that kind in a built-in model (all
 * of a built-in model's layers when none has the kind).  r = {1, 1, 1} for the same preset.
 * Returns 1 when a ratio was computed, 0 when none could be (r then all 1). */
int op_cost_kind_ratio(int kind, const op_train_cfg *t, const op_device *to, const op_device *from,
                       double r[3]);

/* Parameter totals of a model from its costs c [n_layers] (op_cost_layers): each weight once
 * (a layer that shares another's weights adds none), MTP blocks apart, as published totals
 * count the main model.  *active: what one token passes through (top_k of each MoE layer's
 * routed experts); *mtp: the MTP blocks' parameters (0 without).  Any output may be NULL. */
void op_cost_param_totals(const op_model *m, const op_layer_cost *c, double *total,
                          double *active, double *mtp);

/* Fills out[0..m->n_layers) with per-microbatch costs. */
int op_cost_layers(const op_model *m, const op_train_cfg *t, const op_device *d,
                   op_layer_cost *out, op_err *err);

#ifdef __cplusplus
}
#endif
#endif
