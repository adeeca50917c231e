/* test_mixed_parts.c: the parts of a mixed cluster beyond costs and bounds: profiles with
 * measured times per GPU type (by_gpu), static memory and the advice when nothing fits, per
 * device (each device's own type and limit). */
#include <unistd.h>

#include "check.h"
#include "octopipe/exec.h"
#include "octopipe/problem.h"
#include "octopipe/sched.h"
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
    CHECK(op_problem_static_floor(l, 8, 4) > pr.mem_limit_bytes); /* the one-type view fails */
    int wl = 7;
    CHECK_NEAR(op_problem_static_need(&pr, &wl), 640.0 / 1000.0, 1e-12);
    CHECK_EQ_INT(wl, -1);                                              /* the total sets it */
    CHECK_NEAR(op_problem_static_floor_any(&pr), 160.0 * MIB, 1e-12);     /* one limit for all */
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
    CHECK_NEAR(op_problem_static_need(&pr, NULL), 710.0 / 1000.0, 1e-12);
    char buf[4096];
    op_tune_advise(NULL, NULL, NULL, &pr, buf, sizeof buf);
    CHECK_STR_CONTAINS(buf, "devices 2-3 (small, limit 0.10 GiB) cannot hold layer 0 (l0, 0.15 GiB");
    CHECK(!strstr(buf, "no recomputation or schedule helps"));
    /* a device without a limit holds anything: it is never named */
    lim[3] = 0;
    CHECK(op_problem_static_need(&pr, NULL) == 0);
    op_tune_advise(NULL, NULL, NULL, &pr, buf, sizeof buf);
    CHECK_STR_CONTAINS(buf, "device 2 (small, limit 0.10 GiB) cannot hold layer 0");
    CHECK(!strstr(buf, "device 3"));
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
    CHECK_NEAR(op_problem_static_need(&pr, &wl), 500.0 / 400.0, 1e-12);
    CHECK_EQ_INT(wl, 0);
    op_tune_advise(NULL, NULL, NULL, &pr, buf, sizeof buf);
    CHECK_STR_CONTAINS(buf, "layer 0 (l0) alone needs 0.49 GiB");
    CHECK_STR_CONTAINS(buf, "no recomputation or schedule helps");
    free(l);
    /* 12 x 90 = 1080 MiB over 1000: two more devices like device 0 hold it (every device
     * holds a stage: a small one takes one layer) */
    l = rows2(12, 90, 90);
    pr = mixed(l, 12, 4, dt, lim, 400, 100);
    const double host[4] = {50, 50, 25, 25}; /* per-device links: the added devices get one too */
    pr.comm.host_bw_GBps = 25, pr.comm.host_lat_ms = 0.01;
    pr.comm.host_n = 4, pr.comm.host_bw_dev_GBps = host;
    CHECK_NEAR(op_problem_static_need(&pr, &wl), 1080.0 / 1000.0, 1e-12);
    CHECK_EQ_INT(wl, -1);
    int k = op_tune_advise(NULL, NULL, NULL, &pr, buf, sizeof buf);
    CHECK(k >= 2);
    CHECK_STR_CONTAINS(buf, "over the 0.98 GiB the 4 devices' limits add up to");
    CHECK_STR_CONTAINS(buf, "like device 0 (big, limit 0.39 GiB)");
    /* one --mem-limit for every device: none above the smallest device's memory (the caller's
     * d carries it; 12 GiB A100s next to 40 GiB H100s were told "--mem-limit 32.63") */
    CHECK_STR_CONTAINS(buf, "--mem-limit 0.");
    op_device small = {.mem_GiB = 0.11};
    op_tune_advise(NULL, NULL, &small, &pr, buf, sizeof buf);
    CHECK_STR_CONTAINS(buf, "like device 0 (big, limit 0.39 GiB)");
    CHECK(!strstr(buf, "--mem-limit"));
    free(l);
}

/* One type, one limit: the need is the uniform floor over the limit; a device without a limit
 * holds anything. */
TEST(static_need_uniform_is_the_floor) {
    op_layer_cost *l = rows2(10, 30, 70);
    op_problem pr = {0};
    pr.layers = l, pr.n_layers = 10, pr.P = 4, pr.M = 4, pr.mem_limit_bytes = 200.0 * MIB;
    CHECK_NEAR(op_problem_static_need(&pr, NULL), op_problem_static_floor(l, 10, 4) / pr.mem_limit_bytes, 1e-12);
    CHECK_NEAR(op_problem_static_floor(l, 10, 4), 340.0 / 4 * MIB, 1e-12);
    CHECK_NEAR(op_problem_static_floor_any(&pr), 340.0 / 4 * MIB, 1e-12);
    pr.P = 8; /* now the heaviest layer sets it */
    CHECK_NEAR(op_problem_static_need(&pr, NULL), 70.0 / 200.0, 1e-12);
    pr.mem_limit_bytes = 0;
    CHECK(op_problem_static_need(&pr, NULL) == 0);
    free(l);
}


/* ---- profiles with times per GPU type ---- */

#define BYGPU "tests/data/profiles/by_gpu.json" /* layers E M - M * - L */

/* A100 devices get the profile's A100 times, H100 devices the top-level ones (--gpu H100),
 * and nothing is scaled. */
TEST(profile_by_gpu_measured_types) {
    op_err e = {0};
    op_problem_opts o;
    op_problem_opts_default(&o);
    o.gpus = "h100-80gb:2,a100-80gb:2";
    op_problem_built b;
    CHECK_EQ_INT(op_problem_build(&b, BYGPU, NULL, 4, 8, &o, &e), OP_OK);
    if (e.code) return;
    CHECK_EQ_INT(b.model.n_gpu, 1);
    CHECK_EQ_INT(b.model.n_layers, 7);
    const op_layer_cost *h = op_problem_dev_layers(&b.pr, 1), *a = op_problem_dev_layers(&b.pr, 2);
    CHECK_NEAR(h[1].f_ms, 1.0, 0);
    CHECK_NEAR(h[1].i_ms, 2.0, 0);
    CHECK_NEAR(h[1].w_ms, 0.5, 0);
    CHECK_NEAR(a[1].f_ms, 2.5, 0);
    CHECK_NEAR(a[1].i_ms, 5.0, 0);
    CHECK_NEAR(a[1].w_ms, 1.0, 0);
    CHECK_NEAR(a[6].f_ms, 6.0, 0);
    CHECK_NEAR(a[0].w_ms, 0.5, 0);
    /* recompute: measured 0.5 of 1.25 on H100; the A100 keeps that share of its F (2.0) */
    CHECK_NEAR(h[4].f_sel_ms, 0.5, 0);
    CHECK_NEAR(a[4].f_sel_ms, 0.5 * 2.0 / 1.25, 1e-15);
    /* sizes are per layer: the same on both types */
    CHECK_EQ_INT(a[1].act_bytes, h[1].act_bytes);
    /* H100 has no entry of its own: the problem cannot tell it is --gpu (the CLI can, and
     * names only the types scaled, tests/sh_mixed_profile.sh) */
    CHECK_EQ_INT(op_problem_profile_scaled(&b.pr, &b.model), 1);
    op_problem_built_free(&b);
}

/* A type the profile did not measure (H200) is scaled from the --gpu times per layer kind,
 * exactly as for a profile without by_gpu; and that profile still loads unchanged. */
TEST(profile_by_gpu_others_scaled) {
    op_err e = {0};
    op_problem_opts o;
    op_problem_opts_default(&o);
    o.gpus = "a100-80gb:2,h200:2";
    op_problem_built b, old;
    CHECK_EQ_INT(op_problem_build(&b, BYGPU, "h100-80gb", 4, 8, &o, &e), OP_OK);
    CHECK_EQ_INT(op_problem_build(&old, "tests/data/profiles/tiny.json", "h100-80gb", 4, 8, &o, &e), OP_OK);
    if (e.code) return;
    CHECK_EQ_INT(old.model.n_gpu, 0);
    CHECK_EQ_INT(op_problem_profile_scaled(&b.pr, &b.model), 1);
    op_device h, h2;
    op_device_preset("h100-80gb", &h, &e);
    op_device_preset("h200", &h2, &e);
    double r[3];
    CHECK_EQ_INT(op_cost_kind_ratio(OP_LAYER_MAMBA, &o.train, &h2, &h, r), 1);
    const op_layer_cost *x = op_problem_dev_layers(&b.pr, 3), *y = op_problem_dev_layers(&old.pr, 3);
    CHECK_NEAR(x[1].f_ms, 1.0 * r[0], 1e-12);
    CHECK_NEAR(x[1].i_ms, 2.0 * r[1], 1e-12);
    CHECK_EQ_INT(memcmp(&x[1], &y[1], sizeof *x), 0); /* by_gpu changes nothing for H200 */
    CHECK_NEAR(op_problem_dev_layers(&b.pr, 0)[1].f_ms, 2.5, 0);   /* A100: measured */
    CHECK(op_problem_dev_layers(&old.pr, 0)[1].f_ms > 1.0); /* A100 without by_gpu: scaled up */
    op_problem_built_free(&b);
    op_problem_built_free(&old);
}

/* The base the others scale from is --gpu's own by_gpu entry when it has one; on one GPU the
 * cost model takes that GPU's entry directly. */
TEST(profile_by_gpu_base_and_uniform) {
    op_err e = {0};
    const char *txt = "{\"pattern\": \"M\", \"forward_ms\": {\"E\": 1, \"M\": 1, \"L\": 1},"
                      " \"backward_ms\": {\"E\": 1, \"M\": 1, \"L\": 1},"
                      " \"by_gpu\": {\"h100\": {\"forward_ms\": {\"E\": 2, \"M\": 4, \"L\": 2},"
                      " \"backward_ms\": {\"E\": 2, \"M\": 8, \"L\": 2}}}}";
    op_model m;
    CHECK_EQ_INT(op_model_from_profile_json(txt, "p.json", &m, &e), OP_OK);
    if (e.code) return;
    CHECK(op_model_gpu_ms(&m, "h100-80gb") != NULL); /* stored under the preset's own name */
    CHECK(op_model_gpu_ms(&m, "h100") == NULL);
    op_device h, h2;
    op_device_preset("h100", &h, &e);
    op_device_preset("h200", &h2, &e);
    op_train_cfg t;
    op_train_cfg_default(&t);
    op_layer_cost c[3];
    CHECK_EQ_INT(op_cost_layers(&m, &t, &h, c, &e), OP_OK);
    CHECK_NEAR(c[1].f_ms, 4, 0);
    CHECK_NEAR(c[1].i_ms, 8, 0);
    CHECK_NEAR(c[1].w_ms, 0, 0);
    CHECK_EQ_INT(op_cost_layers(&m, &t, &h2, c, &e), OP_OK);
    CHECK_NEAR(c[1].f_ms, 1, 0); /* one GPU not measured: the top level */
    op_cluster cl;
    op_problem_opts o;
    op_problem_opts_default(&o);
    o.gpus = "h100:1,h200:2";
    o.cluster = &cl;
    op_problem pr;
    op_layer_cost costs[3];
    CHECK_EQ_INT(op_problem_from_model(&pr, &m, &h, 3, 4, &o, costs, &e), OP_OK);
    double r[3];
    op_cost_kind_ratio(OP_LAYER_MAMBA, &t, &h2, &h, r);
    CHECK_NEAR(op_problem_dev_layers(&pr, 0)[1].f_ms, 4, 0);
    CHECK_NEAR(op_problem_dev_layers(&pr, 2)[1].f_ms, 4 * r[0], 1e-12); /* from H100's 4, not 1 */
    CHECK_NEAR(op_problem_dev_layers(&pr, 2)[1].i_ms, 8 * r[1], 1e-12);
    op_cluster_free(&cl);
    op_model_free(&m);
}

/* Bad by_gpu entries: one line naming the file and the field. */
TEST(profile_by_gpu_rejects_bad_input) {
    static const struct { const char *by_gpu, *want; } cases[] = {
        {"{\"v100\": {}}", "p.json: by_gpu: unknown device 'v100' (known: a100-40gb, a100-80gb"},
        {"{\"a100\": {\"backward_ms\": {\"E\": 1, \"M\": 1, \"L\": 1}}}",
         "p.json: by_gpu.a100-80gb.forward_ms: missing"},
        {"{\"a100\": {\"forward_ms\": {\"E\": 1, \"M\": 1, \"L\": 1}, \"backward_ms\": {\"E\": 1, \"L\": 1}}}",
         "p.json: by_gpu.a100-80gb.backward_ms has no time for symbol 'M'"},
        {"{\"a100\": {\"forward_ms\": {\"E\": 1, \"M\": -1, \"L\": 1}, \"backward_ms\": {\"E\": 1, \"M\": 1, \"L\": 1}}}",
         "p.json: by_gpu.a100-80gb.forward_ms['M']: expected a number >= 0"},
        {"{\"a100\": {\"forward_ms\": {\"E\": 1, \"M\": 1, \"L\": 1}, \"backward_ms\": {\"E\": 1, \"M\": 1, \"L\": 1},"
         " \"weight_ms\": {\"M\": 1}}}",
         "p.json: by_gpu.a100-80gb.weight_ms has no time for symbol 'E' (give 0 if none)"},
        {"{\"a100\": {\"forward_ms\": {\"E\": 1, \"M\": 1, \"L\": 1}, \"backward_ms\": {\"E\": 1, \"M\": 1, \"L\": 1}},"
         " \"a100-80gb\": {}}", "p.json: by_gpu: 'a100-80gb' is a100-80gb again: one entry per GPU"},
        {"{\"a100\": {\"forward_ms\": {\"E\": 1, \"M\": 1, \"L\": 1}, \"bwd\": 1}}",
         "p.json: by_gpu.a100-80gb: unknown key 'bwd'"},
        {"{\"a100\": {\"forward_ms\": {\"Q\": 1}}}", "p.json: by_gpu.a100-80gb.forward_ms: unknown symbol 'Q'"},
        {"{\"a100\": 3}", "p.json: by_gpu.a100-80gb: expected an object"},
        {"{}", "p.json: by_gpu: expected an object of 1 to 16 GPUs"},
        {"[1]", "p.json: by_gpu: expected an object of 1 to 16 GPUs"},
        /* recompute_ms is a share of F (more priced selective above keep's F) */
        {"{\"a100\": {\"forward_ms\": {\"E\": 1, \"M\": 1, \"L\": 1}, \"backward_ms\": {\"E\": 1, \"M\": 1, \"L\": 1},"
         " \"recompute_ms\": {\"M\": 2}}}",
         "p.json: by_gpu.a100-80gb.recompute_ms: 2 ms for symbol 'M' is more than its forward_ms (1 ms)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char txt[1024];
        snprintf(txt, sizeof txt, "{\"pattern\": \"M\", \"forward_ms\": {\"E\": 1, \"M\": 1, \"L\": 1},"
                 " \"backward_ms\": {\"E\": 1, \"M\": 1, \"L\": 1}, \"by_gpu\": %s}", cases[i].by_gpu);
        op_model m;
        op_err e = {0};
        CHECK_EQ_INT(op_model_from_profile_json(txt, "p.json", &m, &e), OP_EINVAL);
        CHECK_STR_CONTAINS(e.msg, cases[i].want);
        CHECK(!strchr(e.msg, '\n'));
    }
}

/* ---- the cluster file `profile comm` writes ---- */

/* Per-pair links written and read back exactly (to the 9 digits written); links only when
 * there are none. */
TEST(cluster_pairs_round_trip) {
    op_err e = {0};
    const double lat[9] = {0, 0.011, 0.027, 0.012, 0, 0.0305, 0.026, 0.031, 0};
    const double bw[9] = {1, 355.5, 41.25, 350, 1, 39.5, 42, 38.125, 1};
    op_comm c = {0};
    c.nodes_of = 2;
    c.intra_lat_ms = 0.01, c.intra_bw_GBps = 360, c.inter_lat_ms = 0.025, c.inter_bw_GBps = 40;
    c.pair_n = 3, c.pair_lat_ms = lat, c.pair_bw_GBps = bw;
    char path[] = "/tmp/op_cluster_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    CHECK_EQ_INT(op_cluster_write(path, &c, "hand-made", &e), OP_OK);
    op_cluster cl;
    CHECK_EQ_INT(op_cluster_load(path, &cl, &e), OP_OK);
    CHECK_EQ_INT(cl.comm.pair_n, 3);
    CHECK_EQ_INT(cl.comm.nodes_of, 2);
    CHECK_NEAR(cl.comm.inter_bw_GBps, 40, 0);
    for (int k = 0; k < 9 && cl.comm.pair_n == 3; k++) {
        CHECK_NEAR(cl.comm.pair_lat_ms[k], lat[k], 1e-9);
        CHECK_NEAR(cl.comm.pair_bw_GBps[k], bw[k], 1e-9);
    }
    /* the loaded links are the ones transfers take: 1 -> 2 crosses at 39.5 GB/s */
    CHECK_NEAR(op_comm_ms(&cl.comm, 1, 2, 79000000), 0.0305 + 2.0, 1e-12);
    op_cluster_free(&cl);
    /* links only: no pair keys, and a file read back without them */
    c.pair_n = 0;
    CHECK_EQ_INT(op_cluster_write(path, &c, NULL, &e), OP_OK);
    char *txt = NULL;
    CHECK_EQ_INT(op_read_file(path, &txt, NULL, &e), OP_OK);
    CHECK(txt && !strstr(txt, "pair_"));
    free(txt);
    CHECK_EQ_INT(op_cluster_load(path, &cl, &e), OP_OK);
    CHECK_EQ_INT(cl.comm.pair_n, 0);
    op_cluster_free(&cl);
    unlink(path);
}

/* ---- each device's own host link ---- */

/* An H100 (PCIe Gen5, 50 GB/s) next to an A100 (Gen4, 25 GB/s): each has its own host link;
 * H200 + H100 share one (both 50), so that problem is as before (no per-device links). */
TEST(host_link_per_device_type) {
    op_err e = {0};
    op_problem_opts o;
    op_problem_opts_default(&o);
    o.gpus = "h100-80gb:2,a100-80gb:2";
    op_problem_built b;
    CHECK_EQ_INT(op_problem_build(&b, "llama2-7b", NULL, 4, 8, &o, &e), OP_OK);
    if (e.code) return;
    CHECK_EQ_INT(b.pr.comm.host_n, 4);
    CHECK_NEAR(op_comm_host_bw(&b.pr.comm, 0), 50, 0);
    CHECK_NEAR(op_comm_host_bw(&b.pr.comm, 3), 25, 0);
    CHECK_NEAR(b.pr.comm.host_bw_GBps, 25, 0); /* the one link of code that knows one */
    /* 1e9 bytes: 10 us + 20 ms on an H100, 10 us + 40 ms on an A100 */
    CHECK_NEAR(op_comm_host_ms_dev(&b.pr.comm, 1, 1000000000), 0.010 + 20, 1e-12);
    CHECK_NEAR(op_comm_host_ms_dev(&b.pr.comm, 2, 1000000000), 0.010 + 40, 1e-12);
    op_problem_built_free(&b);
    o.gpus = "h200:2,h100-80gb:2";
    CHECK_EQ_INT(op_problem_build(&b, "llama2-7b", NULL, 4, 8, &o, &e), OP_OK);
    CHECK_EQ_INT(b.pr.comm.host_n, 0);
    CHECK_NEAR(b.pr.comm.host_bw_GBps, 50, 0);
    op_problem_built_free(&b);
}

/* Two one-layer stages on two devices, both offloaded: each stage's copies take its own
 * device's link (act 1e7 bytes, no latency: 0.25 ms at 40 GB/s on device 0, 1 ms at 10 GB/s on
 * device 1), in the simulator and after a write/read round trip of the plan file. */
TEST(host_link_per_device_in_sim_and_file) {
    op_layer_cost l[2] = {0};
    for (int i = 0; i < 2; i++) {
        snprintf(l[i].name, sizeof l[i].name, "l%d", i);
        l[i].sym = 'T';
        l[i].f_ms = 2, l[i].i_ms = 2, l[i].w_ms = 1;
        l[i].act_bytes = 10000000, l[i].out_bytes = 8;
    }
    const double host[2] = {40, 10};
    op_problem pr = {.model = "t", .layers = l, .n_layers = 2, .P = 2, .M = 4, .tokens_per_mb = 1};
    pr.comm.none = 1;
    pr.comm.host_lat_ms = 0, pr.comm.host_bw_GBps = 10;
    pr.comm.host_n = 2, pr.comm.host_bw_dev_GBps = host;
    op_plan p;
    op_err e = {0};
    CHECK_EQ_INT(op_sched_build("1f1b", &pr, &p, &e), OP_OK);
    if (e.code) return;
    for (int s = 0; s < p.S; s++) p.stage_act[s] = OP_ACT_OFFLOAD;
    CHECK_EQ_INT(p.stage_dev[0], 0);
    CHECK_NEAR(op_stage_copy_ms(&p, 0), 0.25, 1e-12);
    CHECK_NEAR(op_stage_copy_ms(&p, 1), 1.0, 1e-12);
    CHECK_EQ_INT(op_sim_replay(&p, NULL, &e), OP_OK);
    const double *x = p.pred.copy_ms; /* [(s * M + m) * 4]: offload start, end, reload start, end */
    CHECK(x != NULL);
    if (x) {
        CHECK_NEAR(x[1] - x[0], 0.25, 1e-12);
        CHECK_NEAR(x[3] - x[2], 0.25, 1e-12);
        CHECK_NEAR(x[(1 * 4 + 2) * 4 + 1] - x[(1 * 4 + 2) * 4], 1.0, 1e-12);
    }
    op_buf b = {0};
    CHECK_EQ_INT(op_plan_to_json(&p, &b), OP_OK);
    CHECK_STR_CONTAINS(b.data, "\"host_bw_GBps_per_device\": [40, 10]");
    op_plan q;
    CHECK_EQ_INT(op_plan_from_json(b.data, "p.json", &q, &e), OP_OK);
    if (e.code == 0) {
        CHECK_EQ_INT(q.comm.host_n, 2);
        CHECK_NEAR(op_stage_copy_ms(&q, 1), 1.0, 1e-12);
        op_buf c = {0};
        CHECK_EQ_INT(op_plan_to_json(&q, &c), OP_OK);
        CHECK(c.len == b.len && !memcmp(c.data, b.data, b.len)); /* write/read/write identical */
        op_buf_free(&c);
        op_plan_free(&q);
    }
    /* bad per-device links are refused with the field named */
    char *bad = strdup(b.data), *at = strstr(bad, "[40, 10]");
    if (at) memcpy(at, "[40, -1]", 8);
    CHECK_EQ_INT(op_plan_from_json(bad, "p.json", &q, &e), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "comm.host_bw_GBps_per_device[1]");
    if (at) memcpy(at, "[40]    ", 8);
    CHECK_EQ_INT(op_plan_from_json(bad, "p.json", &q, &e), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "comm.host_bw_GBps_per_device: expected 2 numbers");
    free(bad);
    op_buf_free(&b);
    op_plan_free(&p);
}

/* The emulated executor's copy engine takes each rank's own host link: two one-stage ranks,
 * both offloaded, 1e7 bytes a stash, 1 GB/s on rank 0 and 0.5 GB/s on rank 1: each transfer
 * lasts at least 10 and 20 ms there (a loaded machine only lengthens them). */
TEST(host_link_per_device_emulated) {
    op_layer_cost l[2] = {0};
    for (int i = 0; i < 2; i++) {
        snprintf(l[i].name, sizeof l[i].name, "l%d", i);
        l[i].sym = 'T';
        l[i].f_ms = 2, l[i].i_ms = 2, l[i].w_ms = 1;
        l[i].act_bytes = 10000000, l[i].out_bytes = 8;
    }
    const double host[2] = {1, 0.5};
    op_problem pr = {.model = "t", .layers = l, .n_layers = 2, .P = 2, .M = 2, .tokens_per_mb = 1};
    pr.comm.none = 1;
    /* the one link is the fast one here: an engine that took it would copy rank 1's in 10 ms */
    pr.comm.host_lat_ms = 0, pr.comm.host_bw_GBps = 1;
    pr.comm.host_n = 2, pr.comm.host_bw_dev_GBps = host;
    op_plan p;
    op_err e = {0};
    CHECK_EQ_INT(op_sched_build("1f1b", &pr, &p, &e), OP_OK);
    if (e.code) return;
    for (int s = 0; s < p.S; s++) p.stage_act[s] = OP_ACT_OFFLOAD;
    op_exec_copy_stats cs[2] = {{0}};
    op_exec_opts eo = {0};
    eo.copy_stats = cs;
    op_compute c = op_compute_emulate_opts(&eo);
    op_exec_result r;
    CHECK_EQ_INT(op_exec_run_threads(&p, &c, &eo, &r, &e), OP_OK);
    if (e.code == 0) op_exec_result_free(&r);
    printf("  copy engines: rank 0 %d transfers %.2f ms, rank 1 %d transfers %.2f ms\n", cs[0].n_xfers,
           cs[0].busy_ms, cs[1].n_xfers, cs[1].busy_ms);
    CHECK_EQ_INT(cs[0].n_xfers, 4);
    CHECK_EQ_INT(cs[1].n_xfers, 4);
    CHECK(cs[0].busy_ms >= 4 * 10 - 0.1);
    CHECK(cs[1].busy_ms >= 4 * 20 - 0.1); /* rank 1 on rank 0's link would take 40 */
    op_plan_free(&p);
}

/* The same job on some devices (op_problem_subset): devices 1 and 3 of a mixed 4 keep their
 * types, limits, host links and the links between them (rows and columns 1 and 3 of the
 * matrix); devices 2 and 3, both of type 1 and one limit, make a uniform problem whose costs
 * are type 1's row and whose limit is theirs.  Both subsets validate and tune. */
TEST(problem_subset) {
    int dt[4];
    double lim[4], lat[16], bw[16], host[4] = {50, 50, 25, 25};
    op_err e = {0};
    op_layer_cost *l = rows2(8, 10, 10);
    op_problem pr = mixed(l, 8, 4, dt, lim, 400, 100);
    pr.comm.none = 0;
    op_comm_default(&pr.comm, 8);
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) lat[a * 4 + b] = 0.01 * (a + 1) + 0.001 * b, bw[a * 4 + b] = 100 + 10 * a + b;
    pr.comm.pair_n = 4, pr.comm.pair_lat_ms = lat, pr.comm.pair_bw_GBps = bw;
    pr.comm.host_n = 4, pr.comm.host_bw_dev_GBps = host, pr.comm.host_bw_GBps = 25;
    CHECK_EQ_INT(op_problem_validate(&pr, &e), OP_OK);
    op_problem q;
    const int mix[2] = {1, 3};
    void *own = op_problem_subset(&pr, mix, 2, &q);
    CHECK_EQ_INT(q.P, 2);
    CHECK_EQ_INT(q.n_types, 2);
    CHECK(q.dev_type && q.dev_type[0] == 0 && q.dev_type[1] == 1);
    CHECK(q.dev_mem_limit && q.dev_mem_limit[0] == 400.0 * MIB && q.dev_mem_limit[1] == 100.0 * MIB);
    CHECK(q.comm.host_n == 2 && q.comm.host_bw_dev_GBps[0] == 50 && q.comm.host_bw_dev_GBps[1] == 25);
    CHECK_EQ_INT(q.comm.pair_n, 2);
    CHECK(q.comm.pair_bw_GBps[0 * 2 + 1] == bw[1 * 4 + 3] && q.comm.pair_bw_GBps[1 * 2 + 0] == bw[3 * 4 + 1]);
    CHECK(q.comm.pair_lat_ms[1 * 2 + 0] == lat[3 * 4 + 1]);
    CHECK_EQ_INT(op_problem_validate(&q, &e), OP_OK);
    op_plan p;
    int rc = op_tune(&q, NULL, &p, &e);
    CHECK_MSG(rc == OP_OK, "mixed subset: %s", e.msg);
    if (rc == OP_OK) op_plan_free(&p);
    free(own);
    const int slow[2] = {2, 3};
    own = op_problem_subset(&pr, slow, 2, &q);
    CHECK(q.n_types <= 1 && !q.dev_type && !q.dev_mem_limit);
    CHECK(q.layers == l + 8); /* type 1's row */
    CHECK(q.mem_limit_bytes == 100.0 * MIB);
    CHECK(q.comm.host_n == 0 && q.comm.host_bw_GBps == 25);
    CHECK(q.comm.pair_n == 2 && q.comm.pair_bw_GBps[1] == bw[2 * 4 + 3]);
    CHECK_EQ_INT(op_problem_validate(&q, &e), OP_OK);
    memset(&e, 0, sizeof e);
    if (op_tune(&q, NULL, &p, &e) == OP_OK) {
        CHECK_NEAR(p.layers[1].f_ms, 2.0, 1e-12); /* the slow type's times */
        op_plan_free(&p);
    } else {
        CHECK_MSG(0, "uniform subset: %s", e.msg);
    }
    free(own);
    free(l);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(profile_by_gpu_measured_types);
    RUN(profile_by_gpu_others_scaled);
    RUN(profile_by_gpu_base_and_uniform);
    RUN(profile_by_gpu_rejects_bad_input);
    RUN(cluster_pairs_round_trip);
    RUN(host_link_per_device_type);
    RUN(host_link_per_device_in_sim_and_file);
    RUN(host_link_per_device_emulated);
    RUN(static_need_per_device_only_small_fail);
    RUN(static_need_heavy_layer_on_big_devices);
    RUN(static_need_when_nothing_fits);
    RUN(static_need_uniform_is_the_floor);
    RUN(problem_subset);
    return check_report("mixed_parts");
}
