/* test_mixed_parts.c: the parts of a mixed cluster beyond costs and bounds: static memory and
 * the advice when nothing fits, per device (each device's own type and limit). */
#include "check.h"
#include "octopipe/sim.h"
#include "octopipe/tune.h"

#define MIB (1 << 20)

/* Two device types over n layers of `stat` MiB static (layer 0: stat0): type 1 twice as slow.
 * rows[0..n) type 0, rows[n..2n) type 1. */
static op_layer_cost *rows2(int n, int64_t stat, int64_t stat0) {
    op_layer_cost *l = calloc((size_t)(2 * n), sizeof *l);
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < n; i++) {
            op_layer_cost *c = &l[t * n + i];
            snprintf(c->name, sizeof c->name, "l%d", i);
            c->sym = 'T';
            c->f_ms = 1.0 * (t + 1), c->i_ms = 1.5 * (t + 1), c->w_ms = 0.5 * (t + 1);
            c->act_bytes = 1 * MIB, c->act_w_bytes = MIB / 2, c->out_bytes = MIB / 4;
            c->static_bytes = (i == 0 ? stat0 : stat) * MIB;
            c->param_bytes = c->static_bytes / 8;
        }
    return l;
}

static const char k_names[2][32] = {"big", "small"};

/* P devices: the first half type 0 with `big` MiB, the rest type 1 with `small` MiB. */
static op_problem mixed(const op_layer_cost *rows, int n, int P, int *dt, double *lim, double big,
                        double small) {
    op_problem pr = {0};
    pr.model = "t";
    pr.layers = rows;
    pr.n_layers = n;
    pr.P = P;
    pr.M = 4;
    pr.tokens_per_mb = 4096;
    pr.comm.none = 1;
    pr.n_types = 2;
    pr.type_layers = rows;
    pr.type_name = k_names;
    for (int d = 0; d < P; d++) {
        dt[d] = d < P / 2 ? 0 : 1;
        lim[d] = (d < P / 2 ? big : small) * MIB;
    }
    pr.dev_type = dt;
    pr.dev_mem_limit = lim;
    pr.mem_limit_bytes = small * MIB; /* the smallest, as op_problem_from_model sets it */
    return pr;
}

/* 8 layers x 80 MiB = 640 MiB over 2 x 400 + 2 x 100 MiB: the first type's floor (160 MiB on
 * some device) is over the smallest limit, yet the big devices can take more than their even
 * share: static memory fits (need 640 / 1000), and the advice names only the small devices. */
TEST(static_need_per_device_only_small_fail) {
    int dt[4];
    double lim[4];
    op_layer_cost *l = rows2(8, 80, 80);
    op_problem pr = mixed(l, 8, 4, dt, lim, 400, 100);
    CHECK(op_tune_static_floor(l, 8, 4) > pr.mem_limit_bytes); /* the one-type view fails */
    int wl = 7;
    CHECK_NEAR(op_tune_static_need(&pr, &wl), 640.0 / 1000.0, 1e-12);
    CHECK_EQ_INT(wl, -1);                                              /* the total sets it */
    CHECK_NEAR(op_tune_static_floor_any(&pr), 160.0 * MIB, 1e-12);     /* one limit for all */
    char buf[4096];
    int k = op_tune_advise(NULL, NULL, NULL, &pr, buf, sizeof buf);
    CHECK(k >= 1);
    CHECK(!strstr(buf, "no recomputation or schedule helps"));
    CHECK_STR_CONTAINS(buf, "devices 2-3 (small, limit 0.10 GiB) hold less than an even share");
    CHECK(!strstr(buf, "devices 0-1"));
    /* and a plan does fit: every device within its own limit */
    op_tune_opts o;
    op_tune_opts_default(&o);
    o.max_evals = 400;
    op_plan p;
    op_err e = {0};
    CHECK(op_tune(&pr, &o, &p, &e) == OP_OK);
    if (e.code == 0 && p.P == 4)
        for (int d = 0; d < 4; d++) CHECK((double)p.pred.peak_bytes[d] <= lim[d]);
    op_plan_free(&p);
    free(l);
}

/* A heavy first layer (150 MiB) fits only on the big devices: need = max(710 / 1000, 150 /
 * 400); the small devices are named as unable to hold it. */
TEST(static_need_heavy_layer_on_big_devices) {
    int dt[4];
    double lim[4];
    op_layer_cost *l = rows2(8, 80, 150);
    op_problem pr = mixed(l, 8, 4, dt, lim, 400, 100);
    CHECK_NEAR(op_tune_static_need(&pr, NULL), 710.0 / 1000.0, 1e-12);
    char buf[4096];
    op_tune_advise(NULL, NULL, NULL, &pr, buf, sizeof buf);
    CHECK_STR_CONTAINS(buf, "devices 2-3 (small, limit 0.10 GiB) cannot hold layer 0 (l0, 0.15 GiB");
    CHECK(!strstr(buf, "no recomputation or schedule helps"));
    free(l);
}

/* Nothing fits: a layer beyond every limit, and a total beyond all limits together. */
TEST(static_need_when_nothing_fits) {
    int dt[4];
    double lim[4];
    char buf[4096];
    op_layer_cost *l = rows2(8, 80, 500);
    op_problem pr = mixed(l, 8, 4, dt, lim, 400, 100);
    int wl = -1;
    CHECK_NEAR(op_tune_static_need(&pr, &wl), 500.0 / 400.0, 1e-12);
    CHECK_EQ_INT(wl, 0);
    op_tune_advise(NULL, NULL, NULL, &pr, buf, sizeof buf);
    CHECK_STR_CONTAINS(buf, "layer 0 (l0) alone needs 0.49 GiB");
    CHECK_STR_CONTAINS(buf, "no recomputation or schedule helps");
    free(l);
    /* 12 x 90 = 1080 MiB over 1000: two more devices like device 0 hold it (every device
     * holds a stage: a small one takes one layer) */
    l = rows2(12, 90, 90);
    pr = mixed(l, 12, 4, dt, lim, 400, 100);
    CHECK_NEAR(op_tune_static_need(&pr, &wl), 1080.0 / 1000.0, 1e-12);
    CHECK_EQ_INT(wl, -1);
    int k = op_tune_advise(NULL, NULL, NULL, &pr, buf, sizeof buf);
    CHECK(k >= 2);
    CHECK_STR_CONTAINS(buf, "over the 0.98 GiB the 4 devices' limits add up to");
    CHECK_STR_CONTAINS(buf, "like device 0 (big, limit 0.39 GiB)");
    free(l);
}

/* One type, one limit: the need is the uniform floor over the limit; a device without a limit
 * holds anything. */
TEST(static_need_uniform_is_the_floor) {
    op_layer_cost *l = rows2(10, 30, 70);
    op_problem pr = {0};
    pr.layers = l, pr.n_layers = 10, pr.P = 4, pr.M = 4, pr.mem_limit_bytes = 200.0 * MIB;
    CHECK_NEAR(op_tune_static_need(&pr, NULL), op_tune_static_floor(l, 10, 4) / pr.mem_limit_bytes, 1e-12);
    CHECK_NEAR(op_tune_static_floor(l, 10, 4), 340.0 / 4 * MIB, 1e-12);
    CHECK_NEAR(op_tune_static_floor_any(&pr), 340.0 / 4 * MIB, 1e-12);
    pr.P = 8; /* now the heaviest layer sets it */
    CHECK_NEAR(op_tune_static_need(&pr, NULL), 70.0 / 200.0, 1e-12);
    pr.mem_limit_bytes = 0;
    CHECK(op_tune_static_need(&pr, NULL) == 0);
    free(l);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(static_need_per_device_only_small_fail);
    RUN(static_need_heavy_layer_on_big_devices);
    RUN(static_need_when_nothing_fits);
    RUN(static_need_uniform_is_the_floor);
    return check_report("mixed_parts");
}
