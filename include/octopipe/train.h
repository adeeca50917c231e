/* train.h: training the reference model: data, AdamW, checkpoints and the single-process loop.
 *
 * Everything a step does depends only on (seed, step, microbatch), never on which process or
 * stage computes it: the data of microbatch m at step t is a pure function of both, weights
 * are initialised per layer, and gradients fold in microbatch order (nn.h).  So a pipelined run
 * and this single-process loop produce bitwise the same losses and weights. */
#ifndef OCTOPIPE_TRAIN_H
#define OCTOPIPE_TRAIN_H
#include "octopipe/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- data ---- */
typedef enum op_data_kind { OP_DATA_TEXT, OP_DATA_COPY, OP_DATA_REVERSE } op_data_kind;

typedef struct op_train_data {
    op_data_kind kind;
    unsigned char *text; /* OP_DATA_TEXT: the whole corpus, bytes = tokens */
    size_t len;
    int seq, batch, vocab;
    uint64_t seed;
    char source[256]; /* what was loaded, for messages */
} op_train_data;

/* The default English corpus, installed by scripts/setup.sh (package jargon-text). */
#define OP_TRAIN_DEFAULT_TEXT "/usr/share/doc/jargon-text/jargon.txt.gz"

/* spec: "text" (the default corpus), "copy", "reverse" (synthetic tasks), or a path to a text
 * file (".gz" is read through `gzip -dc`).  Errors name the file and what is wrong. */
int op_train_data_open(op_train_data *d, const char *spec, const op_nn_cfg *c, uint64_t seed,
                       op_err *err);
/* tokens, targets: (batch*seq).  Targets < 0 are not scored (synthetic tasks score only the
 * answer half).  Pure function of (seed, step, mb). */
void op_train_data_batch(const op_train_data *d, int64_t step, int mb, int32_t *tokens,
                         int32_t *targets);
void op_train_data_free(op_train_data *d);

/* ---- optimizer ---- */
typedef struct op_adamw {
    float lr, beta1, beta2, eps, wd;
    int warmup; /* linear warm-up steps */
} op_adamw;
void op_adamw_default(op_adamw *o); /* lr 3e-3, betas 0.9/0.95, eps 1e-8, wd 0.01, warmup 10 */
/* One update of step t (0-based) on n parameters. */
void op_adamw_update(const op_adamw *o, int64_t t, float *p, const float *g, float *m, float *v,
                     size_t n);
void op_adamw_stage(const op_adamw *o, int64_t t, op_nn_stage *s);

/* ---- checkpoints ---- */
/* The settings of the run that wrote a checkpoint besides the model (which a resume must
 * match): a resume with others continues, but is not bitwise the uninterrupted run, so the
 * launcher says which differ. */
typedef struct op_ckpt_run {
    int microbatches; /* per step; 0: not recorded (older files, or saved without) */
    op_adamw opt;     /* as the run used it (defaults filled in) */
    char data[4096];  /* op_train_data_open spec */
} op_ckpt_run;
/* r's fields from a run's settings (data NULL: the default "text"; a spec longer than r->data
 * holds is cut, and the launcher then compares the cut text). */
void op_ckpt_run_set(op_ckpt_run *r, int microbatches, const op_adamw *opt, const char *data);
/* Writes the parameters and AdamW state of `stages` (which together hold layers
 * [0, n_layers) in order) and the next step to PATH atomically, with a checksum; run (may
 * be NULL: not recorded) the settings it trained with. */
int op_ckpt_save_run(const char *path, const op_nn_model *m, op_nn_stage *const *stages, int n,
                     int64_t next_step, const op_ckpt_run *run, op_err *err);
int op_ckpt_save(const char *path, const op_nn_model *m, op_nn_stage *const *stages, int n,
                 int64_t next_step, op_err *err); /* op_ckpt_save_run without settings */
/* Reads PATH back into the stages (any partition).  Refuses a file whose checksum, size or
 * model does not match, with a message saying which. */
int op_ckpt_load(const char *path, const op_nn_model *m, op_nn_stage *const *stages, int n,
                 int64_t *next_step, op_err *err);
/* The same checks without loading (a launcher refusing a bad checkpoint before any rank
 * starts): OP_OK with the step it resumes at, or the message op_ckpt_load would give. */
int op_ckpt_check(const char *path, const op_nn_model *m, int64_t *next_step, op_err *err);
/* The same, and the run settings the file records into *run (microbatches 0 where none). */
int op_ckpt_check_run(const char *path, const op_nn_model *m, int64_t *next_step,
                      op_ckpt_run *run, op_err *err);
/* OP_EINVAL, saying so, when PATH exists and is not a regular file (a directory, FIFO or
 * device): checkpoints are replaced by rename and read twice.  Save, load and check apply it. */
int op_ckpt_check_file(const char *path, op_err *err);

/* ---- single-process training ---- */
typedef struct op_train_opts {
    const char *model;   /* preset or pattern (default "tiny") */
    const char *data;    /* op_train_data_open spec (default "text") */
    int microbatches;    /* per step (default 4) */
    int steps;           /* train until this step (total, counting resumed ones) */
    int n_stages;        /* cut the model into this many in-process stages (default 1) */
    uint64_t seed;       /* init and data (default 1) */
    op_adamw opt;        /* lr 0 = defaults */
    const char *ckpt_dir; /* NULL = no checkpoints */
    int ckpt_every;      /* steps between checkpoints (0 = only at the end) */
    int resume;          /* continue from ckpt_dir/model.ckpt */
    int log_every;       /* progress line every N steps (0 = quiet) */
    FILE *log;           /* default stdout */
    double *losses;      /* optional out: [steps] mean CE per step, by global step */
    int recompute;       /* op_act_policy of every stage (nn.h op_nn_stage_set_policy; 0 keep) */
    size_t *peak_act;    /* optional out: most activation bytes one stage held at once */
} op_train_opts;

void op_train_opts_default(op_train_opts *o);
int op_train_single(const op_train_opts *o, op_err *err);

/* ---- per-layer profiler ---- */
typedef struct op_layer_prof {
    char sym;
    double f_ms, i_ms, w_ms;     /* medians over the repeats, one microbatch */
    size_t act_bytes;            /* held after F (until I frees its part) */
    size_t act_w_bytes;          /* held after I until W (includes I's stash for W) */
    size_t param_bytes, out_bytes;
    /* selective recomputation: the attention core's time (median, F's part that I redoes) and
     * the bytes held after F when it is dropped; 0 and act_bytes for kinds without one */
    double f_sel_ms;
    size_t act_sel_bytes;
} op_layer_prof;
/* Measures one layer of each distinct kind of m (first appearance order) alone in a stage;
 * returns how many kinds were written to out (at most 8). */
int op_train_profile(const op_nn_model *m, int repeats, op_layer_prof *out);
/* The same in thread CPU time (cpu_clock = 1) or wall time (0): on a machine shared with other
 * jobs the wall clock counts time other processes held the core, CPU time does not. */
int op_train_profile_clock(const op_nn_model *m, int repeats, int cpu_clock, op_layer_prof *out);
/* The profile file (docs/profile.md) for m from the measurements. */
void op_train_profile_json(const op_nn_model *m, const op_layer_prof *p, int n, int repeats,
                           op_buf *out);

#ifdef __cplusplus
}
#endif
#endif
