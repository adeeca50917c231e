/* tune_mixed_affinity.c: the search of op_tune's affinity trial (tn_mixed_affinity): on a
 * two-type cluster, from layouts that give the slow devices the layers they are least slow at.
 *
 * Why: the slow type is not uniformly slow.  An A100 runs Nemotron-H's Mamba layers 2.69x
 * slower than an H100 and its MLP layers 2.83x; Qwen2-VL's ViT blocks 2.35x, its decoders
 * 2.81x.  A balanced plan gives each slow device about its share of the work, and with whole
 * layers that share is best made of the kinds with the smallest ratio.  Those layers are seldom
 * contiguous (Nemotron-H alternates Mamba and MLP), so such a plan has a stage per slow layer
 * and the fast devices the runs between them: a layout that no seed and no local move leads to
 * (on 8 H100 + 8 A100 as two nodes, M=32, the search ends with a Mamba and an MLP layer on each
 * A100, the busiest devices at 1278 ms against the H100s' 1194).  As seeds they would score
 * 1722 to 2211 ms there before any search (their partitions are cut by a rule, not tuned)
 * against the pool's best 1436.6, and the pool refines only its best few; as a restart after
 * the first trial's search they led the policy trials it seeded elsewhere (tune_mem.c says
 * how), so they run as a trial of their own, last.
 *
 * The layouts: kinds (op_layer_cost.sym) in increasing slow / fast ratio, each kind's layers in
 * turn (from the last layer back, or from the first) to the slow device that holds the
 * neighbour placed before it (so a run stays one stage), else to the least loaded one, while a
 * device stays within its balanced share (every device equally busy per microbatch, each on
 * its own type) and holds at most one heavy layer (tune_mixed_heavy.h); the other layers go to
 * the fast devices, each run between slow layers cut into stages of 1, 2 or 3 layers, placed
 * least loaded first (a heavy layer on a fast device that holds none yet).  Each of those six
 * layouts (3 stage sizes x 2 directions) under the seeds' schedule knobs, then one local
 * search from its best, each with the trial's whole budget (a local search from one layout
 * ends within 2 to 3% of another's, which one by chance: on Nemotron-H above 1337.8 to
 * 1442.4 ms by layout; the six together 1335.2, against the other trials' 1364.9; half the
 * budget each, 1361.4), and one more from the best of them.
 *
 * The roomy layouts (tn_mixed_affinity_roomy, a trial of its own after that one): where some
 * devices' own limit holds two or more heavy layers and the others' one (Jamba's 47.25 GiB MoE
 * layers: two in an H200's 118.18 GiB, one in an H100's 72), those devices take the heavy
 * layers alone, up to their capacity and balanced share, and the others every light layer.  As
 * seeds in the pool such layouts moved the result only by chance (tune_mixed_cap.c); as this
 * trial, with the local search also moving each stage's policy (the roomy devices end at their
 * limit, a few recomputing), Jamba on 8 H200 + 8 H100 as two nodes, M=32, goes from 1557.6 to
 * 1499.5 ms: the H200s hold two MoE layers each, the H100s none, 63 stages.  Without the policy
 * moves 1529.4; the policy moves in the kinds' trial instead slowed five rows of bench-mixed
 * by 0.1 to 1.5%, so they stay here. */
#include <stdlib.h>
#include <string.h>

#include "tune/tune_int.h"
#include "tune/tune_mixed_heavy.h"

/* The type with the smaller total F+I+W per microbatch (*fast) and both totals (wf <= ws);
 * 0 unless there are exactly two types, some 5% apart. */
static int two_types(const tn_prob *pb, int *fast, double *wf, double *ws) {
    const op_problem *pr = pb->pr;
    if (pr->n_types != 2) return 0;
    double w[2] = {0, 0};
    int seen[2] = {0, 0};
    for (int d = 0; d < pb->P; d++) {
        int t = pr->dev_type[d];
        if (t < 0 || t > 1) return 0;
        if (!seen[t]) seen[t] = 1, w[t] = tn_mixed_work(pb, d, 0, pb->L);
    }
    if (!seen[0] || !seen[1]) return 0;
    *fast = w[0] <= w[1] ? 0 : 1;
    *wf = w[*fast];
    *ws = w[1 - *fast];
    return *ws > *wf * 1.05;
}

/* c: the affinity layout whose slow layers are taken from the last layer back (back = 1) or
 * from the first, and whose fast runs are cut into stages of `piece` layers (partition and
 * placement; knobs unset).  With cap (the roomy layouts), the "slow" devices are those whose
 * limit holds two or more heavy layers (cap[d] >= 2), which take heavy layers alone, up to
 * cap[d] each, and the others the rest.  Returns 0 where it does not apply (no slow layer, or
 * the slow layers no cheaper there than the average). */
static int layout(const tn_prob *pb, int fast, double wf, double ws, int back, int piece,
                  const int *cap, tn_cand *c) {
    const op_problem *pr = pb->pr;
    int P = pb->P, L = pb->L, nf = 0, ns = 0;
    int *fd = op_xcalloc((size_t)P, sizeof(int)), *sd = op_xcalloc((size_t)P, sizeof(int));
    int *own = op_xmalloc(sizeof(int) * (size_t)L), *hv = op_xcalloc((size_t)P, sizeof(int));
    double *load = op_xcalloc((size_t)P, sizeof(double));
    for (int d = 0; d < P; d++) {
        if (cap ? cap[d] < 2 : pr->dev_type[d] == fast) fd[nf++] = d;
        else sd[ns++] = d;
    }
    double share = wf / (nf + ns * wf / ws); /* per microbatch: nf t + ns t wf / ws = wf */
    double minlim = tn_min_dev_lim(pb);
    double kf[256] = {0}, ks[256] = {0}; /* each kind's work on the fast and the slow type */
    for (int l = 0; l < L; l++) {
        unsigned char k = (unsigned char)pr->layers[l].sym;
        kf[k] += tn_mixed_work(pb, fd[0], l, l + 1);
        ks[k] += tn_mixed_work(pb, sd[0], l, l + 1);
        own[l] = -1;
    }
    /* roomy: each heavy layer in turn to the least loaded roomy device below its cap and its
     * balanced share (heavy layers are not neighbours: no run to extend) */
    for (int i = 0; cap && i < L; i++) {
        int l = back ? L - 1 - i : i, to = -1;
        if (!tn_heavy(pr, l, minlim)) continue;
        double w = tn_mixed_work(pb, sd[0], l, l + 1);
        for (int j = 0; j < ns; j++) {
            int d = sd[j];
            if (hv[d] < cap[d] && load[d] + w <= share && (to < 0 || load[d] < load[to])) to = d;
        }
        if (to < 0) continue;
        own[l] = to;
        load[to] += w;
        hv[to]++;
    }
    char done[256] = {0};
    for (; !cap;) { /* the kinds in increasing ratio */
        int k = -1;
        for (int i = 0; i < 256; i++)
            if (!done[i] && kf[i] > 0 && (k < 0 || ks[i] * kf[k] < ks[k] * kf[i])) k = i;
        if (k < 0) break;
        done[k] = 1;
        for (int i = 0; i < L; i++) {
            int l = back ? L - 1 - i : i, nb = back ? l + 1 : l - 1; /* nb: placed just before */
            if ((unsigned char)pr->layers[l].sym != k) continue;
            double w = tn_mixed_work(pb, sd[0], l, l + 1);
            int h = minlim > 0 && tn_heavy(pr, l, minlim);
            int near = nb >= 0 && nb < L && own[nb] >= 0 && load[own[nb]] + w <= share &&
                       !(h && hv[own[nb]]);
            int to = near ? own[nb] : -1;
            for (int j = 0; j < ns && !near; j++) {
                int d = sd[j]; /* else the least loaded with room */
                if (load[d] + w <= share && !(h && hv[d]) && (to < 0 || load[d] < load[to])) to = d;
            }
            if (to < 0) continue;
            own[l] = to;
            load[to] += w;
            hv[to] |= h;
        }
    }
    double f = 0, s = 0;
    for (int l = 0; l < L; l++)
        if (own[l] >= 0) {
            f += tn_mixed_work(pb, fd[0], l, l + 1);
            s += tn_mixed_work(pb, sd[0], l, l + 1);
        }
    /* the slow devices' layers must be cheaper on the slow type, relative to the fast one, than
     * all layers are (s / f < ws / wf): without that rule the trial also ran for models of one
     * kind of layer and on 8 H200 + 8 H100 (types of about one ratio per kind), and gained
     * nothing there in `make bench-mixed` (gemma2-9b on the three clusters, every 8 H200 +
     * 8 H100 row) */
    int ok = f > 0 && (cap || s * wf < f * ws);
    int S = 0, run = 0, fdev = -1;
    for (int l = 0; l < L && ok; l++) {
        int d = own[l], h = minlim > 0 && tn_heavy(pr, l, minlim);
        if (d < 0 && run > 0 && run < piece && !(h && hv[fdev])) { /* the fast stage goes on */
            load[fdev] += tn_mixed_work(pb, fdev, l, l + 1);
            hv[fdev] |= h;
            run++;
            continue;
        }
        run = 0;
        if (d < 0) { /* a fast layer opens a stage on the least loaded fast device */
            for (int pass = 0; pass < 2 && d < 0; pass++) /* a heavy layer: one without first */
                for (int i = 0; i < nf; i++)
                    if (!(pass == 0 && h && hv[fd[i]]) && (d < 0 || load[fd[i]] < load[d]))
                        d = fd[i];
            load[d] += tn_mixed_work(pb, d, l, l + 1);
            hv[d] |= h;
            fdev = d;
            run = 1;
        } else if (l > 0 && own[l - 1] == d) {
            continue; /* the slow device's run goes on */
        }
        c->first[S] = l;
        c->dev[S++] = d;
    }
    c->S = S;
    c->first[S] = L;
    free(fd);
    free(sd);
    free(own);
    free(hv);
    free(load);
    return ok;
}

/* The six layouts (cap: the roomy ones), each under the knobs, then a local search of the
 * whole budget from each that fits, and one more from the best. */
static void search_layouts(tn_search *st, int fast, double wf, double ws, const int *cap) {
    const tn_prob *pb = st->pb;
    tn_cand c, b;
    tn_cand_alloc(&c, pb);
    tn_cand_alloc(&b, pb);
    long budget = st->max_evals;
    int searched = 0;
    for (int piece = 1; piece <= 3; piece++)
        for (int back = 1; back >= 0 && !tn_stopped(st->o); back--) {
            if (!layout(pb, fast, wf, ws, back, piece, cap, &c)) continue;
            for (int s = 0; s < c.S; s++) c.pol[s] = OP_ACT_KEEP;
            memset(c.wlim, 0, sizeof(int) * (size_t)pb->P);
            memset(c.cap, 0, sizeof(int) * (size_t)pb->P);
            c.memres = 0;
            c.ffirst = 0;
            c.imode = 0;
            double bs = 1e300;
            for (int split = 1; split >= 0; split--) /* seed_knobs' split, each F tie-break */
                for (int fm = 0; fm < 3; fm++) {
                    c.split = split;
                    c.look = split;
                    c.fmode = fm;
                    double sc = tn_score(st, &c);
                    if (sc < bs) bs = sc, tn_cand_copy(&b, &c, pb);
                }
            if (getenv("OCTOPIPE_TUNE_DEBUG"))
                fprintf(stderr, "affinity%s piece %d back %d: %d stages, seed %.3f\n",
                        cap ? " (roomy)" : "", piece, back, c.S, bs);
            /* a layout over the limit under every knob: its one-layer stages each hold their
             * microbatches in flight, and no search from it fitted (Mixtral on 8 H100 + 8 A100
             * as two nodes: 4072.0 ms against the other trials' 3915.4) */
            if (bs >= TN_NOFIT || tn_stopped(st->o)) continue;
            st->max_evals = st->evals + budget;
            tn_local_search(st, &b, budget);
            searched = 1;
            if (getenv("OCTOPIPE_TUNE_DEBUG"))
                fprintf(stderr, "affinity: best %.3f\n", st->best_score);
        }
    /* and the best of them once more, as each round of tune.c ends (Jamba on 4 H100 + 4 A100
     * without limits: 1945.9 -> 1931.6 ms; twice that budget 1931.0) */
    if (searched && st->best_score < TN_NOFIT && !tn_stopped(st->o)) {
        tn_cand_copy(&b, &st->best, pb);
        st->max_evals = st->evals + budget;
        tn_local_search(st, &b, budget);
    }
    tn_cand_free(&c);
    tn_cand_free(&b);
}

void tn_mixed_affinity(tn_search *st) {
    const tn_prob *pb = st->pb;
    int fast;
    double wf, ws;
    if (!pb->mx || st->mode != OP_TUNE_PLACE_ANY || !two_types(pb, &fast, &wf, &ws)) return;
    search_layouts(st, fast, wf, ws, NULL);
}

void tn_mixed_affinity_roomy(tn_search *st) {
    const tn_prob *pb = st->pb;
    if (!pb->mx || st->mode != OP_TUNE_PLACE_ANY) return;
    int *cap = op_xcalloc((size_t)pb->P, sizeof(int)), r = -1, o = -1;
    if (tn_heavy_caps(pb, cap) >= 2)
        for (int d = 0; d < pb->P; d++) {
            if (cap[d] >= 2 && r < 0) r = d;
            if (cap[d] < 2 && o < 0) o = d;
        }
    /* both kinds of device present: r roomy, o not (the layouts' "slow" and "fast" sides);
     * a profile of zero times has no share to balance */
    double wo = o >= 0 ? tn_mixed_work(pb, o, 0, pb->L) : 0;
    double wr = r >= 0 ? tn_mixed_work(pb, r, 0, pb->L) : 0;
    if (wo > 0 && wr > 0) search_layouts(st, pb->pr->dev_type[o], wo, wr, cap);
    free(cap);
}
