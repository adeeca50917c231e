/* cluster.h: the link-model file ("octopipe.cluster/1") that `octopipe profile comm` writes and
 * --cluster reads:
 *   {"format": "octopipe.cluster/1", "nodes_of": 8,
 *    "intra_lat_ms": x, "intra_bw_GBps": x, "inter_lat_ms": x, "inter_bw_GBps": x,
 *    "source": "how it was measured"}
 * nodes_of = 0 means one node. */
#ifndef OCTOPIPE_CLUSTER_H
#define OCTOPIPE_CLUSTER_H
#include "octopipe/cost.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads and checks the file (every field present and known, latencies in [0, OP_MAX_MS],
 * bandwidths > 0); errors name the file and the field, or line:col for broken JSON. */
int op_cluster_read(const char *path, op_comm *c, op_err *err);
/* The same from text; `name` is used in messages. */
int op_cluster_from_json(const char *text, const char *name, op_comm *c, op_err *err);
int op_cluster_write(const char *path, const op_comm *c, const char *source, op_err *err);

#ifdef __cplusplus
}
#endif
#endif
