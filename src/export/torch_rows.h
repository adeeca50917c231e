/* torch_rows.h: per-rank action lists as torch.distributed.pipelining's _Action rows, shared by
 * the CSV checker (torch_check.c) and the compute_comms lowering passes (torch_lower.c).
 * Internal to src/export. */
#ifndef OCTOPIPE_EXPORT_TORCH_ROWS_H
#define OCTOPIPE_EXPORT_TORCH_ROWS_H
#include "octopipe/common.h"

/* A_F..A_RECV_B carry a microbatch and a done flag; the rest appear only in the lowered
 * (compute_comms) lists: runtime bookkeeping with no data dependency, always ready. */
enum { A_F, A_I, A_W, A_B, A_SEND_F, A_RECV_F, A_SEND_B, A_RECV_B, A_FLAGGED,
       A_UNSHARD = A_FLAGGED, A_RESHARD, A_REDUCE_GRAD, A_WAIT_REDUCE_GRAD, A_WAIT_SEND_F,
       A_WAIT_SEND_B, A_NTYPES };

typedef struct act {
    int32_t stage, mb;  /* mb -1: an action of the whole stage (UNSHARD, REDUCE_GRAD, ...) */
    int16_t type, cell; /* cell: 1-based column for messages */
    int16_t overlap;    /* part of an (a;b)OVERLAP_F_B cell */
} act;

typedef struct row {
    act *a;
    int n, cap;
} row;

static inline void row_push(row *r, act x) {
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 16;
        r->a = op_xrealloc(r->a, sizeof(act) * (size_t)r->cap);
    }
    r->a[r->n++] = x;
}

/* The passes torch runs on each rank's compute actions before the send/recv insertion, and
 * after it (torch_lower.c says which torch function each one follows). */
void op_torch_add_unshard_reshard(const row *in, row *out);
void op_torch_add_reduce_grad(row *r, int S, int M);
void op_torch_add_wait_send(row *r);

#endif
