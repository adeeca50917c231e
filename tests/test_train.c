/* test_train.c: the reference model's training: stage-split and W-order equivalence (bitwise),
 * activation memory following F/I/W, data, loss going down on a synthetic task, bitwise
 * resume from a checkpoint, and refusal of corrupted checkpoints. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "octopipe/cost.h"
#include "octopipe/model.h"
#include "octopipe/train.h"

static char tmpdir[64];

static void mktmp(void) {
    if (tmpdir[0]) return;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/octopipe-nn-XXXXXX");
    OP_ASSERT(mkdtemp(tmpdir), "mkdtemp");
}

static void rmtmp(void) {
    char p[128];
    const char *names[] = {"a/model.ckpt", "b/model.ckpt", "c/model.ckpt", "bad.ckpt", "a", "b", "c"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(p, sizeof p, "%s/%s", tmpdir, names[i]);
        if (unlink(p)) rmdir(p);
    }
    rmdir(tmpdir);
}

TEST(copy_task_batches) {
    op_nn_cfg c;
    op_nn_cfg_preset("tiny", &c);
    op_train_data d;
    op_err e = {0};
    CHECK(op_train_data_open(&d, "copy", &c, 3, &e) == OP_OK);
    int N = c.batch * c.seq, T = c.seq, L = (T - 1) / 2;
    int32_t *t1 = malloc(N * 4), *g1 = malloc(N * 4), *t2 = malloc(N * 4), *g2 = malloc(N * 4);
    op_train_data_batch(&d, 5, 1, t1, g1);
    op_train_data_batch(&d, 5, 1, t2, g2);
    CHECK(!memcmp(t1, t2, N * 4) && !memcmp(g1, g2, N * 4)); /* pure function */
    op_train_data_batch(&d, 5, 2, t2, g2);
    CHECK(memcmp(t1, t2, N * 4) != 0);
    for (int b = 0; b < c.batch; b++) {
        const int32_t *tk = t1 + b * T, *tg = g1 + b * T;
        /* the scored targets are the first half again, and each is the next input token */
        int scored = 0;
        for (int t = 0; t < T; t++)
            if (tg[t] >= 0) {
                scored++;
                CHECK_EQ_INT(tg[t], tk[1 + (t - (L + 1))]);
                if (t + 1 < T) CHECK_EQ_INT(tg[t], tk[t + 1]);
            }
        CHECK_EQ_INT(scored, L);
    }
    op_train_data_free(&d);
    CHECK(op_train_data_open(&d, "/nonexistent/corpus.txt", &c, 3, &e) == OP_EIO);
    CHECK_STR_CONTAINS(e.msg, "/nonexistent/corpus.txt");
    CHECK(op_train_data_open(&d, "tests/data", &c, 3, &e) == OP_EIO);
    CHECK_STR_CONTAINS(e.msg, "tests/data: is a directory");
    free(t1), free(g1), free(t2), free(g2);
}

TEST(text_corpus_loads) {
    if (access(OP_TRAIN_DEFAULT_TEXT, R_OK)) {
        printf("  skipped: %s not installed (scripts/setup.sh installs jargon-text)\n",
               OP_TRAIN_DEFAULT_TEXT);
        return;
    }
    op_nn_cfg c;
    op_nn_cfg_preset("tiny", &c);
    op_train_data d;
    op_err e = {0};
    CHECK(op_train_data_open(&d, "text", &c, 1, &e) == OP_OK);
    CHECK(d.len > 1000000); /* the Jargon File: ~1.6 MB of English */
    int N = c.batch * c.seq, letters = 0;
    int32_t *tk = malloc(N * 4), *tg = malloc(N * 4);
    op_train_data_batch(&d, 0, 0, tk, tg);
    for (int i = 0; i < N; i++) letters += (tk[i] >= 'a' && tk[i] <= 'z') || tk[i] == ' ';
    CHECK(letters > N / 2);
    for (int i = 0; i + 1 < c.seq; i++) CHECK_EQ_INT(tg[i], tk[i + 1]);
    free(tk), free(tg);
    op_train_data_free(&d);
}

TEST(model_patterns) {
    op_nn_model m;
    op_err e = {0};
    CHECK(op_nn_model_from_spec(&m, "M*-#", &e) == OP_OK);
    CHECK(!strcmp(m.pattern, "EM*-#L")); /* E and L added at the ends */
    CHECK(op_nn_model_from_spec(&m, "EMxL", &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "position 3");
    CHECK(op_nn_model_from_spec(&m, "ME-L", &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "'E' may only stand at the start");
    CHECK(op_nn_model_from_spec(&m, "small", &e) == OP_OK);
    size_t np = m.off[m.n_layers];
    printf("  small: %s, %zu parameters\n", m.pattern, np);
    CHECK(np > 1000000 && np < 10000000);
}

/* Activation arenas follow the ops: F allocates, I frees the I-only part, W the rest. */
TEST(activation_memory_follows_ops) {
    op_nn_model m;
    op_err e = {0};
    CHECK(op_nn_model_from_spec(&m, "tiny", &e) == OP_OK);
    op_nn_stage s;
    op_nn_stage_init(&s, &m, 1, 3, 2); /* M * */
    size_t n = op_nn_io_floats(&m);
    float *x = calloc(n, 4), *y = calloc(n, 4), *dy = calloc(n, 4), *dx = calloc(n, 4);
    for (size_t i = 0; i < n; i++) x[i] = (float)(i % 13) / 13.0f - 0.4f, dy[i] = 0.01f;
    op_nn_batch b = {NULL, NULL, 0.5f};
    op_nn_stage_zero_grad(&s);
    op_nn_stage_forward(&s, 0, &b, x, y);
    size_t after_f = s.act_bytes;
    op_nn_stage_forward(&s, 1, &b, x, y);
    CHECK_EQ_INT(s.act_bytes, 2 * after_f);
    op_nn_stage_backward_input(&s, 1, dy, dx);
    size_t after_i = s.act_bytes;
    CHECK(after_i > after_f && after_i < 2 * after_f + after_f); /* mb1 holds only its W part */
    op_nn_stage_backward_weight(&s, 1); /* W ahead of mb 0: folded later, in order */
    CHECK_EQ_INT(s.act_bytes, after_f);
    CHECK(s.next_w == 0);
    op_nn_stage_backward(&s, 0, dy, dx);
    CHECK_EQ_INT(s.act_bytes, 0);
    CHECK(s.next_w == 2);
    CHECK(s.peak_act_bytes >= 2 * after_f);
    free(x), free(y), free(dy), free(dx);
    op_nn_stage_free(&s);
}

/* A schedule runs W in any order (zero-bubble W late, out of order): the stage folds
 * microbatch gradients in order 0..M-1, so the gradient is bitwise that of F,B,F,B,... */
TEST(w_order_does_not_change_grads) {
    op_nn_model m;
    op_err e = {0};
    CHECK(op_nn_model_from_spec(&m, "tiny", &e) == OP_OK);
    op_train_data d;
    CHECK(op_train_data_open(&d, "copy", &m.cfg, 9, &e) == OP_OK);
    enum { M = 4 };
    int N = m.cfg.batch * m.cfg.seq;
    int32_t tok[M][64], tgt[M][64];
    op_nn_batch b[M];
    for (int k = 0; k < M; k++) {
        op_train_data_batch(&d, 0, k, tok[k], tgt[k]);
        b[k] = (op_nn_batch){tok[k], tgt[k], 1.0f / M};
    }
    CHECK(N <= 64);
    op_nn_stage s1, s2;
    op_nn_stage_init(&s1, &m, 0, m.n_layers, M);
    op_nn_stage_init(&s2, &m, 0, m.n_layers, M);
    op_nn_stage_zero_grad(&s1), op_nn_stage_zero_grad(&s2);
    for (int k = 0; k < M; k++) {
        op_nn_stage_forward(&s1, k, &b[k], NULL, NULL);
        op_nn_stage_backward(&s1, k, NULL, NULL);
    }
    for (int k = 0; k < M; k++) op_nn_stage_forward(&s2, k, &b[k], NULL, NULL);
    const int iorder[M] = {2, 0, 3, 1}, worder[M] = {3, 2, 0, 1};
    for (int k = 0; k < M; k++) op_nn_stage_backward_input(&s2, iorder[k], NULL, NULL);
    for (int k = 0; k < M; k++) op_nn_stage_backward_weight(&s2, worder[k]);
    CHECK(!memcmp(s1.grads, s2.grads, s1.n_params * sizeof(float)));
    double gsum = 0;
    for (size_t i = 0; i < s1.n_params; i++) gsum += fabsf(s1.grads[i]);
    CHECK(gsum > 0);
    CHECK_EQ_INT(s2.act_bytes, 0);
    op_nn_stage_free(&s1), op_nn_stage_free(&s2);
    op_train_data_free(&d);
}

static int g_recompute; /* activation policy of every stage in run() */

static void run(const char *model, const char *data, int steps, int stages, const char *ckdir,
                int resume, double *losses) {
    op_train_opts o;
    op_train_opts_default(&o);
    o.recompute = g_recompute;
    o.model = model, o.data = data, o.steps = steps, o.n_stages = stages;
    o.microbatches = 3, o.ckpt_dir = ckdir, o.resume = resume, o.losses = losses;
    op_err e = {0};
    int rc = op_train_single(&o, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
}

static int read_bytes(const char *path, char **d, size_t *n) {
    op_err e;
    return op_read_file(path, d, n, &e);
}

TEST(stages_bitwise_equal_one_process) {
    mktmp();
    char a[128], b[128], pa[160], pb[160];
    snprintf(a, sizeof a, "%s/a", tmpdir);
    snprintf(b, sizeof b, "%s/b", tmpdir);
    double l1[6], l4[6];
    /* cut in 4: E | M# | * | -L: a MoE ends a stage, its balance loss stays out of the CE */
    run("tiny:EM#*-L", "copy", 6, 1, a, 0, l1);
    run("tiny:EM#*-L", "copy", 6, 4, b, 0, l4);
    CHECK(!memcmp(l1, l4, sizeof l1));
    snprintf(pa, sizeof pa, "%s/model.ckpt", a);
    snprintf(pb, sizeof pb, "%s/model.ckpt", b);
    char *da = NULL, *db = NULL;
    size_t na = 0, nb = 0;
    CHECK(read_bytes(pa, &da, &na) == 0 && read_bytes(pb, &db, &nb) == 0);
    CHECK(na == nb && na > 0 && !memcmp(da, db, na)); /* same weights and AdamW state */
    free(da), free(db);
}

/* Hand-computed memory of each policy on one stage (M *, tiny: N = 64 rows, d = 32, B = 4,
 * H = 2, T = 16) with two microbatches in flight, and the same dx and weight gradients as keep,
 * bit for bit:
 *   selective holds keep's bytes minus the attention probabilities, B*H*T*T*4 = 8192;
 *   full holds the stage input, N*d*4 = 8192;
 *   offload holds nothing on the device, keep's bytes in host memory;
 * and after I every policy holds what keep holds (the W part). */
TEST(policies_hand_computed_memory) {
    op_nn_model m;
    op_err e = {0};
    CHECK(op_nn_model_from_spec(&m, "tiny", &e) == OP_OK);
    size_t n = op_nn_io_floats(&m);
    float *x = calloc(n, 4), *y = calloc(n, 4), *dy = calloc(n, 4);
    float *dxk = calloc(n, 4), *dx = calloc(n, 4);
    for (size_t i = 0; i < n; i++) x[i] = (float)(i % 13) / 13.0f - 0.4f, dy[i] = 0.01f * (float)(i % 7);
    op_nn_batch b = {NULL, NULL, 0.5f};
    op_nn_stage k;
    op_nn_stage_init(&k, &m, 1, 3, 2);
    op_nn_stage_zero_grad(&k);
    op_nn_stage_forward(&k, 0, &b, x, y);
    size_t keep_f = k.act_bytes;
    op_nn_stage_forward(&k, 1, &b, x, y);
    op_nn_stage_backward_input(&k, 0, dy, dxk);
    size_t keep_i = k.act_bytes - keep_f; /* mb 0's W part */
    op_nn_stage_backward_weight(&k, 0);
    op_nn_stage_backward(&k, 1, dy, dxk);
    CHECK_EQ_INT(n * 4, 8192);
    CHECK_EQ_INT(m.cfg.batch * m.cfg.n_heads * m.cfg.seq * m.cfg.seq * 4, 8192);
    const size_t kept[4] = {keep_f, keep_f - 8192, 8192, 0};
    for (int pol = 1; pol <= 3; pol++) {
        op_nn_stage s;
        op_nn_stage_init(&s, &m, 1, 3, 2);
        op_nn_stage_set_policy(&s, pol);
        op_nn_stage_zero_grad(&s);
        op_nn_stage_forward(&s, 0, &b, x, y);
        CHECK_EQ_INT(s.act_bytes, kept[pol]);
        CHECK_EQ_INT(s.host_bytes, pol == 3 ? keep_f : 0);
        op_nn_stage_forward(&s, 1, &b, x, y);
        CHECK_EQ_INT(s.act_bytes, 2 * kept[pol]);
        op_nn_stage_backward_input(&s, 0, dy, dx);
        CHECK_EQ_INT(s.act_bytes, kept[pol] + keep_i);
        CHECK(!memcmp(dx, dxk, n * 4));
        op_nn_stage_backward_weight(&s, 0);
        op_nn_stage_backward(&s, 1, dy, dx);
        CHECK_EQ_INT(s.act_bytes, 0);
        CHECK_EQ_INT(s.host_bytes, 0);
        CHECK_EQ_INT(s.peak_host_bytes, pol == 3 ? 2 * keep_f : 0);
        CHECK_MSG(!memcmp(s.grads, k.grads, s.n_params * 4), "%s: gradients differ from keep",
                  op_act_policy_name(pol));
        op_nn_stage_free(&s);
    }
    op_nn_stage_free(&k);
    free(x), free(y), free(dy), free(dxk), free(dx);
}

/* The single-process loop under every policy, in one stage and cut in 4 (E | M# | * | -L: the
 * stage holding E keeps its token ids under full): losses and checkpoint bitwise keep's. */
TEST(policies_bitwise_single_loop) {
    mktmp();
    char a[128], pa[160];
    char *ref[2] = {NULL, NULL};
    size_t nref[2] = {0, 0};
    double lref[2][4];
    for (int pol = 0; pol <= 3; pol++)
        for (int cut = 0; cut < 2; cut++) {
            double l[4];
            snprintf(a, sizeof a, "%s/pol%d-%d", tmpdir, pol, cut);
            g_recompute = pol;
            run("tiny:EM#*-L", "copy", 4, cut ? 4 : 1, a, 0, l);
            snprintf(pa, sizeof pa, "%s/model.ckpt", a);
            char *d = NULL;
            size_t nd = 0;
            CHECK(read_bytes(pa, &d, &nd) == 0 && nd > 0);
            if (pol == 0) {
                ref[cut] = d, nref[cut] = nd;
                memcpy(lref[cut], l, sizeof l);
                continue;
            }
            CHECK_MSG(nd == nref[cut] && !memcmp(d, ref[cut], nd), "%s, %d stages: weights differ",
                      op_act_policy_name(pol), cut ? 4 : 1);
            CHECK_MSG(!memcmp(l, lref[cut], sizeof l), "%s: losses differ", op_act_policy_name(pol));
            free(d);
        }
    g_recompute = 0;
    free(ref[0]), free(ref[1]);
    op_train_opts o;
    op_train_opts_default(&o);
    o.recompute = 4;
    op_err e = {0};
    CHECK(op_train_single(&o, &e) == OP_EINVAL && strstr(e.msg, "policy"));
}

TEST(loss_goes_down_on_copy) {
    double l[120];
    run("tiny", "copy", 120, 1, NULL, 0, l);
    printf("  copy task: loss %.3f at step 1, %.3f at step 120\n", l[0], l[119]);
    CHECK(l[0] > 3.0);
    CHECK(l[119] < 0.5);
}

TEST(resume_is_bitwise) {
    mktmp();
    char a[128], c[128];
    snprintf(a, sizeof a, "%s/a", tmpdir);
    snprintf(c, sizeof c, "%s/c", tmpdir);
    double full[10], part[10];
    memset(part, 0, sizeof part);
    run("tiny", "reverse", 10, 1, a, 0, full);
    run("tiny", "reverse", 4, 2, c, 0, part);   /* stop at step 4 (another partition, too) */
    run("tiny", "reverse", 10, 1, c, 1, part);  /* resume: steps 4..9 */
    CHECK(!memcmp(full, part, sizeof full));
    char pa[160], pc[160], *da = NULL, *dc = NULL;
    size_t na = 0, nc = 0;
    snprintf(pa, sizeof pa, "%s/model.ckpt", a);
    snprintf(pc, sizeof pc, "%s/model.ckpt", c);
    CHECK(read_bytes(pa, &da, &na) == 0 && read_bytes(pc, &dc, &nc) == 0);
    CHECK(na == nc && !memcmp(da, dc, na));
    free(da), free(dc);
}

TEST(corrupted_checkpoint_refused) {
    mktmp();
    char a[128], bad[160], pa[160];
    snprintf(a, sizeof a, "%s/a", tmpdir);
    snprintf(pa, sizeof pa, "%s/model.ckpt", a);
    snprintf(bad, sizeof bad, "%s/bad.ckpt", tmpdir);
    run("tiny", "copy", 2, 1, a, 0, NULL);
    char *d = NULL;
    size_t n = 0;
    CHECK(read_bytes(pa, &d, &n) == 0 && n > 1000);
    op_nn_model m;
    op_err e = {0};
    op_nn_model_from_spec(&m, "tiny", &e);
    op_nn_stage s;
    op_nn_stage_init(&s, &m, 0, m.n_layers, 1);
    op_nn_stage *sp = &s;
    int64_t step = -1;
    CHECK(op_ckpt_load(pa, &m, &sp, 1, &step, &e) == OP_OK && step == 2);
    d[n / 2] ^= 0x10; /* one flipped bit in the weights */
    CHECK(op_write_file_atomic(bad, d, n, &e) == OP_OK);
    CHECK(op_ckpt_load(bad, &m, &sp, 1, &step, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "checksum mismatch");
    CHECK_STR_CONTAINS(e.msg, "bad.ckpt");
    d[n / 2] ^= 0x10;
    CHECK(op_write_file_atomic(bad, d, n - 100, &e) == OP_OK); /* truncated */
    CHECK(op_ckpt_load(bad, &m, &sp, 1, &step, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "corrupted or truncated");
    CHECK(op_write_file_atomic(bad, "hello", 5, &e) == OP_OK);
    CHECK(op_ckpt_load(bad, &m, &sp, 1, &step, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "not an OctoPipe checkpoint");
    /* the right file for another model */
    op_nn_model m2;
    CHECK(op_nn_model_init(&m2, "M*L", &m.cfg, &e) == OP_OK);
    op_nn_stage s2;
    op_nn_stage_init(&s2, &m2, 0, m2.n_layers, 1);
    op_nn_stage *sp2 = &s2;
    CHECK(op_ckpt_load(pa, &m2, &sp2, 1, &step, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "another model");
    /* a pattern with an escape byte (checksum made right): the message shows the file's
     * pattern, whose bytes must not reach the terminal as they are (op_errf scrubs them) */
    char p0 = d[16], h0[8];
    memcpy(h0, d + n - 8, 8);
    d[16] = 0x1b;
    uint64_t h = 1469598103934665603ull; /* FNV-1a, the file's checksum */
    for (size_t i = 0; i + 8 < n; i++) h = (h ^ (unsigned char)d[i]) * 1099511628211ull;
    memcpy(d + n - 8, &h, 8);
    CHECK(op_write_file_atomic(bad, d, n, &e) == OP_OK);
    CHECK(op_ckpt_load(bad, &m, &sp, 1, &step, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "written for another model (pattern \"?");
    CHECK(!strchr(e.msg, 0x1b));
    d[16] = p0, memcpy(d + n - 8, h0, 8);
    /* resuming the trainer from a corrupted file fails with the message */
    d[n / 2] ^= 0x10;
    CHECK(op_write_file_atomic(pa, d, n, &e) == OP_OK);
    op_train_opts o;
    op_train_opts_default(&o);
    o.data = "copy", o.steps = 4, o.ckpt_dir = a, o.resume = 1;
    CHECK(op_train_single(&o, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "checksum mismatch");
    free(d);
    op_nn_stage_free(&s);
    op_nn_stage_free(&s2);
}

/* Golden numbers produced once by this code: the first losses of `tiny`
 * on the copy task.  Any change to a kernel, the init, the data or AdamW moves them; 1e-5
 * relative leaves room for BLAS kernels that round differently on other CPUs.  When a change
 * is intended, the FD tests (test_nn) vouch for it and these numbers are regenerated. */
TEST(golden_losses) {
    static const double want[5] = {6.105135466, 6.094842667, 6.022469395, 5.681162657, 5.738305843};
    double l[5];
    op_train_opts o;
    op_train_opts_default(&o);
    o.model = "tiny", o.data = "copy", o.steps = 5, o.microbatches = 2, o.losses = l;
    op_err e = {0};
    CHECK(op_train_single(&o, &e) == OP_OK);
    for (int i = 0; i < 5; i++) CHECK_NEAR(l[i], want[i], 1e-5);
}

TEST(text_loss_goes_down) {
    if (access(OP_TRAIN_DEFAULT_TEXT, R_OK)) {
        printf("  skipped: %s not installed\n", OP_TRAIN_DEFAULT_TEXT);
        return;
    }
    double l[40];
    op_train_opts o;
    op_train_opts_default(&o);
    o.model = "tiny", o.data = "text", o.steps = 40, o.microbatches = 2, o.losses = l;
    op_err e = {0};
    CHECK(op_train_single(&o, &e) == OP_OK);
    printf("  English text: loss %.3f at step 1, %.3f at step 40 (uniform over bytes: 5.545)\n",
           l[0], l[39]);
    CHECK(l[0] > 5.0 && l[39] < 3.6);
}

/* The profiler measures every layer kind and writes a profile file the planner's reader takes. */
TEST(profile_file_round_trip) {
    op_nn_model m;
    op_err e = {0};
    CHECK(op_nn_model_from_spec(&m, "tiny", &e) == OP_OK);
    op_layer_prof p[8];
    int n = op_train_profile(&m, 3, p);
    CHECK_EQ_INT(n, 6); /* E M * - # L */
    for (int k = 0; k < n; k++) {
        CHECK(p[k].f_ms > 0 && p[k].i_ms > 0 && p[k].w_ms > 0);
        CHECK(p[k].act_bytes > 0 && p[k].param_bytes > 0);
    }
    op_buf b = {0};
    op_train_profile_json(&m, p, n, 3, &b);
    op_model pm;
    int rc = op_model_from_profile_json(b.data, "tiny.profile", &pm, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc == OP_OK) {
        CHECK(!strcmp(pm.pattern, m.pattern));
        CHECK_EQ_INT(pm.n_layers, m.n_layers);
        for (int i = 0; i < pm.n_layers; i++) {
            const op_layer_prof *q = NULL;
            for (int k = 0; k < n; k++)
                if (p[k].sym == m.pattern[i]) q = &p[k];
            CHECK(q && pm.layers[i].has_measured);
            if (q) CHECK_NEAR(pm.layers[i].f_ms, q->f_ms, 1e-3);
        }
        op_model_free(&pm);
    }
    op_buf_free(&b);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(copy_task_batches);
    RUN(text_corpus_loads);
    RUN(model_patterns);
    RUN(activation_memory_follows_ops);
    RUN(w_order_does_not_change_grads);
    RUN(stages_bitwise_equal_one_process);
    RUN(policies_hand_computed_memory);
    RUN(policies_bitwise_single_loop);
    RUN(loss_goes_down_on_copy);
    RUN(resume_is_bitwise);
    RUN(corrupted_checkpoint_refused);
    RUN(profile_file_round_trip);
    RUN(golden_losses);
    RUN(text_loss_goes_down);
    if (tmpdir[0]) rmtmp();
    return check_report("train");
}
