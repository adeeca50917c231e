/* cluster.h: the cluster description.  The file ("octopipe.cluster/1") that `octopipe profile
 * comm` writes and --cluster reads:
 *   {"format": "octopipe.cluster/1", "nodes_of": 8,
 *    "intra_lat_ms": x, "intra_bw_GBps": x, "inter_lat_ms": x, "inter_bw_GBps": x,
 *    "source": "how it was measured",
 * optional (mixed clusters; files without them load as before):
 *    "gpus": "h100-80gb:4,a100-80gb:4"              devices in rank order, as --gpus, or
 *    "devices": [{"gpu": "h100-80gb", "mem_GiB": 80}, ...]   one object per device (mem_GiB
 *                                                   optional: the preset's memory),
 *    "pair_lat_ms": [[...] x P], "pair_bw_GBps": [[...] x P]   measured links a -> b for every
 *                                                   device pair (replacing intra/inter)}
 * nodes_of = 0 means one node.  docs/cluster.md has an example. */
#ifndef OCTOPIPE_CLUSTER_H
#define OCTOPIPE_CLUSTER_H
#include "octopipe/cost.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads and checks the file's links (every field present and known, latencies in
 * [0, OP_MAX_MS], bandwidths >= OP_MIN_GBPS, 1 kB/s); errors name the file and the field, or
 * line:col for broken JSON.  The devices and per-pair links of a full file are checked but not returned here
 * (op_cluster_load keeps them). */
int op_cluster_read(const char *path, op_comm *c, op_err *err);
/* The same from text; `name` is used in messages. */
int op_cluster_from_json(const char *text, const char *name, op_comm *c, op_err *err);
/* Writes the links of c, and its per-pair links when c->pair_n > 0 (as `profile comm` does
 * over 3 or more ranks); op_cluster_load reads them back.  Links op_cluster_read would refuse
 * (NaN, infinite, a bandwidth below OP_MIN_GBPS, a latency outside [0, OP_MAX_MS], nodes_of
 * outside [0, 2^20]) are an error, nothing is written. */
int op_cluster_write(const char *path, const op_comm *c, const char *source, op_err *err);

#define OP_CLUSTER_MAX_TYPES 8
#define OP_CLUSTER_MAX_DEVICES 4096

/* A described cluster: devices with their GPU type and memory, and links.  Everything it
 * points to lives in its arena (op_cluster_free).  A mixed op_problem built from it
 * (problem.h) points into it too: the per-type costs and per-device limits are kept here. */
typedef struct op_cluster {
    int P;                                    /* devices described; 0: none (links only) */
    int n_types;                              /* distinct GPU types, in order of first device */
    op_device type_dev[OP_CLUSTER_MAX_TYPES]; /* type t's preset; type_dev[t].name its name */
    int *dev_type;                            /* [P] */
    double *dev_mem_GiB;                      /* [P] each device's memory */
    int dev_cap;                              /* room in dev_type / dev_mem_GiB (>= P) */
    int has_links;                            /* comm was given (a file) */
    op_comm comm;                             /* links; pair_* [P * P] when measured per pair */
    /* filled by op_problem_from_model for a problem of this cluster: */
    op_layer_cost *type_layers;               /* [n_types * n_layers] */
    char (*type_name)[32];                    /* [n_types] */
    double *dev_mem_limit;                    /* [P] */
    op_arena arena;
} op_cluster;

/* Appends the devices of a --gpus list "NAME[:COUNT],..." (device order = list order; COUNT 1
 * to 4096, default 1; NAME a preset of op_device_preset, memory the preset's) to c (zeroed, or
 * from op_cluster_load).  OP_EINVAL with one line on a bad list; c keeps what it had. */
int op_cluster_parse_gpus(const char *spec, op_cluster *c, op_err *err);
/* Reads the full file (links, and devices and per-pair links when given) into c (zeroed
 * here).  Errors name the file and the field. */
int op_cluster_load(const char *path, op_cluster *c, op_err *err);
int op_cluster_load_json(const char *text, const char *name, op_cluster *c, op_err *err);
void op_cluster_free(op_cluster *c);

#ifdef __cplusplus
}
#endif
#endif
