/* lower.c: plan -> one instruction list per rank (see exec.h), and the dry run that refuses
 * deadlocking orders before any rank starts. */
#include <stdlib.h>
#include <string.h>

#include "octopipe/exec.h"

/* slot of an op in per-(stage, mb) tables: F = 0, I or B = 1, W = 2 */
static int slot_of(int kind) { return kind == OP_F ? 0 : kind == OP_W ? 2 : 1; }
static int64_t key(const op_plan *p, int s, int m, int slot) {
    return ((int64_t)s * p->M + m) * 3 + slot;
}

/* The op (stage, mb, slot) that op o needs first, or slot -1 when none. */
static void dep_of(const op_plan *p, const op_op *o, int *s, int *slot) {
    *s = -1;
    *slot = -1;
    if (o->kind == OP_F) {
        if (o->stage > 0) *s = o->stage - 1, *slot = 0;
    } else if (o->kind == OP_W) {
        *s = o->stage, *slot = 1;
    } else if (o->stage < p->S - 1) {
        *s = o->stage + 1, *slot = 1;
    } else {
        *s = o->stage, *slot = 0;
    }
}

static const char *slot_name(const op_plan *p, int s, int slot) {
    return slot == 0 ? "F" : slot == 2 ? "W" : p->stage_split[s] ? "I" : "B";
}

/* The dry run on a validated plan (its walk indexes by stage and microbatch). */
static int deadlock_walk(const op_plan *p, op_err *err) {
    int64_t n = (int64_t)p->S * p->M * 3;
    uint8_t *done = op_xcalloc((size_t)n, 1);
    int *head = op_xcalloc((size_t)p->P, sizeof(int));
    int64_t total = 0, ndone = 0;
    for (int d = 0; d < p->P; d++) total += p->n_ops[d];
    for (int progress = 1; progress;) {
        progress = 0;
        for (int d = 0; d < p->P; d++) {
            while (head[d] < p->n_ops[d]) {
                const op_op *o = &p->ops[d][head[d]];
                int ds, dslot;
                dep_of(p, o, &ds, &dslot);
                if (ds >= 0 && !done[key(p, ds, o->mb, dslot)]) break;
                done[key(p, o->stage, o->mb, slot_of(o->kind))] = 1;
                head[d]++;
                ndone++;
                progress = 1;
            }
        }
    }
    int rc = OP_OK;
    if (ndone < total) {
        /* follow "head op waits for X; X's device is stuck at its head" until a device repeats */
        int *seen = op_xcalloc((size_t)p->P, sizeof(int));
        op_buf b = {0};
        int d = 0;
        while (head[d] >= p->n_ops[d]) d++;
        while (!seen[d]) { /* a blocked head's dependency is not done, so its device is blocked too */
            seen[d] = 1;
            int ds, dslot;
            dep_of(p, &p->ops[d][head[d]], &ds, &dslot);
            d = p->stage_dev[ds];
        }
        /* d is on the cycle: print it once around */
        int start = d;
        do {
            const op_op *o = &p->ops[d][head[d]];
            int ds, dslot;
            dep_of(p, o, &ds, &dslot);
            int d2 = p->stage_dev[ds];
            const op_op *h2 = &p->ops[d2][head[d2]];
            op_buf_printf(&b, "%s%s(s%d,mb%d)@d%d waits for %s(s%d,mb%d)@d%d", b.len ? "; " : "",
                          op_kind_name(o->kind), o->stage, o->mb, d, slot_name(p, ds, dslot), ds,
                          o->mb, d2);
            if (!(h2->stage == ds && h2->mb == o->mb && slot_of(h2->kind) == dslot))
                op_buf_printf(&b, ", which device %d runs after %s(s%d,mb%d)", d2,
                              op_kind_name(h2->kind), h2->stage, h2->mb);
            d = d2;
        } while (d != start);
        rc = op_errf(err, OP_EDEADLOCK, "deadlock: %s", b.data);
        op_buf_free(&b);
        free(seen);
    }
    free(done);
    free(head);
    return rc;
}

typedef struct pending_recv {
    int comp;  /* index of the consuming compute op in this rank's order */
    int buf;
    int64_t bytes;
    int peer, tag, stage, mb, kind;
} pending_recv;

static int64_t boundary(const op_plan *p, const op_lower_opts *o, int s) {
    if (o->boundary_bytes) return o->boundary_bytes(o->ctx, s);
    double scale = o->bytes_scale > 0 ? o->bytes_scale : 1.0;
    int64_t b = (int64_t)((double)op_stage_out_bytes(p, s) * scale + 0.5);
    return b < 1 ? 1 : b;
}

static op_instr *emit(op_instr **ins, int *n, int *cap) {
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        *ins = op_xrealloc(*ins, sizeof(op_instr) * (size_t)*cap);
    }
    op_instr *x = &(*ins)[(*n)++];
    memset(x, 0, sizeof *x);
    x->buf = x->out = x->peer = -1;
    return x;
}

static void lower_rank(const op_plan *p, const op_lower_opts *o, int d, int *local, op_prog *pr,
                       op_arena *a) {
    int window = o->recv_window > 0 ? o->recv_window : 8;
    int64_t budget = o->recv_budget_bytes > 0 ? o->recv_budget_bytes : ((int64_t)1 << 30);
    int nops = p->n_ops[d], nbuf = 0;
    /* pass 1: buffers and receives in consumer order */
    pending_recv *rv = op_xcalloc((size_t)nops + 1, sizeof *rv);
    int nrv = 0;
    int *in_buf = op_xmalloc(sizeof(int) * ((size_t)nops + 1));
    int *out_buf = op_xmalloc(sizeof(int) * ((size_t)nops + 1));
    for (int i = 0; i < nops; i++) {
        const op_op *op = &p->ops[d][i];
        in_buf[i] = out_buf[i] = -1;
        int grad = op->kind != OP_F;
        int src = op->kind == OP_F ? op->stage - 1 : op->stage + 1; /* producing stage */
        if (op->kind != OP_W && src >= 0 && src < p->S) {
            int64_t k = ((int64_t)op->stage * p->M + op->mb) * 2 + grad;
            if (p->stage_dev[src] == d) {
                in_buf[i] = local[k]; /* set by the producer, earlier in this order */
                /* op_exec_lower ran op_exec_check_deadlock first: producers come earlier */
                OP_ASSERT(in_buf[i] >= 0, "hand-over buffer missing (deadlock check skipped?)");
            } else {
                pending_recv *r = &rv[nrv++];
                r->comp = i;
                r->buf = in_buf[i] = nbuf++;
                r->bytes = boundary(p, o, grad ? op->stage : src);
                r->peer = p->stage_dev[src];
                r->tag = op_exec_tag(op->stage, op->mb, grad);
                r->stage = op->stage;
                r->mb = op->mb;
                r->kind = op->kind;
            }
        }
        int dst = op->kind == OP_F ? op->stage + 1 : op->stage - 1; /* consuming stage */
        if (op->kind != OP_W && dst >= 0 && dst < p->S) {
            out_buf[i] = nbuf++;
            if (p->stage_dev[dst] == d) local[((int64_t)dst * p->M + op->mb) * 2 + grad] = out_buf[i];
        }
    }
    /* pass 2: emit */
    op_instr *ins = NULL;
    int n = 0, cap = 0, next = 0, wj = 0, posted = 0, max_posted = 0;
    int64_t posted_bytes = 0;
    for (int i = 0; i < nops; i++) {
        const op_op *op = &p->ops[d][i];
        while (next < nrv && (rv[next].comp <= i ||
                              (rv[next].comp < i + window && posted_bytes + rv[next].bytes <= budget))) {
            pending_recv *r = &rv[next++];
            op_instr *x = emit(&ins, &n, &cap);
            x->code = OP_I_RECV;
            x->kind = (uint8_t)r->kind;
            x->stage = r->stage;
            x->mb = r->mb;
            x->buf = r->buf;
            x->peer = r->peer;
            x->tag = r->tag;
            x->bytes = r->bytes;
            posted_bytes += r->bytes;
            if (++posted > max_posted) max_posted = posted;
        }
        if (wj < nrv && rv[wj].comp == i) { /* receives are in consumer order */
            const pending_recv *r = &rv[wj++];
            op_instr *x = emit(&ins, &n, &cap);
            x->code = OP_I_WAIT;
            x->kind = op->kind;
            x->stage = op->stage;
            x->mb = op->mb;
            x->buf = r->buf;
            x->bytes = r->bytes;
            x->peer = r->peer;
            x->tag = r->tag;
            posted_bytes -= r->bytes;
            posted--;
        }
        op_instr *c = emit(&ins, &n, &cap);
        c->code = OP_I_COMP;
        c->kind = op->kind;
        c->stage = op->stage;
        c->mb = op->mb;
        c->buf = in_buf[i];
        c->out = out_buf[i];
        c->op_index = i;
        int src = op->kind == OP_F ? op->stage - 1 : op->stage + 1;
        if (in_buf[i] >= 0) c->bytes = boundary(p, o, op->kind == OP_F ? src : op->stage);
        int dst = op->kind == OP_F ? op->stage + 1 : op->stage - 1;
        if (out_buf[i] >= 0) c->out_bytes = boundary(p, o, op->kind == OP_F ? op->stage : dst);
        if (in_buf[i] >= 0) {
            op_instr *x = emit(&ins, &n, &cap);
            x->code = OP_I_FREE;
            x->kind = op->kind;
            x->stage = op->stage;
            x->mb = op->mb;
            x->buf = in_buf[i];
        }
        if (out_buf[i] >= 0 && p->stage_dev[dst] != d) {
            int grad = op->kind != OP_F;
            op_instr *x = emit(&ins, &n, &cap);
            x->code = OP_I_SEND;
            x->kind = grad ? (p->stage_split[dst] ? OP_I : OP_B) : OP_F;
            x->stage = dst;
            x->mb = op->mb;
            x->buf = out_buf[i];
            x->peer = p->stage_dev[dst];
            x->tag = op_exec_tag(dst, op->mb, grad);
            x->bytes = boundary(p, o, grad ? dst : op->stage);
        }
    }
    pr->rank = d;
    pr->n = n;
    pr->ins = OP_ARENA_NEW(a, op_instr, n ? n : 1);
    if (n) memcpy(pr->ins, ins, sizeof(op_instr) * (size_t)n);
    pr->n_bufs = nbuf;
    pr->n_comp = nops;
    pr->max_posted = max_posted;
    free(ins);
    free(rv);
    free(in_buf);
    free(out_buf);
}

int op_exec_check_deadlock(const op_plan *p, op_err *err) {
    int rc = op_plan_validate(p, err);
    return rc != OP_OK ? rc : deadlock_walk(p, err);
}

int op_exec_lower(const op_plan *p, const op_lower_opts *o, op_lowered *out, op_err *err) {
    op_lower_opts def = {0};
    if (!o) o = &def;
    memset(out, 0, sizeof *out);
    if (p->P > OP_EXEC_MAX_RANKS)
        return op_errf(err, OP_EINVAL, "plan has %d devices; the executor runs at most %d ranks",
                       p->P, OP_EXEC_MAX_RANKS);
    if (p->S > OP_EXEC_MAX_STAGES || p->M > OP_EXEC_MAX_MB)
        return op_errf(err, OP_EINVAL,
                       "plan has %d stages and %d microbatches; the executor's message tags allow "
                       "at most %d stages and %d microbatches",
                       p->S, p->M, OP_EXEC_MAX_STAGES, OP_EXEC_MAX_MB);
    int rc = op_exec_check_deadlock(p, err);
    if (rc) return rc;
    for (int s = 0; s + 1 < p->S; s++) {
        /* in double: 2^53 bytes x --bytes-scale 1e6 is beyond int64, and the cast of it is
         * undefined (boundary() casts only what passed here) */
        double b = o->boundary_bytes ? (double)o->boundary_bytes(o->ctx, s)
                                     : (double)op_stage_out_bytes(p, s) *
                                           (o->bytes_scale > 0 ? o->bytes_scale : 1.0);
        if (b > (double)0x7fffffff)
            return op_errf(err, OP_EINVAL,
                           "stage %d sends %.0f bytes per message; the executor's limit is 2 GiB "
                           "(use --bytes-scale)",
                           s, b);
    }
    out->P = p->P;
    out->progs = OP_ARENA_NEW(&out->arena, op_prog, p->P);
    int *local = op_xmalloc(sizeof(int) * (size_t)p->S * (size_t)p->M * 2);
    for (int d = 0; d < p->P; d++) {
        for (int64_t i = 0; i < (int64_t)p->S * p->M * 2; i++) local[i] = -1;
        lower_rank(p, o, d, local, &out->progs[d], &out->arena);
    }
    free(local);
    return OP_OK;
}

void op_lowered_free(op_lowered *l) {
    op_arena_free(&l->arena);
    memset(l, 0, sizeof *l);
}

void op_lowered_print(const op_lowered *l, op_buf *out) {
    for (int d = 0; d < l->P; d++) {
        const op_prog *pr = &l->progs[d];
        op_buf_printf(out, "rank %d: %d compute ops, %d instructions, %d buffers, <= %d receives posted\n",
                      d, pr->n_comp, pr->n, pr->n_bufs, pr->max_posted);
        for (int i = 0; i < pr->n; i++) {
            const op_instr *x = &pr->ins[i];
            const char *k = op_kind_name((op_kind)x->kind);
            switch (x->code) {
            case OP_I_RECV:
                op_buf_printf(out, "  RECV b%d <- r%d tag %d for %s(s%d,mb%d) %lld B\n", x->buf,
                              x->peer, x->tag, k, x->stage, x->mb, (long long)x->bytes);
                break;
            case OP_I_WAIT:
                op_buf_printf(out, "  WAIT b%d\n", x->buf);
                break;
            case OP_I_COMP:
                op_buf_printf(out, "  COMP %s(s%d,mb%d)", k, x->stage, x->mb);
                if (x->buf >= 0) op_buf_printf(out, " in b%d", x->buf);
                if (x->out >= 0) op_buf_printf(out, " out b%d", x->out);
                op_buf_printf(out, "\n");
                break;
            case OP_I_SEND:
                op_buf_printf(out, "  SEND b%d -> r%d tag %d for %s(s%d,mb%d) %lld B\n", x->buf,
                              x->peer, x->tag, k, x->stage, x->mb, (long long)x->bytes);
                break;
            case OP_I_FREE:
                op_buf_printf(out, "  FREE b%d\n", x->buf);
                break;
            }
        }
    }
}
