/* pingpong.c: P2P latency and bandwidth between ranks 0 and 1 (op_exec_pingpong) or between
 * every pair of ranks (op_exec_pingpong_pairs), measured with the executor's own transport and
 * polite waits (so the fit is the link the executor sees, poll sleeps included), fitted as
 * one-way t = lat + bytes / bw. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int wait_req(op_xport *x, op_xreq *r) {
    for (;;) {
        if (x->test(x, r) < 0) return -1;
        if (r->done) return 0;
        op_exec_nap_us(20);
    }
}

/* Median one-way time (ms) over `iters` round trips of n bytes between ranks a (it starts)
 * and b, after `warm` unrecorded ones.  sync_all: every rank meets at a barrier before each
 * trip (ranks other than a and b only do that), so no trip overlaps another rank's work. */
static double round_trip_ms(op_xport *x, char *buf, int64_t n, int a, int b, int iters, int warm,
                            int sync_all) {
    double *one = op_xcalloc((size_t)iters, sizeof(double));
    for (int k = -warm; k < iters; k++) {
        if (sync_all) x->barrier(x);
        double t0 = op_now_s();
        op_xreq r = {0};
        if (x->rank == a) {
            x->isend(x, buf, n, b, 1, &r);
            wait_req(x, &r);
            x->irecv(x, buf, n, b, 2, &r);
            wait_req(x, &r);
        } else if (x->rank == b) {
            x->irecv(x, buf, n, a, 1, &r);
            wait_req(x, &r);
            x->isend(x, buf, n, a, 2, &r);
            wait_req(x, &r);
        }
        if (k >= 0) one[k] = (op_now_s() - t0) / 2 * 1e3;
    }
    qsort(one, (size_t)iters, sizeof(double), cmp_double);
    double t = one[iters / 2];
    free(one);
    return t;
}

int op_exec_pingpong(op_xport *x, int64_t max_bytes, int iters, double *lat_ms, double *bw_GBps,
                     op_buf *table, op_err *err) {
    if (x->size < 2) return op_errf(err, OP_EINVAL, "profile comm needs 2 ranks (got %d)", x->size);
    if (max_bytes < 32)
        return op_errf(err, OP_EINVAL, "profile comm: --max-bytes needs at least 32 (two message "
                       "sizes, 8 B and 32 B, to fit latency and bandwidth; got %lld)", (long long)max_bytes);
    char *buf = op_xcalloc((size_t)max_bytes, 1);
    double sz[32], t[32];
    int ns = 0;
    op_exec_timer_slack_fine();
    for (int64_t n = 8; n <= max_bytes && ns < 32; n *= 4) {
        int it = iters;
        if (n >= (1 << 20)) it = iters / 4 > 5 ? iters / 4 : 5;
        sz[ns] = (double)n;
        /* median: the executor meets the typical transfer, not the best one, and a load spike
         * from other work on the machine must not become the link */
        t[ns] = round_trip_ms(x, buf, n, 0, 1, it, 3, 1);
        ns++;
    }
    free(buf);
    if (x->rank != 0) return OP_OK;
    /* weighted least squares on relative error: minimise sum ((a + b n - t) / t)^2 */
    double s00 = 0, s01 = 0, s11 = 0, r0 = 0, r1 = 0;
    for (int i = 0; i < ns; i++) {
        double w = 1 / (t[i] * t[i]);
        s00 += w;
        s01 += w * sz[i];
        s11 += w * sz[i] * sz[i];
        r0 += w * t[i];
        r1 += w * sz[i] * t[i];
    }
    double det = s00 * s11 - s01 * s01;
    double a = (r0 * s11 - r1 * s01) / det, b = (s00 * r1 - s01 * r0) / det;
    if (ns < 2 || !(det > 0)) a = b = NAN; /* one size (or equal ones) fixes no line */
    if (a < 0) a = 0; /* below the noise: no measurable fixed cost */
    *lat_ms = a;
    /* larger messages no slower than smaller ones measure no bandwidth: 0 says so, where a
     * clamped slope would claim an absurd link; the caller refuses it */
    *bw_GBps = b > 0 ? 1.0 / b * 1e3 / 1e9 : isnan(b) ? NAN : 0; /* b is ms per byte */
    if (table) {
        op_buf_printf(table, "%12s %14s %14s\n", "bytes", "one-way ms", "fit ms");
        for (int i = 0; i < ns; i++)
            op_buf_printf(table, "%12.0f %14.4f %14.4f\n", sz[i], t[i], a + b * sz[i]);
    }
    return OP_OK;
}

int op_exec_pingpong_pairs(op_xport *x, int64_t large, int iters, double *lat_ms, double *bw_GBps,
                           op_err *err) {
    const int P = x->size;
    const int64_t small = 8;
    if (P < 2) return op_errf(err, OP_EINVAL, "profile comm needs 2 ranks (got %d)", P);
    if (large <= small) large = 2 * small;
    if (iters < 1) iters = 1;
    char *buf = op_xcalloc((size_t)large, 1);
    /* this rank's measurements as the lower rank of a pair: {a, b, t_small, t_large} each */
    double *mine = op_xcalloc((size_t)P * 4, sizeof(double));
    int nm = 0;
    op_exec_timer_slack_fine();
    for (int a = 0; a < P; a++)
        for (int b = a + 1; b < P; b++) {
            x->barrier(x); /* one pair at a time: the others must not load the link or the cores */
            if (x->rank != a && x->rank != b) continue;
            double ts = round_trip_ms(x, buf, small, a, b, iters, 2, 0);
            double tl = round_trip_ms(x, buf, large, a, b, iters, 2, 0);
            if (x->rank == a) {
                double *m = mine + (size_t)nm++ * 4;
                m[0] = a, m[1] = b, m[2] = ts, m[3] = tl;
            }
        }
    free(buf);
    void **got = x->rank == 0 ? op_xcalloc((size_t)P, sizeof(void *)) : NULL;
    int64_t *lens = x->rank == 0 ? op_xcalloc((size_t)P, sizeof(int64_t)) : NULL;
    x->gather(x, mine, (int64_t)nm * 4 * (int64_t)sizeof(double), got, lens);
    free(mine);
    if (x->rank != 0) return OP_OK;
    for (int i = 0; i < P * P; i++) lat_ms[i] = 0, bw_GBps[i] = 0;
    for (int r = 0; r < P; r++) {
        const double *m = got[r];
        for (int64_t k = 0; k + 4 <= lens[r] / (int64_t)sizeof(double); k += 4) {
            int a = (int)m[k], b = (int)m[k + 1];
            double ts = m[k + 2], tl = m[k + 3];
            /* t = lat + n / bw through the two points; a large message no slower than a small
             * one (noise) bounds the link by the large message alone */
            double per_byte = tl > ts ? (tl - ts) / (double)(large - small) : tl / (double)large;
            double lat = fmax(ts - per_byte * (double)small, 0);
            double bw = 1.0 / fmax(per_byte, 1e-15) * 1e3 / 1e9;
            lat_ms[a * P + b] = lat_ms[b * P + a] = lat;
            bw_GBps[a * P + b] = bw_GBps[b * P + a] = bw;
        }
        free(got[r]);
    }
    for (int d = 0; d < P; d++) bw_GBps[d * P + d] = 1; /* unused (no link to itself); > 0 */
    free(got);
    free(lens);
    return OP_OK;
}
