/* sched.c: the baseline registry.  Each baseline enumerates the settings its users would try
 * (split options, v and G for interleaving, ZB heuristic variants), simulates every candidate
 * and keeps the fastest that fits memory, so that OctoPipe is compared with each at its best. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "octopipe/sim.h"
#include "sched/sched_int.h"

static const char *const names[] = {"gpipe", "1f1b",      "i1f1b", "zbh1", "zbh2",
                                    "zbv",   "dualpipev", "vhalf", "vmin", "balanced-1f1b",
                                    NULL};

const char *const *op_sched_names(void) { return names; }

void sched_plan_from_split(op_plan *p, const char *name, const op_problem *pr,
                           const sched_split *sp, sched_place pl, int split_iw) {
    op_plan_init_problem(p, name, pr, sp->S);
    memcpy(p->stage_first, sp->first, sizeof(int) * (size_t)(sp->S + 1));
    for (int s = 0; s < sp->S; s++) {
        p->stage_dev[s] = sched_stage_dev(pl, pr->P, s);
        p->stage_split[s] = (uint8_t)split_iw;
    }
}

static int fits(const sched_best *b, const op_plan *p) {
    (void)b;
    return op_plan_fits(p); /* each device against its own limit */
}

void sched_offer(sched_best *best, op_plan *cand, const char *settings, void *ws) {
    op_err err = {0};
    int rc = op_sim_replay(cand, (op_sim_ws *)ws, &err);
    OP_ASSERT(rc == OP_OK, "baseline %s (%s) does not simulate: %s", cand->name, settings,
              err.msg);
    best->candidates++;
    if (getenv("OCTOPIPE_TUNE_DEBUG")) /* docs/tuner.md: one trace switch for every search */
        fprintf(stderr, "sched %s: %s -> %.3f ms, peak %lld\n", cand->name, settings,
                cand->pred.makespan_ms, (long long)cand->pred.peak_bytes_max);
    int better = !best->have;
    if (!better) {
        const op_plan *o = &best->plan;
        int fc = fits(best, cand), fo = fits(best, o);
        double a = cand->pred.makespan_ms, b = o->pred.makespan_ms, tol = 1e-9 * (b > 1 ? b : 1);
        if (fc != fo) better = fc;
        else if (!fc && cand->pred.peak_bytes_max != o->pred.peak_bytes_max)
            better = cand->pred.peak_bytes_max < o->pred.peak_bytes_max; /* closest to fitting */
        else if (a < b - tol) better = 1;
        else if (a <= b + tol) better = cand->pred.peak_bytes_max < o->pred.peak_bytes_max;
    }
    if (better) {
        if (best->have) op_plan_free(&best->plan);
        best->plan = *cand; /* moves the arena */
        best->have = 1;
        snprintf(best->settings, sizeof best->settings, "%s", settings);
    } else {
        op_plan_free(cand);
    }
    memset(cand, 0, sizeof *cand);
}

/* Candidate splits: the explicit one when given (its S must be S), else Megatron's options. */
static int splits_for(const op_problem *pr, const op_sched_opts *o, int S, sched_place pl,
                      int first_last, int keep_fl, sched_split_list *l, op_err *err) {
    if (o && o->stage_first) {
        if (o->S != S)
            return op_errf(err, OP_EINVAL, "explicit partition has %d stages, this schedule needs %d",
                           o->S, S);
        return sched_split_add_explicit(pr, o->stage_first, S, l, err);
    }
    sched_megatron_splits(pr, S, pl, first_last, keep_fl, l);
    sched_split_add_speed(pr, S, pl, l); /* mixed clusters: Metis-style speed-proportional */
    if (l->n == 0) {
        sched_layout lo;
        sched_layout_of(pr->layers, pr->n_layers, &lo);
        return op_errf(err, OP_EINVAL,
                       "no valid split of %d decoder layers (+%d before, +%d after) into %d "
                       "non-empty stages",
                       lo.n_body, lo.n_pre, lo.n_post, S);
    }
    return OP_OK;
}

/* gpipe, 1f1b: one stage per device, chain, Megatron's split options. */
static int build_chain(const char *name, const op_problem *pr, const op_sched_opts *o,
                       sched_best *best, op_sim_ws *ws, op_err *err) {
    sched_split_list l = {0};
    int rc = splits_for(pr, o, pr->P, SCHED_PLACE_LOOP, 1, 8, &l, err);
    if (!(o && (o->stage_first || o->classic_splits))) {
        /* --pipeline-model-parallel-layout: what a user writes when layers do not divide */
        if (rc != OP_OK && sched_split_add_balanced(pr, pr->P, SCHED_PLACE_LOOP, &l)) rc = OP_OK;
        else if (rc == OP_OK) sched_split_add_balanced(pr, pr->P, SCHED_PLACE_LOOP, &l);
    }
    for (int i = 0; rc == OP_OK && i < l.n; i++) {
        op_plan p;
        sched_plan_from_split(&p, name, pr, &l.v[i], SCHED_PLACE_LOOP, 0);
        if (!strcmp(name, "gpipe")) sched_order_gpipe(&p);
        else op_sched_order_1f1b(&p);
        char set[160];
        snprintf(set, sizeof set, "split=%s", l.v[i].desc);
        sched_offer(best, &p, set, ws);
    }
    sched_split_list_free(&l);
    return rc;
}

/* Interleave degrees tried: every v up to 16, then steps of about 1.5x and the largest, since
 * thousands of layers would otherwise mean thousands of degrees, each a full split search. */
static int next_v(int v, int vhi) {
    if (v < 16 || v >= vhi) return v + 1;
    int n = v * 3 / 2;
    return n < vhi ? n : vhi;
}

/* Megatron: P <= G <= M, and M % G == 0 or M % G >= P. */
static int group_ok(int P, int M, int G) { return G >= P && G <= M && (M % G == 0 || M % G >= P); }

static int build_i1f1b(const op_problem *pr, const op_sched_opts *o, sched_best *best,
                       op_sim_ws *ws, op_err *err) {
    int P = pr->P, M = pr->M;
    if (P < 2) return op_errf(err, OP_EINVAL, "interleaved 1F1B needs at least 2 devices");
    if (M < P)
        return op_errf(err, OP_EINVAL,
                       "interleaved 1F1B needs microbatches >= devices (Megatron: P <= G <= M; "
                       "M=%d, P=%d)", M, P);
    /* G candidates: Megatron's default P when valid (else the smallest valid G), the next
     * valid one, the first valid G >= 2P and one group of all M: larger groups deepen the
     * warm-up, which hides transfers at the price of memory. */
    int gs[4] = {0, 0, 0, 0}, ng = 0;
    if (o && o->group) {
        if (!group_ok(P, M, o->group))
            return op_errf(err, OP_EINVAL,
                           "microbatch group size %d invalid for P=%d M=%d (Megatron needs "
                           "P <= G <= M and M %% G == 0 or >= P)", o->group, P, M);
        gs[ng++] = o->group;
    } else {
        for (int G = P; G <= M; G++) {
            if (!group_ok(P, M, G)) continue;
            if (ng < 2 || (ng == 2 && G >= 2 * P)) gs[ng++] = G;
        }
        if (ng && group_ok(P, M, M) && gs[ng - 1] != M) gs[ng++] = M;
        if (!ng) return op_errf(err, OP_EINVAL, "no Megatron-valid group size for P=%d M=%d", P, M);
    }
    sched_layout lo;
    sched_layout_of(pr->layers, pr->n_layers, &lo);
    int classic = o && (o->classic_splits || o->stage_first);
    int vlo = 2, vhi = classic ? (lo.n_body + 2) / P : pr->n_layers / P;
    if (o && o->v) {
        if (o->v < 2) return op_errf(err, OP_EINVAL, "interleaved 1F1B needs v >= 2 (got %d)", o->v);
        /* before v * P is formed: v = INT_MAX overflowed it */
        if (o->v > pr->n_layers / P)
            return op_errf(err, OP_EINVAL,
                           "interleaved 1F1B with v=%d needs %lld stages: %d layers cannot fill them",
                           o->v, (long long)o->v * P, pr->n_layers);
        vlo = vhi = o->v;
    }
    if (o && o->stage_first) {
        if (o->S % P || o->S / P < 2)
            return op_errf(err, OP_EINVAL,
                           "explicit partition for i1f1b needs S = v*P stages with v >= 2 (S=%d)",
                           o->S);
        vlo = vhi = o->S / P;
    }
    char why[1100] = "";
    for (int v = vlo; v <= vhi; v = next_v(v, vhi)) {
        sched_split_list l = {0};
        op_err e2 = {0};
        int rc = splits_for(pr, o, v * P, SCHED_PLACE_LOOP, 1, 4, &l, &e2);
        if (rc != OP_OK && o && o->stage_first) {
            sched_split_list_free(&l);
            return op_errf(err, rc, "%s", e2.msg);
        }
        if (rc != OP_OK) snprintf(why, sizeof why, "v=%d: %.1000s", v, e2.msg);
        if (!(o && (o->stage_first || o->classic_splits)))
            sched_split_add_balanced(pr, v * P, SCHED_PLACE_LOOP, &l);
        if (l.n == 0) {
            sched_split_list_free(&l);
            continue;
        }
        for (int i = 0; i < l.n; i++)
            for (int g = 0; g < ng; g++) {
                op_plan p;
                sched_plan_from_split(&p, "i1f1b", pr, &l.v[i], SCHED_PLACE_LOOP, 0);
                op_sched_order_interleaved(&p, v, gs[g]);
                char set[160];
                snprintf(set, sizeof set, "v=%d G=%d split=%s", v, gs[g], l.v[i].desc);
                sched_offer(best, &p, set, ws);
            }
        sched_split_list_free(&l);
    }
    if (!best->have) {
        if (vlo > vhi)
            return op_errf(err, OP_EINVAL,
                           "interleaved 1F1B needs at least 2 stages per device: %d layers "
                           "cannot fill %d stages", classic ? lo.n_body : pr->n_layers, 2 * P);
        return op_errf(err, OP_EINVAL, "interleaved 1F1B not applicable: %s", why);
    }
    return OP_OK;
}

/* Squeezes the kept plan's order (sched_polish) within a budget of about OP_POLISH_STEPS
 * simulated ops, and notes it in the settings. */
#define OP_POLISH_STEPS 2e6
static void polish_best(sched_best *best, op_sim_ws *ws) {
    op_plan *p = &best->plan;
    long ops = 0;
    for (int d = 0; d < p->P; d++) ops += p->n_ops[d];
    long sims = (long)(OP_POLISH_STEPS / (double)(ops > 0 ? ops : 1));
    if (sims < 1) return;
    int kept = sched_polish(p, sims, 0, ws);
    best->candidates++;
    if (kept) {
        size_t n = strlen(best->settings);
        snprintf(best->settings + n, sizeof best->settings - n, " +%d swaps", kept);
    }
}

/* Whether simulated plan p holds at most cap microbatches of each device's activations
 * (static bytes aside). */
static int within_inflight(const op_plan *p, double cap) {
    for (int d = 0; d < p->P; d++) {
        double per_mb = 0, trans = 0; /* I's transient comes on top, as in 1F1B's own peak */
        for (int s = 0; s < p->S; s++)
            if (p->stage_dev[s] == d) {
                double a = (double)op_stage_act_bytes(p, s), aw = (double)op_stage_act_w_bytes(p, s);
                double ai = (double)op_stage_act_i_bytes(p, s);
                per_mb += a > aw ? a : aw;
                trans = ai > trans ? ai : trans;
            }
        double act = (double)(p->pred.peak_bytes[d] - p->pred.static_bytes[d]);
        if (act > (cap * per_mb + trans) * (1 + 1e-9) + 1) return 0;
    }
    return 1;
}

/* One greedy candidate: split sp, heuristic flags, in-flight cap (microbatches of a device's
 * layers, the --zero-bubble-max-pending-backward knob). */
static void zb_try(const char *name, const op_problem *pr, const sched_split *sp, sched_place pl,
                   double cap, int flags, sched_best *best, op_sim_ws *ws) {
    double *caps = op_xmalloc(sizeof(double) * (size_t)pr->P);
    for (int d = 0; d < pr->P; d++) caps[d] = cap;
    op_plan p;
    sched_plan_from_split(&p, name, pr, sp, pl, 1);
    op_sched_zb_greedy(&p, caps, pr->mem_limit_bytes, flags);
    char set[200];
    snprintf(set, sizeof set, "split=%.60s order=greedy(%s,%s%s%s) inflight=%g", sp->desc,
             flags & OP_ZB_F_FIRST ? "F first" : "I first",
             flags & OP_ZB_W_EAGER ? "eager W" : flags & OP_ZB_W_LOOKAHEAD ? "lookahead W" : "lazy W",
             flags & OP_ZB_F_SHALLOW ? ",shallow F" : "", flags & OP_ZB_PER_CHUNK ? ",per chunk" : "",
             cap);
    sched_offer(best, &p, set, ws);
    free(caps);
}

/* ZB-V's own auto-scheduler (zbv_rounds.c) on split sp: planned with the stages' mean F / I /
 * W as its one scalar each (what its users profile), both W-filling options, re-timed here on
 * the real stage costs.  For zbv its own memory rule (2 cap chunks in flight) is ZB-V's
 * definition; vhalf / vmin keep it only when it holds at most cap microbatches in bytes. */
static void zbv_rounds_try(const char *name, const op_problem *pr, const sched_split *sp,
                           double cap, sched_best *best, op_sim_ws *ws) {
    for (int fill = 0; fill < 4; fill++) {
        op_plan p;
        sched_plan_from_split(&p, name, pr, sp, SCHED_PLACE_V, 1);
        double c[3] = {0, 0, 0}, a = 0, aw = 0;
        for (int s = 0; s < p.S; s++) {
            c[0] += op_stage_ms(&p, s, OP_F) / p.S;
            c[1] += op_stage_ms(&p, s, OP_I) / p.S;
            c[2] += op_stage_ms(&p, s, OP_W) / p.S;
            a += (double)op_stage_act_bytes(&p, s);
            aw += (double)op_stage_act_w_bytes(&p, s);
        }
        double wf = a > 0 ? aw / a : 0.5;
        wf = wf < 0 ? 0 : wf > 1 ? 1 : wf;
        op_err e2 = {0};
        if (sched_zbv_rounds(&p, c, wf, cap, fill & 1, fill >> 1, 16) == OP_OK &&
            op_sim_replay(&p, ws, &e2) == OP_OK &&
            (!strcmp(name, "zbv") || within_inflight(&p, cap))) {
            char set[160];
            snprintf(set, sizeof set, "split=%s order=zbv auto(fill F %s, fill I %s)", sp->desc,
                     fill & 1 ? "on" : "off", fill >> 1 ? "on" : "off");
            sched_offer(best, &p, set, ws);
        } else {
            op_plan_free(&p);
        }
    }
}

/* The V constructions on split sp: ZB-V's auto-scheduler, and for vhalf / vmin the
 * controllable-memory papers' own V-Min / V-Half patterns (either may fit the cap). */
static void v_constructive(const char *name, const op_problem *pr, const sched_split *sp,
                           double cap, sched_best *best, op_sim_ws *ws) {
    zbv_rounds_try(name, pr, sp, cap, best, ws);
    for (int half = 0; half < 2 && strcmp(name, "zbv"); half++) {
        op_plan p;
        sched_plan_from_split(&p, name, pr, sp, SCHED_PLACE_V, 1);
        op_err e2 = {0};
        if (sched_order_vstable(&p, half) == OP_OK && op_sim_replay(&p, ws, &e2) == OP_OK &&
            within_inflight(&p, cap)) {
            char set[160];
            snprintf(set, sizeof set, "split=%s order=%s pattern", sp->desc,
                     half ? "V-Half" : "V-Min");
            sched_offer(best, &p, set, ws);
        } else {
            op_plan_free(&p);
        }
    }
}

/* Heuristic variants worth a run: eager W makes the lookahead moot; on large problems (over
 * 50k ops) only the I/F-first x lazy/eager x per-chunk variants, keeping the baselines a small
 * share of the tuner's time. */
static int flags_worth(int f, const op_problem *pr, int S) {
    if ((f & OP_ZB_W_EAGER) && (f & OP_ZB_W_LOOKAHEAD)) return 0;
    if (3.0 * S * pr->M > 5e4 && (f & (OP_ZB_F_SHALLOW | OP_ZB_W_LOOKAHEAD))) return 0;
    return 1;
}

/* zbh1 / zbh2 / zbv: I/W split, ZB's split options, best of the heuristic variants.  The
 * in-flight limit is the schedule's memory definition (P microbatches for H1 and V, 2P for
 * H2); a user short of memory lowers it, so lower limits are tried when nothing fits. */
static int build_zb(const char *name, const op_problem *pr, const op_sched_opts *o,
                    sched_best *best, op_sim_ws *ws, op_err *err) {
    int P = pr->P, v_shape = !strcmp(name, "zbv") || !strcmp(name, "vhalf") || !strcmp(name, "vmin");
    int S = v_shape ? 2 * P : P;
    sched_place pl = v_shape ? SCHED_PLACE_V : SCHED_PLACE_LOOP;
    /* controllable-memory V: (P+2)/2 (V-Half) or (P+4)/3 (V-Min) microbatches in flight */
    double cap = !strcmp(name, "zbh2")    ? 2.0 * P
                 : !strcmp(name, "vhalf") ? (double)((P + 2) / 2)
                 : !strcmp(name, "vmin")  ? (double)((P + 4) / 3)
                                          : (double)P;
    sched_split_list l = {0};
    int rc = splits_for(pr, o, S, pl, 1, 4, &l, err);
    if (!(o && (o->stage_first || o->classic_splits))) {
        /* ZB runs on Megatron: a layout is one flag away */
        if (rc != OP_OK && sched_split_add_balanced(pr, S, pl, &l)) rc = OP_OK;
        else if (rc == OP_OK) sched_split_add_balanced(pr, S, pl, &l);
    }
    int base = v_shape ? OP_ZB_PER_CHUNK : 0;
    /* The V constructions are kept apart (bnew) and polished on their own, then the better of
     * the two polished plans is kept: the greedy's path stays what it was, so no case gets
     * slower.  Over 50k ops they run on the best split only (time: see flags_worth). */
    int large = 3.0 * S * pr->M > 5e4;
    sched_best bnew;
    memset(&bnew, 0, sizeof bnew);
    for (int i = 0; rc == OP_OK && i < l.n; i++) {
        if (!v_shape) {
            /* the handcrafted ZB-H1 pattern holds at most P microbatches: valid for H2 too */
            op_plan p;
            char set[160];
            sched_plan_from_split(&p, name, pr, &l.v[i], pl, 1);
            sched_order_zbh1(&p);
            snprintf(set, sizeof set, "split=%s order=handcrafted", l.v[i].desc);
            sched_offer(best, &p, set, ws);
        }
        for (int var = 0; var < 3 && !strcmp(name, "zbv") && pr->M >= 2 * P; var++) {
            /* the V pattern of the Zero Bubble paper's ZB-V figure, as DualPipeV's steps
             * write it (and two orders of its steady step): kept when it holds no more than
             * ZB-V's memory (P microbatches) */
            op_plan p;
            sched_plan_from_split(&p, name, pr, &l.v[i], pl, 1);
            OP_ASSERT(sched_order_vpattern(&p, var) == OP_OK, "V pattern with M >= 2P failed");
            op_err e2 = {0};
            if (op_sim_replay(&p, ws, &e2) == OP_OK && within_inflight(&p, cap)) {
                char set[160];
                snprintf(set, sizeof set, "split=%s order=V pattern %d", l.v[i].desc, var);
                sched_offer(best, &p, set, ws);
            } else {
                op_plan_free(&p);
            }
        }
        if (v_shape && !large) v_constructive(name, pr, &l.v[i], cap, &bnew, ws);
        /* every split with ZB's default variant (I first, lazy W, deeper F first) */
        zb_try(name, pr, &l.v[i], pl, cap, base, best, ws);
        if (cap > P) zb_try(name, pr, &l.v[i], pl, P, base, best, ws);
    }
    /* then all heuristic variants on the best split, as ZB's initial_solution does */
    if (rc == OP_OK && best->have) {
        sched_split sp = {.S = S};
        sp.first = op_xmalloc(sizeof(int) * (size_t)(S + 1));
        memcpy(sp.first, best->plan.stage_first, sizeof(int) * (size_t)(S + 1));
        const char *d0 = strstr(best->settings, "split=");
        snprintf(sp.desc, sizeof sp.desc, "%s", d0 ? d0 + 6 : "?");
        char *cut = strstr(sp.desc, " order=");
        if (cut) *cut = 0;
        if (v_shape && large) v_constructive(name, pr, &sp, cap, &bnew, ws);
        int nflags = v_shape ? 32 : 8;
        for (int f = 0; f < nflags; f++)
            if (flags_worth(f, pr, S)) zb_try(name, pr, &sp, pl, cap, f, best, ws);
        /* short of memory: lower the in-flight limit, as a ZB user would */
        for (double c = cap - 1; c >= 1 && !(best->have && (pr->mem_limit_bytes <= 0 ||
                                   (double)best->plan.pred.peak_bytes_max <= pr->mem_limit_bytes));
             c = c > 4 ? floor(c * 0.75) : c - 1)
            for (int f = 0; f < nflags; f++)
                if (flags_worth(f, pr, S)) zb_try(name, pr, &sp, pl, c, f, best, ws);
        free(sp.first);
        polish_best(best, ws);
    }
    if (bnew.have) {
        polish_best(&bnew, ws);
        best->candidates += bnew.candidates - 1; /* sched_offer counts the one it is given */
        sched_offer(best, &bnew.plan, bnew.settings, ws);
    }
    sched_split_list_free(&l);
    return rc;
}

static int build_dualpipev(const op_problem *pr, const op_sched_opts *o, sched_best *best,
                           op_sim_ws *ws, op_err *err) {
    if (pr->M < 2 * pr->P)
        return op_errf(err, OP_EINVAL, "DualPipeV needs microbatches >= 2 x devices (M=%d < %d)",
                       pr->M, 2 * pr->P);
    sched_split_list l = {0};
    int rc = splits_for(pr, o, 2 * pr->P, SCHED_PLACE_V, 1, 4, &l, err);
    if (!(o && (o->stage_first || o->classic_splits))) {
        /* DualPipe users build each stage's modules by hand */
        if (rc != OP_OK && sched_split_add_balanced(pr, 2 * pr->P, SCHED_PLACE_V, &l)) rc = OP_OK;
        else if (rc == OP_OK) sched_split_add_balanced(pr, 2 * pr->P, SCHED_PLACE_V, &l);
    }
    for (int i = 0; rc == OP_OK && i < l.n; i++) {
        op_plan p;
        sched_plan_from_split(&p, "dualpipev", pr, &l.v[i], SCHED_PLACE_V, 1);
        OP_ASSERT(sched_order_dualpipev(&p) == OP_OK, "dualpipev order with M >= 2P failed");
        char set[160];
        snprintf(set, sizeof set, "split=%s", l.v[i].desc);
        sched_offer(best, &p, set, ws);
    }
    sched_split_list_free(&l);
    return rc;
}

static int build_balanced(const op_problem *pr, const op_sched_opts *o, sched_best *best,
                          op_sim_ws *ws, op_err *err) {
    sched_split_list l = {0};
    int rc;
    if (o && o->stage_first) {
        rc = splits_for(pr, o, pr->P, SCHED_PLACE_LOOP, 0, 0, &l, err);
    } else {
        int *first = op_xmalloc(sizeof(int) * (size_t)(pr->P + 1));
        rc = op_sched_balanced_split(pr->layers, pr->n_layers, pr->P, first, err);
        if (rc == OP_OK) rc = sched_split_add_explicit(pr, first, pr->P, &l, err);
        if (rc == OP_OK) snprintf(l.v[0].desc, sizeof l.v[0].desc, "balanced F+I+W");
        free(first);
    }
    if (rc == OP_OK) {
        op_plan p;
        sched_plan_from_split(&p, "balanced-1f1b", pr, &l.v[0], SCHED_PLACE_LOOP, 0);
        op_sched_order_1f1b(&p);
        char set[160];
        snprintf(set, sizeof set, "split=%s", l.v[0].desc);
        sched_offer(best, &p, set, ws);
    }
    sched_split_list_free(&l);
    return rc;
}

static int check_problem(const op_problem *pr, op_err *err) {
    if (op_problem_validate(pr, err) != OP_OK) return OP_EINVAL;
    if (!pr || !pr->layers || pr->n_layers < 1)
        return op_errf(err, OP_EINVAL, "problem has no layers");
    if (pr->P < 1) return op_errf(err, OP_EINVAL, "devices must be >= 1 (got %d)", pr->P);
    if (pr->M < 1) return op_errf(err, OP_EINVAL, "microbatches must be >= 1 (got %d)", pr->M);
    if (pr->mem_limit_bytes < 0)
        return op_errf(err, OP_EINVAL, "memory limit must be >= 0 (got %g)", pr->mem_limit_bytes);
    return OP_OK;
}

int op_sched_build_opts(const char *name, const op_problem *pr, const op_sched_opts *o,
                        op_plan *out, op_sched_info *info, op_err *err) {
    memset(out, 0, sizeof *out);
    int rc = check_problem(pr, err);
    if (rc != OP_OK) return rc;
    if (!name) return op_errf(err, OP_EINVAL, "no schedule name");
    sched_best best;
    memset(&best, 0, sizeof best);
    op_sim_ws *ws = op_sim_ws_new();
    if (!strcmp(name, "gpipe") || !strcmp(name, "1f1b")) rc = build_chain(name, pr, o, &best, ws, err);
    else if (!strcmp(name, "i1f1b")) rc = build_i1f1b(pr, o, &best, ws, err);
    else if (!strcmp(name, "zbh1") || !strcmp(name, "zbh2") || !strcmp(name, "zbv") ||
             !strcmp(name, "vhalf") || !strcmp(name, "vmin"))
        rc = build_zb(name, pr, o, &best, ws, err);
    else if (!strcmp(name, "dualpipev")) rc = build_dualpipev(pr, o, &best, ws, err);
    else if (!strcmp(name, "balanced-1f1b")) rc = build_balanced(pr, o, &best, ws, err);
    else
        rc = op_errf(err, OP_EINVAL,
                     "unknown schedule '%s' (known: gpipe, 1f1b, i1f1b, zbh1, zbh2, zbv, "
                     "dualpipev, vhalf, vmin, balanced-1f1b)", name);
    op_sim_ws_free(ws);
    if (rc != OP_OK) {
        if (best.have) op_plan_free(&best.plan);
        return rc;
    }
    OP_ASSERT(best.have, "schedule %s produced no candidate", name);
    *out = best.plan;
    if (info) {
        snprintf(info->settings, sizeof info->settings, "%s", best.settings);
        info->candidates = best.candidates;
    }
    return OP_OK;
}

int op_sched_build(const char *name, const op_problem *pr, op_plan *out, op_err *err) {
    return op_sched_build_opts(name, pr, NULL, out, NULL, err);
}
