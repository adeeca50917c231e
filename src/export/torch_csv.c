/* torch_csv.c: a plan as torch.distributed.pipelining's compute_only CSV, and torchtitan's
 * module_fqns_per_model_part for its partition.
 *
 * torch's _PipelineScheduleRuntime infers the stage -> rank map from the CSV rows
 * (_validate_schedule), so any placement runs as long as the stages are built on the ranks
 * the rows say (every rank must hold at least one): the stage map JSON tells a launcher
 * which.  torchtitan itself builds stages only for the loop and V maps (equal stages per
 * rank); the hint says which settings match. */
#include <stdio.h>
#include <string.h>

#include "octopipe/export.h"

op_torch_style op_export_torch_style(const op_plan *p, op_err *err) {
    int P = p->P, S = p->S;
    if (S % P != 0) {
        op_errf(err, OP_EINVAL,
                "%d stages on %d devices: torchtitan needs the same number of stages on every "
                "rank (num_stages %% pp == 0)", S, P);
        return OP_TORCH_IRREGULAR;
    }
    int loop = 1, v = S == 2 * P;
    for (int s = 0; s < S; s++) {
        if (p->stage_dev[s] != s % P) loop = 0;
        if (v && p->stage_dev[s] != (s < P ? s : 2 * P - 1 - s)) v = 0;
    }
    if (loop) return OP_TORCH_LOOP;
    if (v) return OP_TORCH_V;
    /* say which stage breaks which rule, so the user sees what to change */
    int bad = 0;
    while (bad < S && p->stage_dev[bad] == bad % P) bad++;
    if (S == 2 * P) {
        int badv = 0;
        while (badv < S && p->stage_dev[badv] == (badv < P ? badv : 2 * P - 1 - badv)) badv++;
        op_errf(err, OP_EINVAL,
                "placement is neither loop (stage %d would be on rank %d, not %d) nor V (stage "
                "%d would be on rank %d, not %d): torchtitan builds only those stage-to-rank "
                "maps", bad, bad % P, p->stage_dev[bad], badv,
                badv < P ? badv : 2 * P - 1 - badv, p->stage_dev[badv]);
    } else {
        op_errf(err, OP_EINVAL,
                "placement is not loop (stage %d would be on rank %d, not %d) and V needs "
                "exactly 2 stages per rank (this plan has %d): torchtitan builds only those "
                "stage-to-rank maps", bad, bad % P, p->stage_dev[bad], S / P);
    }
    return OP_TORCH_IRREGULAR;
}

/* A plan may leave devices without a stage (few microbatches: keeping the layers on fewer
 * devices is faster); torch's runtime needs a stage on every rank of the pipeline group, so
 * say which devices are idle and what to plan or run instead. */
static int every_rank_holds_a_stage(const op_plan *p, op_err *err) {
    char idle[96] = "";
    int used = 0, n_idle = 0, len = 0;
    for (int d = 0; d < p->P; d++) {
        int has = 0;
        for (int s = 0; s < p->S && !has; s++) has = p->stage_dev[s] == d;
        used += has;
        if (has) continue;
        if (n_idle < 8)
            len += snprintf(idle + len, sizeof idle - len, "%s%d", n_idle ? ", " : "", d);
        else if (n_idle == 8)
            len += snprintf(idle + len, sizeof idle - len, ", ...");
        n_idle++;
    }
    if (!n_idle) return OP_OK;
    return op_errf(err, OP_EINVAL,
                   "device%s %s hold%s no stage (the plan keeps its %d stages on %d of %d "
                   "devices) and torch's runtime needs a stage on every rank: plan for %d "
                   "devices (--devices %d), or run this plan with octopipe run",
                   n_idle > 1 ? "s" : "", idle, n_idle > 1 ? "" : "s", p->S, used, p->P, used,
                   used);
}

/* compute_only rows of p (no check). */
static void csv_rows(const op_plan *p, op_buf *b) {
    for (int d = 0; d < p->P; d++) {
        for (int i = 0; i < p->n_ops[d]; i++) {
            const op_op *o = &p->ops[d][i];
            op_buf_printf(b, "%s%d%s%d", i ? "," : "", o->stage, op_kind_name((op_kind)o->kind),
                          o->mb);
        }
        op_buf_put(b, "\n", 1);
    }
}

int op_export_torch_csv(const op_plan *p, op_buf *out, op_err *err) {
    int rc = op_plan_validate(p, err);
    if (rc == OP_OK) rc = every_rank_holds_a_stage(p, err);
    if (rc) return op_err_prefix(err, "torch CSV");
    op_buf b = {0};
    csv_rows(p, &b);
    /* what torch would say about it, before anyone runs it */
    rc = op_export_torch_csv_check(b.data, p->P, p->S, p->M, NULL, err);
    if (rc == OP_OK) op_buf_put(out, b.data, b.len);
    else op_err_prefix(err, "torch CSV fails torch's checks");
    op_buf_free(&b);
    return rc;
}

int op_export_torch_comms_csv(const op_plan *p, op_buf *out, op_err *err) {
    int rc = op_plan_validate(p, err);
    if (rc == OP_OK) rc = every_rank_holds_a_stage(p, err);
    if (rc) return op_err_prefix(err, "torch comms CSV");
    op_buf b = {0};
    csv_rows(p, &b);
    rc = op_export_torch_csv_lower(b.data, p->P, p->S, p->M, out, err);
    if (rc) op_err_prefix(err, "torch comms CSV fails torch's checks");
    op_buf_free(&b);
    return rc;
}

int op_export_torch_stage_map(const op_plan *p, op_buf *out, op_err *err) {
    int rc = op_export_check_partition(p, err);
    if (rc) return op_err_prefix(err, "torch stage map");
    op_torch_style st = op_export_torch_style(p, NULL);
    op_buf_printf(out,
                  "{\"format\": \"octopipe.torch-stages/1\", \"ranks\": %d, \"stages\": %d, "
                  "\"microbatches\": %d, \"style\": \"%s\",\n \"stage_to_rank\": [",
                  p->P, p->S, p->M,
                  st == OP_TORCH_LOOP ? "loop" : st == OP_TORCH_V ? "v" : "irregular");
    for (int s = 0; s < p->S; s++) op_buf_printf(out, "%s%d", s ? ", " : "", p->stage_dev[s]);
    op_buf_printf(out, "],\n \"stage_layers\": [");
    for (int s = 0; s < p->S; s++)
        op_buf_printf(out, "%s[%d, %d]", s ? ", " : "", p->stage_first[s], p->stage_first[s + 1]);
    op_buf_printf(out, "],\n \"layer_kinds\": [");
    for (int l = 0; l < p->n_layers; l++) {
        char k = p->layers[l].sym;
        op_buf_printf(out, "%s\"%c\"", l ? ", " : "", k >= 32 && k < 127 && k != '"' && k != '\\' ? k : '?');
    }
    op_buf_printf(out, "],\n \"split_backward\": [");
    for (int s = 0; s < p->S; s++) op_buf_printf(out, "%s%d", s ? ", " : "", p->stage_split[s] ? 1 : 0);
    /* each stage's activation policy, as the plan file's "activation" (python/octopipe_torch
     * applies full and offload) */
    op_buf_printf(out, "],\n \"activation\": [");
    for (int s = 0; s < p->S; s++)
        op_buf_printf(out, "%s\"%s\"", s ? ", " : "", op_act_policy_name(p->stage_act[s]));
    op_buf_printf(out, "]");
    /* a mixed cluster: which GPU each rank must be (CSV rows have no room for it) */
    for (int d = 0; op_export_dev_type(p, 0) && d < p->P; d++) {
        const char *t = op_export_dev_type(p, d);
        op_buf_printf(out, "%s", d ? ", " : ",\n \"rank_types\": [");
        op_buf_json_str(out, t ? t : ""); /* the plan file's name, any string */
        op_buf_printf(out, "%s", d == p->P - 1 ? "]" : "");
    }
    op_buf_printf(out, "}\n");
    return OP_OK;
}

void op_export_torch_hint(const op_plan *p, op_buf *out) {
    op_torch_style st = op_export_torch_style(p, NULL);
    int per = p->S / p->P;
    if (st == OP_TORCH_IRREGULAR) {
        op_buf_printf(out, "torchtitan builds only loop and V maps; this placement runs in "
                           "torch's _PipelineScheduleRuntime with the stages built per "
                           "--torch-stage-map (python/octopipe_torch does this)\n");
        return;
    }
    op_buf notes = {0};
    op_buf_printf(out, "torchtitan: ");
    if (p->tp > 1) op_buf_printf(out, "parallelism.tensor_parallel_degree=%d, ", p->tp);
    if (p->ep > 1) op_buf_printf(out, "parallelism.expert_parallel_degree=%d, ", p->ep);
    op_export_torchtitan_settings(p, out, &notes);
    op_buf_printf(out,
                  "parallelism.pipeline_parallel_degree=%d, "
                  "pipeline_parallel_schedule=%s, pipeline_parallel_schedule_csv=<the CSV>; %d "
                  "stages (%d per rank, %s map): module_fqns_per_model_part from --torch-fqns\n",
                  p->P, st == OP_TORCH_V ? "ZBVZeroBubble" : "PipelineScheduleMulti", p->S, per,
                  st == OP_TORCH_V ? "v" : "loop");
    if (notes.len) op_buf_put(out, notes.data, notes.len);
    op_buf_free(&notes);
}

int op_export_torch_fqns(const op_plan *p, op_buf *out, op_err *err) {
    int rc = op_export_check_partition(p, err);
    if (rc) return op_err_prefix(err, "torchtitan FQNs");
    op_buf b = {0};
    int dec = 0;
    op_buf_put(&b, "[", 1);
    for (int s = 0; s < p->S && rc == OP_OK; s++) {
        op_buf_printf(&b, "%s\n  [", s ? "," : "");
        int n = 0;
        for (int l = p->stage_first[s]; l < p->stage_first[s + 1]; l++) {
            char sym = p->layers[l].sym;
            const char *sep = n ? ", " : "";
            if (sym == 'E') op_buf_printf(&b, "%s\"tok_embeddings\"", sep);
            else if (sym == 'T') op_buf_printf(&b, "%s\"layers.%d\"", sep, dec++);
            else if (sym == 'L') op_buf_printf(&b, "%s\"norm\", \"output\"", sep);
            else if (sym == 'V') {
                if (s != 0) {
                    rc = op_errf(err, OP_EINVAL,
                                 "torchtitan FQNs: vision layer %d (%s) is in stage %d, but "
                                 "torchtitan keeps the whole vision_encoder in stage 0",
                                 l, p->layers[l].name, s);
                    break;
                }
                if (l == 0 || p->layers[l - 1].sym != 'V')
                    op_buf_printf(&b, "%s\"vision_encoder\"", sep);
                else
                    continue;
            } else {
                rc = op_errf(err, OP_EINVAL,
                             "torchtitan FQNs: layer %d (%s, kind '%c') has no torchtitan module "
                             "(its models have tok_embeddings, layers.N, norm, output)",
                             l, p->layers[l].name, sym ? sym : '?');
                break;
            }
            n++;
        }
        op_buf_put(&b, "]", 1);
    }
    op_buf_put(&b, "\n]\n", 3);
    if (rc == OP_OK) op_buf_put(out, b.data, b.len);
    op_buf_free(&b);
    return rc;
}
