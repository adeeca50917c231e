/* split.c: the partitions a Megatron (or Zero Bubble) user can express, as candidate splits.
 *
 * Megatron counts only decoder layers ("body") in its even split; the embedding (and any vision
 * encoder in front of it) rides on the first stage and the head + loss (and MTP) on the last.
 * The options a user tries (Megatron-LM's arguments):
 *   - plain even split: N % (P*v) == 0;
 *   - account_for_embedding / _loss_in_pipeline_split: the embedding and/or loss count as one
 *     layer each: (N + k) % (P*v) == 0, and the first / last virtual stage gets one layer fewer;
 *   - --decoder-first/last-pipeline-num-layers f, l: rank 0 gets f and rank P-1 gets l layers,
 *     the middle ranks an even split of the rest; f, l and the middle count divisible by v, and
 *     each rank's layers spread evenly over its v chunks.
 * Zero Bubble's --allow-padding-num-layers (first/last stage one layer fewer) is the same shape
 * as the account_for options, which is how V placements use it. */
#include <stdlib.h>
#include <string.h>

#include "sched/sched_int.h"

int sched_stage_dev(sched_place pl, int P, int s) {
    if (pl == SCHED_PLACE_LOOP) return s % P;
    return s < P ? s : 2 * P - 1 - s;
}

void sched_layout_of(const op_layer_cost *layers, int n, sched_layout *lo) {
    /* pre: leading vision layers up to and including the embedding; post: trailing MTP + head */
    int pre = 0;
    for (int l = 0; l < n; l++) {
        if (layers[l].sym == 'E') { pre = l + 1; break; }
        if (layers[l].sym != 'V') break;
    }
    int post = 0;
    int has_head = 0;
    for (int l = n - 1; l >= pre; l--) {
        if (layers[l].sym == 'L') has_head = 1;
        else if (layers[l].sym != 'm') break;
        post = n - l;
    }
    if (!has_head) post = 0;
    lo->n_pre = pre;
    lo->n_post = post;
    lo->n_body = n - pre - post;
}

void sched_split_list_free(sched_split_list *l) {
    free(l->v);
    op_arena_free(&l->arena);
    memset(l, 0, sizeof *l);
}

static sched_split *push(sched_split_list *l, int S) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->v = op_xrealloc(l->v, sizeof *l->v * (size_t)l->cap);
    }
    sched_split *sp = &l->v[l->n++];
    memset(sp, 0, sizeof *sp);
    sp->S = S;
    sp->first = OP_ARENA_NEW(&l->arena, int, S + 1);
    return sp;
}

/* Prefix sums of F + I + W over the layers, [n+1]: a stage's time in O(1), so that thousands
 * of layers and candidates stay fast.  Caller frees. */
static double *prefix_ms(const op_problem *pr) {
    double *pre = op_xmalloc(sizeof(double) * (size_t)(pr->n_layers + 1));
    pre[0] = 0;
    for (int l = 0; l < pr->n_layers; l++)
        pre[l + 1] = pre[l] + pr->layers[l].f_ms + pr->layers[l].i_ms + pr->layers[l].w_ms;
    return pre;
}

/* (M-1) * busiest device + one pass through the pipeline / chunks: 1F1B-shaped estimate. */
static double proxy_of(const op_problem *pr, const double *pre, const int *first, int S,
                       sched_place pl) {
    double load[1024] = {0}, *ld = load, total = 0;
    if (pr->P > 1024) ld = op_xcalloc((size_t)pr->P, sizeof *ld);
    for (int s = 0; s < S; s++) {
        double t = pre[first[s + 1]] - pre[first[s]] + 2 * pr->op_overhead_ms;
        ld[sched_stage_dev(pl, pr->P, s)] += t;
        total += t;
    }
    double mx = 0;
    for (int d = 0; d < pr->P; d++) mx = ld[d] > mx ? ld[d] : mx;
    if (ld != load) free(ld);
    return (pr->M - 1) * mx + total * pr->P / S;
}

/* Turns per-stage body counts into a split; 0 if some stage would be empty. */
static int counts_to_split(const op_problem *pr, const double *pre, const sched_layout *lo,
                           const int *cnt, int S, sched_place pl, const char *desc,
                           sched_split_list *out) {
    for (int s = 0; s < S; s++) {
        int n = cnt[s] + (s == 0 ? lo->n_pre : 0) + (s == S - 1 ? lo->n_post : 0);
        if (cnt[s] < 0 || n < 1) return 0;
    }
    sched_split *sp = push(out, S);
    sp->first[0] = 0;
    for (int s = 0; s < S; s++)
        sp->first[s + 1] = sp->first[s] + cnt[s] + (s == 0 ? lo->n_pre : 0) +
                           (s == S - 1 ? lo->n_post : 0);
    OP_ASSERT(sp->first[S] == pr->n_layers, "split covers %d of %d layers", sp->first[S],
              pr->n_layers);
    snprintf(sp->desc, sizeof sp->desc, "%s", desc);
    sp->proxy = proxy_of(pr, pre, sp->first, S, pl);
    return 1;
}

static int cmp_proxy(const void *a, const void *b) {
    const sched_split *x = a, *y = b;
    if (x->proxy != y->proxy) return x->proxy < y->proxy ? -1 : 1;
    return strcmp(x->desc, y->desc);
}

int sched_megatron_splits(const op_problem *pr, int S, sched_place pl, int first_last,
                          int keep_fl, sched_split_list *out) {
    sched_layout lo;
    sched_layout_of(pr->layers, pr->n_layers, &lo);
    int N = lo.n_body, P = pr->P, v = S / P;
    OP_ASSERT(S % P == 0 && S >= P, "S=%d not a multiple of P=%d", S, P);
    int *cnt = op_xcalloc((size_t)S, sizeof *cnt);
    double *pre = prefix_ms(pr);
    int before = out->n;
    /* plain and account_for options; k extra "layers" for embedding and/or loss */
    for (int opt = 0; opt < 4; opt++) {
        int emb = opt & 1, loss = (opt >> 1) & 1;
        if ((emb && lo.n_pre == 0) || (loss && lo.n_post == 0)) continue;
        int k = emb + loss;
        if ((N + k) % S) continue;
        int c = (N + k) / S;
        for (int s = 0; s < S; s++) cnt[s] = c;
        if (emb) cnt[0]--;
        if (loss) cnt[S - 1]--;
        const char *desc = opt == 0 ? "even"
                           : pl == SCHED_PLACE_V
                               ? (opt == 1 ? "pad first" : opt == 2 ? "pad last" : "pad first+last")
                               : (opt == 1 ? "account_for_embedding"
                                  : opt == 2 ? "account_for_loss"
                                             : "account_for_embedding+loss");
        counts_to_split(pr, pre, &lo, cnt, S, pl, desc, out);
    }
    if (first_last && S >= 2 && (pl == SCHED_PLACE_V || P >= 2)) {
        /* loop: rank 0 / rank P-1 totals f / l spread over their v chunks, middle ranks k;
         * V (no Megatron equivalent; the same allowance for the V baselines): stage 0 (with
         * the embedding) gets f, stage S-1 (with the head) l, every other stage k */
        int step = pl == SCHED_PLACE_LOOP ? v : 1;
        int mids = pl == SCHED_PLACE_LOOP ? (P - 2) * v : S - 2;
        sched_split_list fl = {0};
        for (int f = 0; f <= N; f += step)
            for (int l = 0; f + l <= N; l += step) {
                int rest = N - f - l, k;
                if (mids <= 0) {
                    if (rest) continue;
                    k = 0;
                } else {
                    if (rest % mids) continue;
                    k = rest / mids * (pl == SCHED_PLACE_LOOP ? v : 1);
                    if (f == k && l == k) continue; /* that is the plain even split */
                }
                for (int s = 0; s < S; s++) {
                    if (pl == SCHED_PLACE_LOOP) {
                        int d = s % P;
                        cnt[s] = (d == 0 ? f : d == P - 1 ? l : k) / v;
                    } else {
                        cnt[s] = s == 0 ? f : s == S - 1 ? l : k;
                    }
                }
                char desc[64];
                snprintf(desc, sizeof desc, "first/last %d/%d", f, l);
                counts_to_split(pr, pre, &lo, cnt, S, pl, desc, &fl);
            }
        if (fl.n) qsort(fl.v, (size_t)fl.n, sizeof *fl.v, cmp_proxy);
        for (int i = 0; i < fl.n && i < keep_fl; i++) {
            sched_split *sp = push(out, S);
            memcpy(sp->first, fl.v[i].first, sizeof(int) * (size_t)(S + 1));
            memcpy(sp->desc, fl.v[i].desc, sizeof sp->desc);
            sp->proxy = fl.v[i].proxy;
        }
        sched_split_list_free(&fl);
    }
    free(cnt);
    free(pre);
    return out->n - before;
}

int sched_split_add_explicit(const op_problem *pr, const int *first, int S,
                             sched_split_list *out, op_err *err) {
    if (S < 1) return op_errf(err, OP_EINVAL, "explicit partition: needs at least one stage");
    if (first[0] != 0 || first[S] != pr->n_layers)
        return op_errf(err, OP_EINVAL,
                       "explicit partition: stages must cover layers 0..%d (got %d..%d)",
                       pr->n_layers, first[0], first[S]);
    for (int s = 0; s < S; s++)
        if (first[s + 1] <= first[s])
            return op_errf(err, OP_EINVAL, "explicit partition: stage %d = [%d, %d) is empty", s,
                           first[s], first[s + 1]);
    sched_split *sp = push(out, S);
    memcpy(sp->first, first, sizeof(int) * (size_t)(S + 1));
    snprintf(sp->desc, sizeof sp->desc, "explicit");
    return OP_OK;
}

/* Device loads (F+I+W) of a split under placement pl: max, and sum of squares. */
static void dev_loads(const op_problem *pr, const double *pre, const int *first, int S,
                      sched_place pl, double *ld, double *mx, double *sq) {
    for (int d = 0; d < pr->P; d++) ld[d] = 0;
    for (int s = 0; s < S; s++)
        ld[sched_stage_dev(pl, pr->P, s)] += pre[first[s + 1]] - pre[first[s]];
    *mx = *sq = 0;
    for (int d = 0; d < pr->P; d++) {
        *mx = ld[d] > *mx ? ld[d] : *mx;
        *sq += ld[d] * ld[d];
    }
}

/* Moves single stage boundaries while that lowers the busiest device's load (then the sum of
 * squared loads): a stage-balanced split can still stack two heavy stages (say the head and
 * the embedding under V placement) on one device. */
static void refine_for_devices(const op_problem *pr, int *first, int S, sched_place pl) {
    double *ld = op_xmalloc(sizeof(double) * (size_t)pr->P), mx, sq, *pre = prefix_ms(pr);
    dev_loads(pr, pre, first, S, pl, ld, &mx, &sq);
    for (int iter = 0, moved = 1; moved && iter < 100 * S; iter++) {
        moved = 0;
        for (int b = 1; b < S; b++)
            for (int dir = -1; dir <= 1; dir += 2) {
                int nb = first[b] + dir;
                if (nb <= first[b - 1] || nb >= first[b + 1]) continue;
                int old = first[b];
                first[b] = nb;
                double m2, q2;
                dev_loads(pr, pre, first, S, pl, ld, &m2, &q2);
                if (m2 < mx * (1 - 1e-12) || (m2 <= mx * (1 + 1e-12) && q2 < sq * (1 - 1e-12))) {
                    mx = m2;
                    sq = q2;
                    moved = 1;
                } else {
                    first[b] = old;
                }
            }
    }
    free(ld);
    free(pre);
}

int sched_split_add_balanced(const op_problem *pr, int S, sched_place pl, sched_split_list *out) {
    if (pr->n_layers < S) return 0;
    sched_split *sp = push(out, S);
    op_err e = {0};
    int rc = op_sched_balanced_split(pr->layers, pr->n_layers, S, sp->first, &e);
    OP_ASSERT(rc == OP_OK, "balanced split of %d layers into %d: %s", pr->n_layers, S, e.msg);
    snprintf(sp->desc, sizeof sp->desc, "layout balanced");
    double *pre = prefix_ms(pr);
    sp->proxy = proxy_of(pr, pre, sp->first, S, pl);
    if (S == pr->P && pl == SCHED_PLACE_LOOP) { /* one stage per device: done */
        free(pre);
        return 1;
    }
    sched_split *dv = push(out, S);
    sp = &out->v[out->n - 2]; /* push may have moved the array */
    memcpy(dv->first, sp->first, sizeof(int) * (size_t)(S + 1));
    refine_for_devices(pr, dv->first, S, pl);
    if (!memcmp(dv->first, sp->first, sizeof(int) * (size_t)(S + 1))) {
        out->n--;
        free(pre);
        return 1;
    }
    snprintf(dv->desc, sizeof dv->desc, "layout balanced per device");
    dv->proxy = proxy_of(pr, pre, dv->first, S, pl);
    free(pre);
    return 2;
}
