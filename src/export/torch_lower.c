/* torch_lower.c: the bookkeeping passes of torch's compute_only -> compute_comms lowering
 * (_PipelineScheduleRuntime._prepare_schedule_with_comms at its defaults, torch 2.15), so the
 * exported compute_comms CSV is the one torch would run.  The send/recv insertion between
 * them is torch_check.c's (the checker needs it anyway). */
#include <stdlib.h>

#include "export/torch_rows.h"

enum { MAX_ACTIVE = 3 }; /* max_active_stages; unshard_lookahead "full" = the same */

/* The first `count` distinct stages of rows r[i..]: torch's next_stage_indices. */
static int next_stages(const row *r, int i, int count, int *out) {
    int n = 0;
    for (; i < r->n && n < count; i++) {
        int seen = 0;
        for (int k = 0; k < n; k++) seen |= out[k] == r->a[i].stage;
        if (!seen) out[n++] = r->a[i].stage;
    }
    return n;
}

static act mk(int stage, int type, int mb) {
    act a = {stage, mb, (int16_t)type, 0, 0};
    return a;
}

/* _add_unshard_reshard: UNSHARD a stage before the window of the next 3 stages first needs
 * it, RESHARD it when it leaves the window (no-ops without FSDP, but they take lock-step
 * slots in the send/recv pass, so the lowered order depends on them). */
void op_torch_add_unshard_reshard(const row *in, row *out) {
    int active[MAX_ACTIVE * 2], na = 0, res[MAX_ACTIVE];
    for (int i = 0; i < in->n; i++) {
        int nr = next_stages(in, i, MAX_ACTIVE, res);
        int keep = 0;
        for (int k = 0; k < na; k++) { /* evict, in activation order */
            int in_res = 0;
            for (int q = 0; q < nr; q++) in_res |= res[q] == active[k];
            if (in_res) active[keep++] = active[k];
            else row_push(out, mk(active[k], A_RESHARD, -1));
        }
        na = keep;
        for (int q = 0; q < nr; q++) { /* fetch, in the order they will run */
            int on = 0;
            for (int k = 0; k < na; k++) on |= active[k] == res[q];
            if (!on) {
                active[na++] = res[q];
                row_push(out, mk(res[q], A_UNSHARD, -1));
            }
        }
        row_push(out, in->a[i]);
    }
    for (int k = 0; k < na; k++) row_push(out, mk(active[k], A_RESHARD, -1));
}

/* _add_reduce_grad: REDUCE_GRAD + WAIT_REDUCE_GRAD right after a stage's M-th B or W. */
void op_torch_add_reduce_grad(row *r, int S, int M) {
    int *cnt = op_xcalloc((size_t)S, sizeof(int));
    row out = {0};
    for (int i = 0; i < r->n; i++) {
        act a = r->a[i];
        row_push(&out, a);
        if ((a.type == A_B || a.type == A_W) && ++cnt[a.stage] == M) {
            row_push(&out, mk(a.stage, A_REDUCE_GRAD, -1));
            row_push(&out, mk(a.stage, A_WAIT_REDUCE_GRAD, -1));
        }
    }
    free(cnt);
    free(r->a);
    *r = out;
}

/* _add_wait_send: a SEND_F's wait right after the same rank's I/B of that stage and
 * microbatch (the peer has consumed the activation by then); every other wait at the end,
 * in send order. */
void op_torch_add_wait_send(row *r) {
    row out = {0}, pend = {0};
    for (int i = 0; i < r->n; i++) {
        act a = r->a[i];
        row_push(&out, a);
        if (a.type == A_SEND_F || a.type == A_SEND_B) row_push(&pend, a);
        if (a.type != A_I && a.type != A_B) continue;
        for (int k = 0; k < pend.n; k++)
            if (pend.a[k].type == A_SEND_F && pend.a[k].stage == a.stage && pend.a[k].mb == a.mb) {
                row_push(&out, mk(a.stage, A_WAIT_SEND_F, a.mb));
                pend.a[k].type = -1; /* retired */
                break;
            }
    }
    for (int k = 0; k < pend.n; k++)
        if (pend.a[k].type >= 0)
            row_push(&out, mk(pend.a[k].stage,
                              pend.a[k].type == A_SEND_F ? A_WAIT_SEND_F : A_WAIT_SEND_B,
                              pend.a[k].mb));
    free(pend.a);
    free(r->a);
    *r = out;
}
