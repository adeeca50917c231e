/* megatron.c: a plan's partition as Megatron-LM flags.
 *
 *  - transformer models (layers E, T, m, L): --pipeline-model-parallel-layout, tokens E t m L,
 *    `|` between stages, stages in VPP-major order (flat stage i = vpp_rank * P + pp_rank);
 *  - hybrid models (layers M * - # plus E and L): --hybrid-layer-pattern with `|` segment
 *    boundaries; Megatron writes MoE as E there and has no embedding/head symbol, so those
 *    travel with the first/last segment.
 * Megatron's placement is always the loop map (virtual stage v of rank r = global stage
 * v*P + r), so with our stages in model order the flat index is simply the stage index, and
 * any other placement (V, irregular, unequal stages per device) cannot be expressed. */
#include <stdlib.h>
#include <string.h>

#include "octopipe/export.h"

const char *op_megatron_flag(op_megatron_kind k) {
    return k == OP_MEGATRON_HYBRID ? "--hybrid-layer-pattern" : "--pipeline-model-parallel-layout";
}

/* What makes a plan Megatron runs, said after each placement refusal. */
#define LOOP_HINT " (a plan made with --placement loop has the shape Megatron runs)"

/* Loop placement with S a multiple of P, or an error saying why not. */
static int check_loop(const op_plan *p, const char *what, op_err *err) {
    int P = p->P, S = p->S;
    int *cnt = op_xcalloc((size_t)P, sizeof(int));
    for (int s = 0; s < S; s++) cnt[p->stage_dev[s]]++;
    int dmin = 0, dmax = 0;
    for (int d = 0; d < P; d++) {
        if (cnt[d] < cnt[dmin]) dmin = d;
        if (cnt[d] > cnt[dmax]) dmax = d;
    }
    int lo = cnt[dmin], hi = cnt[dmax];
    free(cnt);
    if (lo != hi)
        return op_errf(err, OP_EINVAL,
                       "%s: device %d holds %d stages but device %d holds %d; Megatron gives "
                       "every pipeline rank the same number of virtual stages (VPP = stages / "
                       "P)%s", what, dmax, hi, dmin, lo, LOOP_HINT);
    int v = S == 2 * P;
    for (int s = 0; s < S && v; s++) v = p->stage_dev[s] == (s < P ? s : 2 * P - 1 - s);
    if (v && P > 1)
        return op_errf(err, OP_EINVAL,
                       "%s: V placement (device 0 holds stages 0 and %d) cannot be expressed: "
                       "Megatron always puts virtual stage v of rank r at global stage v*P + r "
                       "(loop) and has no V or custom stage-to-rank map%s", what, 2 * P - 1,
                       LOOP_HINT);
    for (int s = 0; s < S; s++)
        if (p->stage_dev[s] != s % P)
            return op_errf(err, OP_EINVAL,
                           "%s: stage %d is on device %d, but Megatron would run it on device "
                           "%d: it only knows the loop placement (global stage v*P + r on rank "
                           "r), not this irregular one%s", what, s, p->stage_dev[s], s % P,
                           LOOP_HINT);
    return OP_OK;
}

/* Run-length form of one stage: "Ettt" -> "Et*3" (runs of 3 or more). */
static void rle(const char *s, size_t n, op_buf *out) {
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && s[j] == s[i]) j++;
        if (j - i >= 3) op_buf_printf(out, "%c*%zu", s[i], j - i);
        else op_buf_put(out, s + i, j - i);
        i = j;
    }
}

static int ndigits(int k) {
    int n = 1;
    while (k >= 10) k /= 10, n++;
    return n;
}

void op_megatron_compress(const char *expanded, op_buf *out) {
    /* stages -> run-length strings, interned to ids so blocks compare as ints */
    int S = 1;
    for (const char *c = expanded; *c; c++) S += *c == '|';
    op_buf *enc = op_xcalloc((size_t)S, sizeof(op_buf));
    int *id = op_xcalloc((size_t)S, sizeof(int));
    const char *c = expanded;
    for (int s = 0; s < S; s++) {
        const char *e = strchr(c, '|');
        if (!e) e = c + strlen(c);
        rle(c, (size_t)(e - c), &enc[s]);
        op_buf_put(&enc[s], "", 0);
        id[s] = s;
        for (int t = 0; t < s; t++)
            if (!strcmp(enc[t].data, enc[s].data)) { id[s] = id[t]; break; }
        c = *e ? e + 1 : e;
    }
    /* best[i]: shortest text for stages i..S-1.  A group "(a|b|)*k," repeats a block of L
     * stages k >= 2 times; it never holds the last stage (which has no trailing '|'). */
    int *best = op_xcalloc((size_t)S + 1, sizeof(int));
    int *gl = op_xcalloc((size_t)S, sizeof(int)), *gk = op_xcalloc((size_t)S, sizeof(int));
    for (int i = S - 1; i >= 0; i--) {
        best[i] = (int)enc[i].len + (i < S - 1) + best[i + 1];
        for (int L = 1; i + 2 * L <= S - 1; L++) {
            int blk = 0;
            for (int j = i; j < i + L; j++) blk += (int)enc[j].len + 1;
            for (int k = 1; i + (k + 1) * L <= S - 1; k++) {
                int same = 1;
                for (int j = 0; j < L && same; j++) same = id[i + k * L + j] == id[i + j];
                if (!same) break;
                int cost = 2 + blk + 1 + ndigits(k + 1) + 1 + best[i + (k + 1) * L];
                if (cost < best[i]) best[i] = cost, gl[i] = L, gk[i] = k + 1;
            }
        }
    }
    for (int i = 0; i < S;) {
        if (gk[i]) {
            op_buf_put(out, "(", 1);
            for (int j = i; j < i + gl[i]; j++) op_buf_printf(out, "%s|", enc[j].data);
            op_buf_printf(out, ")*%d,", gk[i]);
            i += gl[i] * gk[i];
        } else {
            op_buf_printf(out, "%s%s", enc[i].data, i < S - 1 ? "|" : "");
            i++;
        }
    }
    op_buf_put(out, "", 0);
    for (int s = 0; s < S; s++) op_buf_free(&enc[s]);
    free(enc), free(id), free(best), free(gl), free(gk);
}

static int is_hybrid_sym(char c) { return c == 'M' || c == '*' || c == '-' || c == '#'; }

int op_export_megatron(const op_plan *p, op_buf *out, op_megatron_kind *kind, op_buf *notes,
                       op_err *err) {
    int hybrid = 0;
    for (int l = 0; l < p->n_layers; l++) hybrid |= is_hybrid_sym(p->layers[l].sym);
    const char *what = hybrid ? "Megatron hybrid layer pattern" : "Megatron layout";
    for (int l = 0; l < p->n_layers; l++) {
        const op_layer_cost *c = &p->layers[l];
        const char *why = NULL;
        switch (c->sym) {
        case 'E': case 'L': break;
        case 'T': if (hybrid) why = "a whole transformer block in a hybrid model (Megatron's hybrid pattern wants its attention * and MLP - as separate layers)"; break;
        case 'm': if (hybrid) why = "an MTP block (the hybrid pattern's /-MTP syntax is not exported)"; break;
        case 'M': case '*': case '-': case '#': break;
        case 'V': why = "a vision encoder layer (Megatron's layout has no encoder token; it raises NotImplementedError)"; break;
        case 'H': why = "a parallel attention+Mamba block (falcon_h1 style), which has no Megatron symbol"; break;
        default: why = "a layer kind Megatron has no symbol for"; break;
        }
        if (why)
            return op_errf(err, OP_EINVAL, "%s: layer %d (%s, '%c') is %s", what, l, c->name,
                           c->sym ? c->sym : '?', why);
    }
    int rc = op_export_check_partition(p, err);
    if (rc) return op_err_prefix(err, "%s", what);
    rc = check_loop(p, what, err);
    if (rc) return rc;

    op_buf ex = {0};
    int seen_dec_after_mtp = 0, mtp = 0;
    for (int s = 0; s < p->S; s++) {
        if (s) op_buf_put(&ex, "|", 1);
        int n = 0;
        for (int l = p->stage_first[s]; l < p->stage_first[s + 1]; l++) {
            char c = p->layers[l].sym, t;
            if (hybrid) {
                if (c == 'E' || c == 'L') continue;
                t = c == '#' ? 'E' : c;
            } else {
                t = c == 'T' ? 't' : c;
                if (c == 'm') {
                    mtp = 1;
                    if (s % p->P == 0 || s < p->S - p->P) {
                        op_buf_free(&ex);
                        return op_errf(err, OP_EINVAL,
                                       "%s: MTP layer %d is in stage %d (rank %d, virtual stage "
                                       "%d), but Megatron needs MTP in the last virtual stage of "
                                       "a rank other than 0", what, l, s, s % p->P, s / p->P);
                    }
                }
                if (c == 'T' && mtp) seen_dec_after_mtp = 1;
            }
            op_buf_put(&ex, &t, 1);
            n++;
        }
        if (!n && notes)
            op_buf_printf(notes,
                          "note: segment %d is empty: stage %d holds only the %s, which the "
                          "hybrid pattern cannot name\n", s, s, s == 0 ? "embedding" : "head");
    }
    op_buf_put(&ex, "", 0);
    if (seen_dec_after_mtp) {
        op_buf_free(&ex);
        return op_errf(err, OP_EINVAL, "%s: a decoder layer follows an MTP layer; Megatron "
                                       "needs MTP after all decoders", what);
    }
    if (notes && op_export_dev_type(p, 0)) {
        /* Megatron's flags carry no device types: the launcher must put pipeline rank r on
         * the GPU the plan costed it for, or the partition's balance is lost */
        op_buf_printf(notes, "note: mixed cluster (");
        op_export_type_counts(p, notes);
        op_buf_printf(notes, "): pipeline rank r must run on the GPU type below; stages per rank\n");
        for (int d = 0; d < p->P; d++) {
            op_buf_printf(notes, "  pipeline rank %d: %s, stages", d, op_export_dev_type(p, d));
            for (int s = 0; s < p->S; s++)
                if (p->stage_dev[s] == d)
                    op_buf_printf(notes, " %d (layers %d-%d)", s, p->stage_first[s], p->stage_first[s + 1] - 1);
            op_buf_printf(notes, "\n");
        }
    }
    if (hybrid) op_buf_put(out, ex.data, ex.len); /* the hybrid pattern has no repeat syntax */
    else op_megatron_compress(ex.data, out);
    op_buf_free(&ex);
    if (kind) *kind = hybrid ? OP_MEGATRON_HYBRID : OP_MEGATRON_LAYOUT;
    return OP_OK;
}
