/* train_flags.c: the training settings a plan's costs assume, as a framework's flags.
 *
 * A plan is only as good as the setup it was costed for: a Megatron run at another micro-batch
 * size, another number of microbatches or without the recomputation the plan needs to fit is
 * a different problem (or an out-of-memory error).  So the exports carry, besides the
 * partition, what the plan file records: TP/EP/DP degrees, ZeRO-1, sequence length,
 * micro-batch size and the activation policy of each stage.
 *
 * Frameworks set one recomputation for every stage (Megatron's --recompute-*, torchtitan's
 * activation_checkpoint.mode), where the plan may choose per stage.  Where the stages differ,
 * the export gives every stage the strongest policy any stage has (so the plan still fits,
 * only slower than predicted) and says so. */
#include <stdio.h>

#include "octopipe/export.h"

/* Memory a policy frees, for "strongest": offload counts as full, the nearest setting the
 * frameworks have (full keeps only the stage input, offload keeps none of the stash). */
static int act_rank(int a) {
    return a == OP_ACT_OFFLOAD || a == OP_ACT_FULL ? 2 : a == OP_ACT_SELECTIVE ? 1 : 0;
}

int op_export_act_strongest(const op_plan *p, int *mixed) {
    int best = OP_ACT_KEEP, diff = 0;
    for (int s = 0; s < p->S; s++) {
        int a = p->stage_act[s];
        if (act_rank(a) > act_rank(best)) best = a == OP_ACT_OFFLOAD ? OP_ACT_FULL : a;
        if (s && act_rank(a) != act_rank(p->stage_act[0])) diff = 1;
    }
    if (mixed) *mixed = diff;
    return best;
}

#define FULL_OR_OFFLOAD (-1) /* list_stages: the stages whose stash leaves the device */

static int stage_has(const op_plan *p, int s, int a) {
    return a == FULL_OR_OFFLOAD ? act_rank(p->stage_act[s]) == 2 : p->stage_act[s] == a;
}

/* The stages with policy `a` as "1, 4 and 7" (at most 12 listed). */
static void list_stages(const op_plan *p, int a, op_buf *out) {
    int n = 0, total = 0;
    for (int s = 0; s < p->S; s++) total += stage_has(p, s, a);
    for (int s = 0; s < p->S; s++) {
        if (!stage_has(p, s, a)) continue;
        if (n == 12) {
            op_buf_printf(out, " and %d more", total - n);
            break;
        }
        op_buf_printf(out, "%s%d", n == 0 ? "" : n == total - 1 ? " and " : ", ", s);
        n++;
    }
}

/* What the plan's per-stage policies become under one framework-wide setting. */
static void act_notes(const op_plan *p, const char *fw, op_buf *notes) {
    /* fw: "Megatron" or "torchtitan" */
    if (!notes) return;
    int mixed, best = op_export_act_strongest(p, &mixed);
    int n_off = 0;
    for (int s = 0; s < p->S; s++) n_off += p->stage_act[s] == OP_ACT_OFFLOAD;
    if (n_off) {
        op_buf_printf(notes, "note: stage%s ", n_off > 1 ? "s" : "");
        list_stages(p, OP_ACT_OFFLOAD, notes);
        op_buf_printf(notes, " offload%s %s stash to host memory, which %s cannot set per "
                             "stage; the settings recompute %s in full instead, which keeps "
                             "each microbatch's stage input on the device where offload keeps "
                             "nothing, so the peak can pass the plan's (for a plan without "
                             "offload: octopipe plan --offload none)\n",
                      n_off > 1 ? "" : "s", n_off > 1 ? "their" : "its", fw,
                      n_off > 1 ? "them" : "it");
    }
    if (mixed)
        op_buf_printf(notes,
                      "note: the plan chooses recomputation per stage, %s takes one setting for all: "
                      "the settings give every stage %s recomputation, the strongest the plan "
                      "uses, so it fits memory but runs slower than the plan's prediction (for "
                      "a plan that runs as predicted: octopipe plan --recompute %s)\n",
                      fw, op_act_policy_name(best), op_act_policy_name(best));
}

void op_export_megatron_settings(const op_plan *p, op_megatron_kind kind, op_buf *out,
                                 op_buf *notes) {
    if (p->seq > 0 && p->mbs > 0)
        op_buf_printf(out, " --seq-length %d --micro-batch-size %d --global-batch-size %lld",
                      p->seq, p->mbs, (long long)p->M * p->mbs * (p->dp > 1 ? p->dp : 1));
    else if (notes)
        op_buf_printf(notes, "note: the plan file does not record its sequence length and "
                             "micro-batch size (a profile's measured times hold for the batch "
                             "they were measured at, or the file predates the record); give Megatron "
                             "--global-batch-size = %d x --micro-batch-size x the data-parallel "
                             "size, so that it runs %d microbatches\n", p->M, p->M);
    if (p->zero1 && p->dp > 1) op_buf_printf(out, " --use-distributed-optimizer");
    int best = op_export_act_strongest(p, NULL);
    if (kind == OP_MEGATRON_HYBRID && best == OP_ACT_FULL) {
        /* Megatron's hybrid stack runs its layers one after another with no full-layer
         * checkpointing (only the attention layers, TransformerLayers, take selective): the
         * closest it has, and a note that the plan's memory will not hold */
        op_buf_printf(out, " --recompute-granularity selective");
        if (notes) {
            op_buf_printf(notes, "note: the plan recomputes in full or offloads on stage(s) ");
            list_stages(p, FULL_OR_OFFLOAD, notes);
            op_buf_printf(notes, ", which Megatron's hybrid stack (--hybrid-layer-pattern) cannot "
                                 "run: it has no full-layer recomputation and no per-stage "
                                 "offload, so these flags give its attention layers selective "
                                 "recomputation only and the plan's peak memory will not hold "
                                 "(for a plan it runs: octopipe plan --recompute selective "
                                 "--offload none)\n");
        }
        return;
    }
    if (best == OP_ACT_SELECTIVE) {
        /* Megatron's default selective module is core_attn: the plan's selective */
        op_buf_printf(out, " --recompute-granularity selective");
    } else if (best == OP_ACT_FULL) {
        /* uniform over groups of N layers: with N the stages' common layer count one checkpoint
         * per stage, only its input kept, as the plan's full.  Megatron versions before the
         * last group was cut at the stage's end need N to divide every stage's count, so N is
         * their greatest common divisor (stages without decoder layers aside) */
        int g = 0, most = 0;
        for (int s = 0; s < p->S; s++) {
            int n = 0;
            for (int l = p->stage_first[s]; l < p->stage_first[s + 1]; l++) {
                char c = p->layers[l].sym;
                n += kind == OP_MEGATRON_HYBRID ? (c == 'M' || c == '*' || c == '-' || c == '#')
                                                : c == 'T';
            }
            g = op_gcd(g, n);
            if (n > most) most = n;
        }
        if (g < 1) g = 1;
        op_buf_printf(out, " --recompute-granularity full --recompute-method uniform "
                           "--recompute-num-layers %d", g);
        if (g < most && notes) {
            char every[32] = "every layer";
            if (g > 1) snprintf(every, sizeof every, "every %d layers", g);
            op_buf_printf(notes, "note: the stages hold different numbers of layers, and "
                                 "--recompute-num-layers %d divides them all: Megatron keeps the "
                                 "input of %s where the plan keeps one per stage (one [s/tp, b, "
                                 "h] tensor a microbatch each)\n", g, every);
        }
    }
    act_notes(p, "Megatron", notes);
}

void op_export_torchtitan_settings(const op_plan *p, op_buf *out, op_buf *notes) {
    if (p->seq > 0 && p->mbs > 0)
        op_buf_printf(out, "training.seq_len=%d, training.local_batch_size=%lld, "
                           "parallelism.pipeline_parallel_microbatch_size=%d, ",
                      p->seq, (long long)p->M * p->mbs, p->mbs);
    else
        op_buf_printf(out, "training.local_batch_size = %d x "
                           "parallelism.pipeline_parallel_microbatch_size, ", p->M);
    int best = op_export_act_strongest(p, NULL);
    if (best == OP_ACT_FULL) op_buf_printf(out, "activation_checkpoint.mode=full, ");
    if (best == OP_ACT_SELECTIVE && notes)
        op_buf_printf(notes, "note: the plan recomputes the attention core (Megatron's selective), "
                             "which torchtitan has no setting for: its activation_checkpoint.mode="
                             "selective keeps another set of tensors, and mode=full fits for "
                             "sure but recomputes more\n");
    act_notes(p, "torchtitan", notes);
}
