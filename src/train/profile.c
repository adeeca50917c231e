/* profile.c: the reference model's per-layer profiler (`octopipe profile --model ...`,
 * src/cli/cmd_profile_model.c).
 * Each layer kind runs alone in a one-layer stage on this thread: F, I, W repeated, median
 * time of each, plus the activation bytes its arenas hold after F and between I and W.  The
 * result is the profile file the planner reads (docs/profile.md). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "octopipe/out.h"
#include "octopipe/train.h"

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int op_train_profile_clock(const op_nn_model *m, int repeats, int cpu_clock, op_layer_prof *out) {
    if (repeats < 1) repeats = 1;
    double (*clk)(void) = cpu_clock ? thread_cpu_s : op_now_s;
    size_t nx = op_nn_io_floats(m);
    int N = m->cfg.batch * m->cfg.seq;
    float *x = op_xcalloc(nx, sizeof(float)), *y = op_xcalloc(nx, sizeof(float));
    float *dy = op_xcalloc(nx, sizeof(float)), *dx = op_xcalloc(nx, sizeof(float));
    int32_t *tok = op_xmalloc(sizeof(int32_t) * (size_t)N);
    op_rng r;
    op_rng_seed(&r, 11);
    for (size_t i = 0; i < nx; i++) x[i] = (float)op_rng_uniform(&r) - 0.5f, dy[i] = 1e-3f * x[i];
    for (int i = 0; i < N; i++) tok[i] = op_rng_int(&r, m->cfg.vocab);
    op_nn_batch b = {tok, tok, 1.0f};
    double *t[4];
    for (int o = 0; o < 4; o++) t[o] = op_xcalloc((size_t)repeats, sizeof(double));
    /* the attention core alone, on its own buffers: what selective recomputation adds to I */
    const op_nn_cfg *g = &m->cfg;
    float *qkv = op_xcalloc(3 * nx, sizeof(float)), *att = op_xmalloc(op_nn_attn_core_bytes(g));
    for (size_t i = 0; i < 3 * nx; i++) qkv[i] = (float)op_rng_uniform(&r) - 0.5f;
    /* Warm up for ~0.4 s first: the first profile pass of a fresh process measured the first
     * big layer 25-35% slower than every later pass (Mamba F 4.9 vs 3.6-3.8 ms: clock and cache
     * ramp-up of the core), so the first kinds would be profiled slow. */
    double w0 = op_now_s();
    while (op_now_s() - w0 < 0.4) {
        for (int li = 0; li < m->n_layers && op_now_s() - w0 < 0.4; li++) {
            char sym = m->pattern[li];
            if (memchr(m->pattern, sym, (size_t)li)) continue;
            op_nn_stage s;
            op_nn_stage_init(&s, m, li, li + 1, 1);
            op_nn_stage_zero_grad(&s);
            op_nn_stage_forward(&s, 0, &b, sym == 'E' ? NULL : x, sym == 'L' ? NULL : y);
            op_nn_stage_backward(&s, 0, sym == 'L' ? NULL : dy, sym == 'E' ? NULL : dx);
            op_nn_stage_free(&s);
        }
    }
    int n = 0;
    for (int li = 0; li < m->n_layers && n < 8; li++) {
        char sym = m->pattern[li];
        if (memchr(m->pattern, sym, (size_t)li)) continue; /* measured already */
        op_nn_stage s;
        op_nn_stage_init(&s, m, li, li + 1, 1);
        const float *in = sym == 'E' ? NULL : x, *gin = sym == 'L' ? NULL : dy;
        float *o_ = sym == 'L' ? NULL : y, *gout = sym == 'E' ? NULL : dx;
        op_layer_prof *p = &out[n++];
        memset(p, 0, sizeof *p);
        p->sym = sym;
        for (int rep = -1; rep < repeats; rep++) { /* rep -1 warms caches and the pool */
            op_nn_stage_zero_grad(&s);
            double t0 = clk();
            op_nn_stage_forward(&s, 0, &b, in, o_);
            double t1 = clk();
            size_t after_f = s.act_bytes;
            op_nn_stage_backward_input(&s, 0, gin, gout);
            double t2 = clk();
            size_t after_i = s.act_bytes;
            op_nn_stage_backward_weight(&s, 0);
            double t3 = clk();
            if (sym == '*') op_nn_attn_core(g, qkv, att);
            double t4 = clk();
            if (rep < 0) {
                p->act_bytes = after_f, p->act_w_bytes = after_i;
                p->act_sel_bytes = after_f - (sym == '*' ? op_nn_attn_core_bytes(g) : 0);
                continue;
            }
            t[0][rep] = (t1 - t0) * 1e3, t[1][rep] = (t2 - t1) * 1e3, t[2][rep] = (t3 - t2) * 1e3;
            t[3][rep] = (t4 - t3) * 1e3;
        }
        p->f_ms = median(t[0], repeats);
        p->i_ms = median(t[1], repeats);
        p->w_ms = median(t[2], repeats);
        p->f_sel_ms = sym == '*' ? median(t[3], repeats) : 0;
        p->param_bytes = s.n_params * sizeof(float);
        p->out_bytes = sym == 'L' ? 0 : nx * sizeof(float);
        op_nn_stage_free(&s);
    }
    for (int o = 0; o < 4; o++) free(t[o]);
    free(x), free(y), free(dy), free(dx), free(tok), free(qkv), free(att);
    return n;
}

int op_train_profile(const op_nn_model *m, int repeats, op_layer_prof *out) {
    return op_train_profile_clock(m, repeats, 0, out);
}

static void dict(op_buf *b, const char *key, const op_layer_prof *p, int n, int which) {
    op_buf_printf(b, "  \"%s\": {", key);
    for (int k = 0; k < n; k++) {
        op_buf_printf(b, "%s\"%c\": ", k ? ", " : "", p[k].sym);
        switch (which) {
        case 0: op_buf_printf(b, "%.4f", p[k].f_ms); break;
        case 1: op_buf_printf(b, "%.4f", p[k].i_ms); break;
        case 2: op_buf_printf(b, "%.4f", p[k].w_ms); break;
        case 3: op_buf_printf(b, "%zu", p[k].act_bytes); break;
        case 4: op_buf_printf(b, "%zu", p[k].act_w_bytes); break;
        default: op_buf_printf(b, "%zu", p[k].param_bytes); break;
        }
    }
    op_buf_printf(b, "},\n");
}

void op_train_profile_json(const op_nn_model *m, const op_layer_prof *p, int n, int repeats,
                           op_buf *out) {
    op_buf_printf(out, "{\n  \"name\": \"%s\",\n", m->name);
    op_buf_printf(out, "  \"description\": \"reference model measured by octopipe profile: one "
                       "microbatch of %d x %d tokens, d=%d, FP32, one thread, median of %d\",\n",
                  m->cfg.batch, m->cfg.seq, m->cfg.d, repeats);
    op_buf_printf(out, "  \"pattern\": \"%s\",\n", m->pattern);
    /* the batch the times hold for: plans from this profile are costed and exported at it */
    op_buf_printf(out, "  \"seq\": %d,\n  \"mbs\": %d,\n", m->cfg.seq, m->cfg.batch);
    dict(out, "forward_ms", p, n, 0);
    dict(out, "backward_ms", p, n, 1);
    dict(out, "weight_ms", p, n, 2);
    dict(out, "act_bytes", p, n, 3);
    dict(out, "_act_w_bytes", p, n, 4); /* part of act_bytes-plus-I-stash kept until W */
    dict(out, "param_bytes", p, n, 5);
    op_buf_printf(out, "  \"out_bytes\": %zu,\n  \"hidden\": %d,\n  \"vocab\": %d\n}\n",
                  op_nn_io_floats(m) * sizeof(float), m->cfg.d, m->cfg.vocab);
}
