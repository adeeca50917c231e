/* problem_subset.c: the same job on some of a problem's devices (plan.h, op_problem_subset).
 *
 * Sizing a job asks what fewer devices would do: half of them, or only the H100s of a mixed
 * cluster.  The devices keep their order, type, limit and host link, and the links between
 * them (a measured matrix keeps its rows and columns of those devices); the node structure is
 * nodes_of consecutive ranks as before, so a subset of whole nodes keeps its links.  Devices
 * all of one type and limit make a uniform problem (that type's costs row as `layers`, the one
 * limit as mem_limit_bytes), which every part of the tuner takes as such. */
#include <stdlib.h>
#include <string.h>

#include "octopipe/plan.h"

void *op_problem_subset(const op_problem *pr, const int *idx, int k, op_problem *q) {
    *q = *pr;
    q->P = k;
    const int P = pr->P;
    /* one block for every array the subset needs: dev_type, dev_mem_limit, host links, links */
    size_t nd = (size_t)k, npair = pr->comm.pair_n == P ? (size_t)k * (size_t)k : 0;
    const size_t ndbl = 3 * nd + 2 * npair + 1;
    double *blk = op_xcalloc(1, ndbl * sizeof(double) + (nd + 1) * sizeof(int));
    int *types = (int *)(blk + ndbl); /* after the doubles: aligned for an int */
    double *lim = blk, *host = blk + nd, *plat = blk + 3 * nd, *pbw = plat + npair;
    int same_type = 1, same_lim = 1, same_host = 1;
    for (int j = 0; j < k; j++) {
        const int d = idx[j];
        types[j] = pr->n_types > 1 && pr->dev_type ? pr->dev_type[d] : 0;
        lim[j] = op_problem_dev_mem_limit(pr, d);
        host[j] = pr->comm.host_n == P ? pr->comm.host_bw_dev_GBps[d] : pr->comm.host_bw_GBps;
        same_type &= types[j] == types[0];
        same_lim &= lim[j] == lim[0];
        same_host &= host[j] == host[0];
        for (size_t b = 0; npair && b < nd; b++) {
            size_t from = (size_t)d * (size_t)P + (size_t)idx[b];
            plat[(size_t)j * nd + b] = pr->comm.pair_lat_ms[from];
            pbw[(size_t)j * nd + b] = pr->comm.pair_bw_GBps[from];
        }
    }
    if (same_type) { /* one type: its costs are the problem's costs */
        if (pr->n_types > 1 && pr->type_layers)
            q->layers = pr->type_layers + (size_t)types[0] * (size_t)pr->n_layers;
        q->n_types = 0, q->type_layers = NULL, q->dev_type = NULL;
        if (pr->n_types > 1 && pr->type_name) q->type_name = pr->type_name + types[0];
    } else {
        q->dev_type = types;
    }
    if (pr->dev_mem_limit) {
        if (same_lim) q->dev_mem_limit = NULL, q->mem_limit_bytes = lim[0];
        else q->dev_mem_limit = lim;
    }
    if (pr->comm.host_n == P) {
        double lo = host[0];
        for (int j = 1; j < k; j++) lo = host[j] < lo ? host[j] : lo;
        q->comm.host_bw_GBps = lo; /* the slowest, as op_comm_set_host_devs keeps it */
        q->comm.host_n = same_host ? 0 : k;
        q->comm.host_bw_dev_GBps = same_host ? NULL : host;
    }
    if (npair) q->comm.pair_n = k, q->comm.pair_lat_ms = plat, q->comm.pair_bw_GBps = pbw;
    return blk;
}
