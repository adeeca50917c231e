/* libFuzzer target: the checkpoint reader (op_ckpt_check, op_ckpt_load; `octopipe train
 * --resume` and its launcher read a file that a killed run, a full disk or a user may have
 * left in any state).  The readers take a path, so each input is written to a file first.
 *
 * A checkpoint ends in a checksum of everything before it, so almost every mutation stops at
 * "checksum mismatch".  Each input is therefore read twice: as it is, and with its last 8
 * bytes replaced by the right checksum, which lets mutations reach the version, model,
 * parameter count, size, step and value checks behind it.
 *
 * What must hold besides "no crash, no leak": check and load give the same answer (the
 * launcher refuses exactly what the ranks would); a file they accept saves back byte for byte
 * (nothing unchecked slipped through); this target's own checkpoint is accepted.
 *
 * FUZZ_CKPT_SEED=PATH ./fuzz_ckpt writes that checkpoint to PATH and exits (fuzz/run.sh and
 * tests/sh_fuzz.sh seed from it, so the seed follows the format). */
#include "fuzz_util.h"
#include "octopipe/train.h"

static op_nn_model ck_model;
static op_nn_stage ck_st[2];
static op_nn_stage *ck_sp[2] = {&ck_st[0], &ck_st[1]};
static char ck_in[128], ck_out[128];
static char *ck_ref;   /* the reference model's checkpoint */
static size_t ck_ref_len;

/* ckpt.c's checksum (FNV-1a 64), to repair an input's last 8 bytes */
static uint64_t ck_fnv1a(const uint8_t *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    /* every layer kind at the smallest dimensions the model takes: 91 parameters, a 1.2 kB
     * checkpoint, so mutations stay well within libFuzzer's default input size */
    op_nn_cfg c = {.vocab = 4, .d = 2, .seq = 2, .batch = 1, .n_heads = 1, .ssm_inner = 1,
                   .ssm_state = 1, .ssm_conv = 1, .ssm_dt_rank = 1, .ffn = 1, .n_experts = 2,
                   .top_k = 1, .expert_dim = 1, .shared_dim = 1, .aux_coef = 0.01f,
                   .norm_eps = 1e-5f, .seed = 1};
    op_err e = {0};
    if (op_nn_model_init(&ck_model, "M*-#", &c, &e) != OP_OK) {
        fprintf(stderr, "fuzz_ckpt: %s\n", e.msg);
        abort();
    }
    /* two stages: load splits the arrays at a stage boundary */
    op_nn_stage_init(&ck_st[0], &ck_model, 0, 2, 1);
    op_nn_stage_init(&ck_st[1], &ck_model, 2, ck_model.n_layers, 1);
    fuzz_tmp_path("in.ckpt", ck_in, sizeof ck_in);
    fuzz_tmp_path("out.ckpt", ck_out, sizeof ck_out);
    int64_t step = -1;
    op_adamw opt;
    op_adamw_default(&opt);
    op_ckpt_run run; /* the seed records a run's settings, as `octopipe train` writes them */
    op_ckpt_run_set(&run, 4, &opt, "copy");
    if (op_ckpt_save_run(ck_out, &ck_model, ck_sp, 2, 7, &run, &e) != OP_OK ||
        op_read_file(ck_out, &ck_ref, &ck_ref_len, &e) != OP_OK ||
        op_ckpt_load(ck_out, &ck_model, ck_sp, 2, &step, &e) != OP_OK || step != 7) {
        fprintf(stderr, "fuzz_ckpt: the reference checkpoint does not round-trip: %s\n", e.msg);
        abort();
    }
    const char *seed = getenv("FUZZ_CKPT_SEED");
    if (seed) {
        fuzz_put_file(seed, ck_ref, ck_ref_len);
        exit(0);
    }
    return 0;
}

static void ck_read(const uint8_t *data, size_t size) {
    fuzz_put_file(ck_in, data, size);
    op_err ec = {0}, el = {0};
    int64_t sc = -1, sl = -1;
    if (op_ckpt_check_file(ck_in, &ec) != OP_OK) abort(); /* a regular file */
    op_ckpt_run run;
    int rc = op_ckpt_check_run(ck_in, &ck_model, &sc, &run, &ec);
    int rl = op_ckpt_load(ck_in, &ck_model, ck_sp, 2, &sl, &el);
    if (rc != rl || (rc && strcmp(ec.msg, el.msg)) || (!rc && sc != sl)) abort();
    if (size == ck_ref_len && !memcmp(data, ck_ref, size) && (rc || sl != 7)) abort();
    if (rc) {
        if (!strstr(el.msg, ck_in)) abort(); /* refusals name the file */
        return;
    }
    if (sl < 0) abort();
    /* accepted: saving what was loaded (with the run settings read) must give the same bytes;
     * a version-1 file comes back as version 2, which must load to the same step */
    char *back = NULL;
    size_t n = 0;
    uint32_t ver;
    memcpy(&ver, data + 8, 4);
    if (op_ckpt_save_run(ck_out, &ck_model, ck_sp, 2, sl, &run, &el) != OP_OK ||
        op_read_file(ck_out, &back, &n, &el) != OP_OK)
        abort();
    if (ver == 2 && (n != size || memcmp(back, data, n))) abort();
    int64_t s2 = -1;
    if (ver == 1 && (op_ckpt_load(ck_out, &ck_model, ck_sp, 2, &s2, &el) != OP_OK || s2 != sl)) abort();
    free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ck_read(data, size);
    if (size >= 8) {
        uint8_t *fixed = malloc(size);
        if (!fixed) abort();
        memcpy(fixed, data, size);
        uint64_t h = ck_fnv1a(fixed, size - 8);
        memcpy(fixed + size - 8, &h, 8);
        ck_read(fixed, size);
        free(fixed);
    }
    return 0;
}
