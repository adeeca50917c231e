/* comm.c: point-to-point link model between pipeline devices.  Devices are grouped into
 * nodes of nodes_of consecutive ranks; inside a node they talk over NVLink, between nodes
 * over InfiniBand.  Defaults and their reasons: docs/cost-model.md. */
#include <math.h>
#include <string.h>

#include "octopipe/cost.h"

void op_comm_default(op_comm *c, int nodes_of) {
    memset(c, 0, sizeof *c);
    c->none = 0;
    c->nodes_of = nodes_of > 0 ? nodes_of : 0;
    c->intra_lat_ms = 0.010; /* NCCL send/recv inside a node: ~10 us */
    c->intra_bw_GBps = 360;  /* NVLink 4: 450 GB/s per direction, ~80% achieved */
    c->inter_lat_ms = 0.025; /* IB NDR through the NIC and a switch: ~20-30 us */
    c->inter_bw_GBps = 40;   /* one 400 Gb/s NDR NIC per GPU: 50 GB/s, ~80% achieved */
    c->host_lat_ms = 0.010;  /* cudaMemcpyAsync to pinned host memory: ~10 us to start */
    c->host_bw_GBps = 25;    /* PCIe Gen4 x16: 32 GB/s, ~80% achieved; op_comm_set_host refines */
    c->host_mem_bytes = 0;
}

void op_comm_set_host(op_comm *c, const op_device *d) {
    if (d && d->host_bw_GBps > 0) c->host_bw_GBps = d->host_bw_GBps;
}

void op_comm_set_links(op_comm *c, const op_comm *links) {
    op_comm t = *links;
    t.host_lat_ms = c->host_lat_ms, t.host_bw_GBps = c->host_bw_GBps;
    t.host_mem_bytes = c->host_mem_bytes;
    t.host_n = c->host_n, t.host_bw_dev_GBps = c->host_bw_dev_GBps;
    *c = t;
}

double op_comm_host_ms(const op_comm *c, int64_t bytes) {
    if (!(c->host_bw_GBps > 0)) return INFINITY;
    return c->host_lat_ms + (double)(bytes > 0 ? bytes : 0) / (c->host_bw_GBps * 1e9) * 1e3;
}

double op_comm_host_bw(const op_comm *c, int d) {
    if (c->host_n > 0 && c->host_bw_dev_GBps && d >= 0 && d < c->host_n) return c->host_bw_dev_GBps[d];
    return c->host_bw_GBps;
}

double op_comm_host_ms_dev(const op_comm *c, int d, int64_t bytes) {
    double bw = op_comm_host_bw(c, d);
    if (!(bw > 0)) return INFINITY;
    return c->host_lat_ms + (double)(bytes > 0 ? bytes : 0) / (bw * 1e9) * 1e3;
}

void op_comm_set_host_devs(op_comm *c, const op_device *types, const int *dev_type, int P, double *bw) {
    int same = 1;
    double lo = INFINITY;
    for (int d = 0; d < P; d++) {
        const op_device *t = &types[dev_type[d]];
        bw[d] = t->host_bw_GBps > 0 ? t->host_bw_GBps : c->host_bw_GBps;
        same &= bw[d] == bw[0];
        lo = fmin(lo, bw[d]);
    }
    if (P < 1) return;
    c->host_bw_GBps = lo; /* the one link of code that knows one: the slowest */
    c->host_n = same ? 0 : P;
    c->host_bw_dev_GBps = same ? NULL : bw;
}

/* A link without bandwidth (a zeroed op_comm: op_comm_validate refuses it, a caller may not
 * have asked) never delivers a byte. */
static double link_ms(double lat, double bw, int64_t bytes) {
    if (bytes <= 0) return lat;
    return bw > 0 ? lat + (double)bytes / (bw * 1e9) * 1e3 : HUGE_VAL;
}

double op_comm_ms(const op_comm *c, int dev_a, int dev_b, int64_t bytes) {
    if (c->none || dev_a == dev_b) return 0.0;
    if (c->pair_n > 0 && dev_a < c->pair_n && dev_b < c->pair_n && c->pair_bw_GBps) {
        size_t k = (size_t)dev_a * (size_t)c->pair_n + (size_t)dev_b;
        return link_ms(c->pair_lat_ms[k], c->pair_bw_GBps[k], bytes);
    }
    int same_node = c->nodes_of <= 0 || dev_a / c->nodes_of == dev_b / c->nodes_of;
    double lat = same_node ? c->intra_lat_ms : c->inter_lat_ms;
    double bw = same_node ? c->intra_bw_GBps : c->inter_bw_GBps;
    return link_ms(lat, bw, bytes);
}
