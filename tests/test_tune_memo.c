/* test_tune_memo.c: the tune engine's memo of evaluated candidates (tune_memo.c) changes how
 * fast a tune runs, never what an evaluation returns.  One engine evaluates candidates drawn
 * from a small pool again and again, under cutoffs above, at and below their makespans (so a
 * stored complete run answers a give-up and a stored give-up answers a lower cutoff); every
 * answer must equal a fresh engine's, which has seen nothing.  Half the pool are twins of the
 * other half that differ only in a stage's policy or the memory reserve. */
#include "check.h"
#include "octopipe/tune.h"
#include "tune/tune_int.h"

#define MIB (1 << 20)

static op_layer_cost *layers(int n) {
    op_layer_cost *l = calloc((size_t)n, sizeof *l);
    for (int i = 0; i < n; i++) {
        snprintf(l[i].name, sizeof l[i].name, "l%d", i);
        l[i].sym = 'T';
        l[i].f_ms = 1 + 0.25 * (i % 4), l[i].i_ms = 1.5 + 0.1 * (i % 3), l[i].w_ms = 0.5;
        l[i].act_bytes = (40 + 8 * (i % 5)) * (int64_t)MIB;
        l[i].act_w_bytes = 10 * (int64_t)MIB;
        l[i].out_bytes = (2 + i % 2) * (int64_t)MIB;
        l[i].static_bytes = 100 * (int64_t)MIB;
    }
    return l;
}

static int same_res(const tn_res *a, const tn_res *b, int P) {
    int ok = a->makespan == b->makespan && a->fits == b->fits && a->peak_max == b->peak_max;
    for (int d = 0; d < P; d++)
        ok = ok && a->busy[d] == b->busy[d] && a->first_start[d] == b->first_start[d] &&
             a->last_end[d] == b->last_end[d] && a->peak[d] == b->peak[d] &&
             a->max_inflight[d] == b->max_inflight[d];
    return ok;
}

TEST(memo_answers_as_a_fresh_engine) {
    const int L = 12, P = 3, M = 6, NC = 12;
    op_layer_cost *ly = layers(L);
    op_problem pr = {0};
    pr.model = "t";
    pr.layers = ly;
    pr.n_layers = L;
    pr.P = P;
    pr.M = M;
    pr.tokens_per_mb = 4096;
    pr.comm.none = 1;
    pr.mem_limit_bytes = 900.0 * MIB; /* some candidates do not fit */
    tn_prob pb;
    tn_prob_init(&pb, &pr);
    tn_eng *e = tn_eng_new(&pb);
    tn_res r, rf;
    tn_res_alloc(&r, P);
    tn_res_alloc(&rf, P);
    tn_cand pool[12];
    double full[12];
    int twins_differ[2] = {0, 0}; /* [0] policy twins, [1] memory-reserve twins */
    op_rng rng;
    op_rng_seed(&rng, 5);
    for (int k = 0; k < NC; k++) { /* candidates and their makespans, from a fresh engine */
        tn_cand *c = &pool[k];
        tn_cand_alloc(c, &pb);
        if (k >= NC / 2) { /* a twin of an earlier one that differs in one knob: the memo
                            * must tell them apart */
            tn_cand_copy(c, &pool[k - NC / 2], &pb);
            if (k % 2) c->memres = !c->memres;
            else c->pol[0] = c->pol[0] == OP_ACT_FULL ? OP_ACT_KEEP : OP_ACT_FULL;
            tn_eng *f = tn_eng_new(&pb);
            full[k] = tn_eval(f, &pb, c, &rf, NULL, NULL, 0);
            tn_eng_free(f);
            twins_differ[k % 2] += full[k] != full[k - NC / 2];
            continue;
        }
        int S = P * (1 + (k % 2 ? 1 : op_rng_int(&rng, 2))); /* V: two stages a device */
        if (k % 2) tn_place_v(c, P, S);
        else tn_place_loop(c, P, S);
        tn_partition_balanced(&pb, c, 0);
        c->split = op_rng_int(&rng, 2);
        c->fmode = op_rng_int(&rng, 3);
        c->look = op_rng_int(&rng, 4);
        for (int d = 0; d < P; d++) c->cap[d] = k % 2 ? 0 : op_rng_int(&rng, 4);
        tn_eng *f = tn_eng_new(&pb);
        full[k] = tn_eval(f, &pb, c, &rf, NULL, NULL, 0);
        tn_eng_free(f);
        CHECK(full[k] > 0);
    }
    CHECK_MSG(twins_differ[0] > 0 && twins_differ[1] > 0, "twins differ: %d policy, %d reserve",
              twins_differ[0], twins_differ[1]); /* else they test nothing */
    int gave_up = 0, complete = 0, nofit = 0;
    for (int it = 0; it < 400; it++) {
        int k = op_rng_int(&rng, NC);
        static const double f[] = {0, 0.5, 0.8, 0.95, 1.0, 1.05, 2.0};
        double cut = f[op_rng_int(&rng, 7)] * full[k];
        double got = tn_eval(e, &pb, &pool[k], &r, NULL, NULL, cut);
        tn_eng *fresh = tn_eng_new(&pb);
        double want = tn_eval(fresh, &pb, &pool[k], &rf, NULL, NULL, cut);
        tn_eng_free(fresh);
        CHECK_MSG(got == want, "candidate %d cutoff %g: %g vs %g", k, cut, got, want);
        if (want == -2) {
            gave_up++;
        } else {
            complete++;
            nofit += !rf.fits;
            CHECK(same_res(&r, &rf, P));
        }
    }
    CHECK(gave_up > 50 && complete > 50 && nofit > 0); /* every path was taken */
    for (int k = 0; k < NC; k++) tn_cand_free(&pool[k]);
    tn_res_free(&r);
    tn_res_free(&rf);
    tn_eng_free(e);
    tn_prob_free(&pb);
    free(ly);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(memo_answers_as_a_fresh_engine);
    return check_report("tune_memo");
}
