/* torch_check.c: a C port of the rules torch.distributed.pipelining applies to a compute_only
 * CSV schedule, so that an exported CSV is known to load before anyone starts a cluster job.
 *
 * Three passes, as torch runs them (torch/distributed/pipelining/schedules.py):
 *  1. _validate_schedule: P rows, one rank per stage, per-stage counts, F before I/B before W
 *     in row order.  We are stricter in one place: a repeated action is an error (torch keeps
 *     sets, so a duplicate would slip through validation and misbehave at run time).
 *  2. _add_send_recv: lock-step over ranks; a compute action is scheduled once its input is
 *     there (RECV already placed on this rank, or its producer ran on this rank); the sender
 *     appends SEND_* and places the matching RECV_* on the receiver.  No progress in a round
 *     = "Malformed compute schedule".
 *  3. _simulate_comms_compute: unit-time dry run of the lowered lists; RECV waits for the
 *     peer's SEND, SEND for its compute; no progress = "Schedule is not progressing".
 * Because every stage lives on exactly one rank, "action in rank r's done set" is a flag per
 * (stage, mb, type): the rank is implied by the stage. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "export/torch_rows.h"
#include "octopipe/export.h"

static const char *const type_name[A_NTYPES] = {
    "F",       "I",       "W",           "B",                "SEND_F",      "RECV_F", "SEND_B",
    "RECV_B",  "UNSHARD", "RESHARD",     "REDUCE_GRAD",      "WAIT_REDUCE_GRAD",
    "WAIT_SEND_F", "WAIT_SEND_B"};

static void rows_free(row *rows, int n) {
    for (int i = 0; i < n; i++) free(rows[i].a);
    free(rows);
}

static const char *act_str(const act *a, char *buf, size_t n) {
    if (a->mb < 0) snprintf(buf, n, "%d%s", a->stage, type_name[a->type]);
    else snprintf(buf, n, "%d%s%d", a->stage, type_name[a->type], a->mb);
    return buf;
}

/* Parses one simple action "<stage><TYPE><mb>" from s[0..len).  Returns 0 or an error. */
static int parse_simple(const char *s, size_t len, int rownum, int cell, act *out, op_err *err) {
    size_t i = 0;
    long stage = 0, mb = 0;
    while (i < len && isdigit((unsigned char)s[i])) {
        stage = stage * 10 + (s[i] - '0');
        if (stage > 1000000) break;
        i++;
    }
    if (i == 0 || stage > 1000000)
        return op_errf(err, OP_EINVAL,
                       "row %d cell %d: invalid action '%.*s' (want <stage><F|I|W|B><mb>, e.g. 2F0)",
                       rownum, cell, (int)len, s);
    static const char *const others[] = {"UNSHARD", "RESHARD", "REDUCE_GRAD", "SEND_F",
                                         "RECV_F",  "SEND_B",  "RECV_B"};
    for (size_t k = 0; k < sizeof others / sizeof *others; k++) {
        size_t kl = strlen(others[k]);
        if (len - i >= kl && !strncmp(s + i, others[k], kl))
            return op_errf(err, OP_EINVAL,
                           "row %d cell %d: '%.*s': a compute_only CSV holds only F, I, W, B and "
                           "OVERLAP_F_B actions (%s is inserted by torch's lowering)",
                           rownum, cell, (int)len, s, others[k]);
    }
    int type = -1;
    if (i < len) type = s[i] == 'F' ? A_F : s[i] == 'I' ? A_I : s[i] == 'W' ? A_W : s[i] == 'B' ? A_B : -1;
    if (type < 0)
        return op_errf(err, OP_EINVAL,
                       "row %d cell %d: invalid action '%.*s' (want <stage><F|I|W|B><mb>, e.g. 2F0)",
                       rownum, cell, (int)len, s);
    i++;
    size_t mb0 = i;
    while (i < len && isdigit((unsigned char)s[i]) && mb <= 1000000) mb = mb * 10 + (s[i++] - '0');
    if (i == mb0 || i != len || mb > 1000000)
        return op_errf(err, OP_EINVAL,
                       "row %d cell %d: invalid action '%.*s' (want <stage><F|I|W|B><mb>, e.g. 2F0)",
                       rownum, cell, (int)len, s);
    out->stage = (int32_t)stage;
    out->mb = (int32_t)mb;
    out->type = (int16_t)type;
    out->cell = (int16_t)(cell > 32767 ? 32767 : cell);
    out->overlap = 0;
    return OP_OK;
}

/* Parses one cell (already trimmed) into r: nothing, one action, or an OVERLAP_F_B's
 * sub-actions in order (torch validates the sub-actions one by one). */
static int parse_cell(const char *s, size_t len, int rownum, int cell, row *r, op_err *err) {
    if (len == 0) return OP_OK; /* idle slot */
    act a;
    if (s[0] != '(') {
        int rc = parse_simple(s, len, rownum, cell, &a, err);
        if (rc == OP_OK) row_push(r, a);
        return rc;
    }
    const char *close = memchr(s, ')', len);
    static const char ov[] = "OVERLAP_F_B";
    if (!close || (size_t)(s + len - close - 1) != strlen(ov) || strncmp(close + 1, ov, strlen(ov)))
        return op_errf(err, OP_EINVAL,
                       "row %d cell %d: invalid composite action '%.*s' (want (a;b)OVERLAP_F_B)",
                       rownum, cell, (int)len, s);
    const char *p = s + 1;
    while (p <= close) {
        const char *e = p;
        while (e < close && *e != ';') e++;
        while (p < e && isspace((unsigned char)*p)) p++;
        const char *t = e;
        while (t > p && isspace((unsigned char)t[-1])) t--;
        int rc = parse_simple(p, (size_t)(t - p), rownum, cell, &a, err);
        if (rc) return rc;
        a.overlap = 1;
        row_push(r, a);
        p = e + 1;
    }
    return OP_OK;
}

/* Splits the text into rows of actions.  A final newline does not start a row. */
static int parse_csv(const char *csv, row **rows_out, int *nrows_out, op_err *err) {
    int nrows = 0, cap = 8;
    row *rows = op_xcalloc((size_t)cap, sizeof(row));
    const char *p = csv;
    int rc = OP_OK;
    while (*p && rc == OP_OK) {
        const char *eol = strchr(p, '\n');
        if (!eol) eol = p + strlen(p);
        const char *end = eol;
        if (end > p && end[-1] == '\r') end--;
        if (nrows == cap) {
            rows = op_xrealloc(rows, sizeof(row) * (size_t)cap * 2);
            memset(rows + cap, 0, sizeof(row) * (size_t)cap);
            cap *= 2;
        }
        row *r = &rows[nrows++];
        int cell = 1;
        for (const char *c = p; c <= end && rc == OP_OK; cell++) {
            const char *ce = c;
            while (ce < end && *ce != ',') ce++;
            const char *a = c, *b = ce;
            while (a < b && isspace((unsigned char)*a)) a++;
            while (b > a && isspace((unsigned char)b[-1])) b--;
            if (b - a >= 2 && *a == '"' && b[-1] == '"') a++, b--;
            rc = parse_cell(a, (size_t)(b - a), nrows - 1, cell, r, err);
            c = ce + 1;
        }
        p = *eol ? eol + 1 : eol;
    }
    if (rc) {
        rows_free(rows, nrows);
        return rc;
    }
    *rows_out = rows;
    *nrows_out = nrows;
    return OP_OK;
}

/* Pass 1: _validate_schedule.  Fills rank_of[S]. */
static int validate(row *rows, int P, int S, int M, int *rank_of, op_err *err) {
    uint8_t *done = op_xcalloc((size_t)S * (size_t)M, 1); /* bit per A_F..A_B */
    int *cnt = op_xcalloc((size_t)S * 4, sizeof(int));
    int rc = OP_OK;
    char ab[64];
    for (int s = 0; s < S; s++) rank_of[s] = -1;
    for (int r = 0; r < P && rc == OP_OK; r++) {
        for (int i = 0; i < rows[r].n && rc == OP_OK; i++) {
            const act *a = &rows[r].a[i];
            act_str(a, ab, sizeof ab);
            if (a->stage >= S) {
                rc = op_errf(err, OP_EINVAL, "row %d cell %d: %s: stage %d out of range 0..%d",
                             r, a->cell, ab, a->stage, S - 1);
                break;
            }
            if (a->mb >= M) {
                rc = op_errf(err, OP_EINVAL,
                             "row %d cell %d: %s: microbatch %d out of range 0..%d", r, a->cell,
                             ab, a->mb, M - 1);
                break;
            }
            uint8_t *f = &done[(size_t)a->stage * M + a->mb];
            if (*f & (1u << a->type)) {
                rc = op_errf(err, OP_EINVAL, "row %d cell %d: duplicate action %s", r, a->cell, ab);
                break;
            }
            if ((a->type == A_I || a->type == A_B) && !(*f & (1u << A_F))) {
                rc = op_errf(err, OP_EINVAL,
                             "rank %d, cell %d: running %s backward for stage %d, microbatch %d "
                             "without first running forward",
                             r, a->cell, a->type == A_I ? "input" : "full", a->stage, a->mb);
                break;
            }
            if (a->type == A_W && !(*f & (1u << A_I))) {
                rc = op_errf(err, OP_EINVAL,
                             "rank %d, cell %d: running backward weight for stage %d, microbatch "
                             "%d without first running backward input",
                             r, a->cell, a->stage, a->mb);
                break;
            }
            *f |= (uint8_t)(1u << a->type);
            cnt[a->stage * 4 + a->type]++;
            if (rank_of[a->stage] < 0) rank_of[a->stage] = r;
            else if (rank_of[a->stage] != r)
                rc = op_errf(err, OP_EINVAL, "stage %d is assigned to both rank %d and rank %d",
                             a->stage, r, rank_of[a->stage]);
        }
    }
    for (int s = 0; s < S && rc == OP_OK; s++) {
        int nf = cnt[s * 4 + A_F], ni = cnt[s * 4 + A_I], nw = cnt[s * 4 + A_W],
            nb = cnt[s * 4 + A_B];
        if (rank_of[s] < 0)
            rc = op_errf(err, OP_EINVAL, "stage %d never appears in the schedule", s);
        else if (nf != M)
            rc = op_errf(err, OP_EINVAL, "got %d F microbatches for stage %d, expected %d", nf, s,
                         M);
        else if (ni != nw)
            rc = op_errf(err, OP_EINVAL,
                         "invalid backward microbatches for stage %d: I and W must have equal "
                         "counts, but got I=%d, W=%d", s, ni, nw);
        else if (nb + ni != M)
            rc = op_errf(err, OP_EINVAL,
                         "invalid backward microbatches for stage %d: expected %d total "
                         "backwards, but got B=%d, I=%d, W=%d", s, M, nb, ni, nw);
    }
    free(done);
    free(cnt);
    return rc;
}

typedef struct lowering {
    int P, S, M;
    const int *rank_of;
    uint16_t *flag; /* [S*M] bit per type: "in the done set of the stage's rank" */
} lowering;

static int has(const lowering *L, int s, int m, int type) {
    return (L->flag[(size_t)s * L->M + m] >> type) & 1;
}
static void set(lowering *L, int s, int m, int type) {
    if (type < A_FLAGGED && m >= 0) L->flag[(size_t)s * L->M + m] |= (uint16_t)(1u << type);
}

/* Is a compute action's input available?  (same rule in both torch passes) */
static int input_ready(const lowering *L, const act *a) {
    int s = a->stage, m = a->mb;
    if (a->type == A_F) {
        if (s == 0 || has(L, s, m, A_RECV_F)) return 1;
        return L->rank_of[s - 1] == L->rank_of[s] && has(L, s - 1, m, A_F);
    }
    if (a->type == A_I || a->type == A_B) {
        if (s == L->S - 1 || has(L, s, m, A_RECV_B)) return 1;
        return L->rank_of[s + 1] == L->rank_of[s] &&
               (has(L, s + 1, m, A_I) || has(L, s + 1, m, A_B));
    }
    return 1; /* W: its I ran earlier on the same rank (pass 1); bookkeeping actions */
}

/* Appends what rank r's head action waits for: "rank 0 waits at 0B0 for 1I0/1B0 on rank 1". */
static void describe_wait(const lowering *L, int r, const act *a, op_buf *b) {
    char ab[64], need[80] = "";
    act_str(a, ab, sizeof ab);
    int s = a->stage, m = a->mb, peer = -1;
    switch (a->type) {
    case A_F: peer = s - 1, snprintf(need, sizeof need, "%dF%d", peer, m); break;
    case A_I: case A_B: peer = s + 1, snprintf(need, sizeof need, "%dI%d/%dB%d", peer, m, peer, m); break;
    case A_SEND_F: peer = s, snprintf(need, sizeof need, "%dF%d", s, m); break;
    case A_SEND_B: peer = s, snprintf(need, sizeof need, "%dI%d/%dB%d", s, m, s, m); break;
    case A_RECV_F: peer = s - 1, snprintf(need, sizeof need, "%dSEND_F%d", peer, m); break;
    case A_RECV_B: peer = s + 1, snprintf(need, sizeof need, "%dSEND_B%d", peer, m); break;
    }
    if (peer >= 0 && peer < L->S)
        op_buf_printf(b, "%srank %d waits at %s for %s on rank %d", b->len ? "; " : "", r, ab,
                      need, L->rank_of[peer]);
    else
        op_buf_printf(b, "%srank %d waits at %s", b->len ? "; " : "", r, ab);
}

/* Pass 2: _add_send_recv.  Builds the lowered lists into low[P]. */
static int add_send_recv(lowering *L, row *rows, row *low, op_err *err) {
    int P = L->P;
    int *head = op_xcalloc((size_t)P, sizeof(int));
    int left = 0, rc = OP_OK;
    for (int r = 0; r < P; r++) left += rows[r].n;
    while (left > 0) {
        int progress = 0;
        for (int r = 0; r < P; r++) {
            if (head[r] == rows[r].n) continue;
            act a = rows[r].a[head[r]];
            if (!input_ready(L, &a)) continue;
            row_push(&low[r], a);
            set(L, a.stage, a.mb, a.type);
            int fwd = a.type == A_F, bwd = a.type == A_I || a.type == A_B;
            int peer = fwd ? a.stage + 1 : bwd ? a.stage - 1 : -1;
            if (peer >= 0 && peer < L->S && L->rank_of[peer] != r) {
                act snd = a, rcv = a;
                snd.type = (int16_t)(fwd ? A_SEND_F : A_SEND_B);
                rcv.type = (int16_t)(fwd ? A_RECV_F : A_RECV_B);
                rcv.stage = peer;
                row_push(&low[r], snd);
                row_push(&low[L->rank_of[peer]], rcv);
                set(L, rcv.stage, rcv.mb, rcv.type);
            }
            head[r]++;
            left--;
            progress = 1;
        }
        if (!progress) {
            op_buf why = {0};
            for (int r = 0; r < P && why.len < 600; r++)
                if (head[r] < rows[r].n) describe_wait(L, r, &rows[r].a[head[r]], &why);
            rc = op_errf(err, OP_EINVAL, "Malformed compute schedule, can't schedule sends/recvs: %s",
                         why.data);
            op_buf_free(&why);
            break;
        }
    }
    free(head);
    return rc;
}

/* Pass 3: _simulate_comms_compute on the lowered lists.  Returns steps or < 0 with err. */
static int comms_ready(const lowering *L, const act *a) {
    int s = a->stage, m = a->mb;
    switch (a->type) {
    case A_SEND_F: return has(L, s, m, A_F);
    case A_SEND_B: return has(L, s, m, A_I) || has(L, s, m, A_B);
    case A_RECV_F: return has(L, s - 1, m, A_SEND_F);
    case A_RECV_B: return has(L, s + 1, m, A_SEND_B);
    default: return input_ready(L, a);
    }
}

static int simulate(lowering *L, row *low, int *steps, op_err *err) {
    int P = L->P;
    int *head = op_xcalloc((size_t)P, sizeof(int));
    uint8_t *idle = op_xcalloc((size_t)P, 1);
    int left = 0, rc = OP_OK, t = 0;
    for (int r = 0; r < P; r++) left += low[r].n;
    while (left > 0) {
        int progress = 0;
        for (int r = 0; r < P; r++) {
            idle[r] = 0;
            if (head[r] == low[r].n) continue;
            const act *a = &low[r].a[head[r]];
            if (comms_ready(L, a)) {
                set(L, a->stage, a->mb, a->type);
                head[r]++, left--, progress = 1;
            } else {
                idle[r] = 1;
            }
        }
        /* torch's second pass: a rank unblocked by a later rank in the same step runs now */
        for (int r = 0; r < P; r++) {
            if (!idle[r] || head[r] == low[r].n) continue;
            const act *a = &low[r].a[head[r]];
            if (comms_ready(L, a)) {
                set(L, a->stage, a->mb, a->type);
                head[r]++, left--;
            }
        }
        t++;
        if (!progress) {
            op_buf why = {0};
            for (int r = 0; r < P && why.len < 600; r++)
                if (head[r] < low[r].n) describe_wait(L, r, &low[r].a[head[r]], &why);
            rc = op_errf(err, OP_EINVAL, "Schedule is not progressing (step %d): %s", t, why.data);
            op_buf_free(&why);
            break;
        }
    }
    *steps = t;
    free(head);
    free(idle);
    return rc;
}

/* The three passes; with `lowered` non-NULL also the compute_comms rows torch would run. */
static int check_core(const char *csv, int P, int S, int M, op_torch_check_info *info,
                      op_buf *lowered, op_err *err) {
    row *rows = NULL;
    int nrows = 0;
    int rc = parse_csv(csv, &rows, &nrows, err);
    if (rc) return rc;
    if (nrows != P) {
        rows_free(rows, nrows);
        return op_errf(err, OP_EINVAL,
                       "schedule has %d rows but the pipeline has %d ranks (row d = rank d)",
                       nrows, P);
    }
    for (int r = 0; r < P; r++)
        if (rows[r].n == 0) {
            rows_free(rows, nrows);
            return op_errf(err, OP_EINVAL,
                           "row %d has no actions: torch's send/recv lowering needs every rank "
                           "to hold a stage", r);
        }
    int maxs = -1, maxm = -1, n_compute = 0;
    for (int r = 0; r < P; r++)
        for (int i = 0; i < rows[r].n; i++) {
            if (rows[r].a[i].stage > maxs) maxs = rows[r].a[i].stage;
            if (rows[r].a[i].mb > maxm) maxm = rows[r].a[i].mb;
            n_compute++;
        }
    if (S <= 0) S = maxs + 1;
    if (M <= 0) M = maxm + 1;
    if (S <= 0 || M <= 0) {
        rows_free(rows, nrows);
        return op_errf(err, OP_EINVAL, "schedule holds no actions");
    }
    /* the passes keep a flag per (stage, microbatch): bound it as a plan file is bounded */
    if ((int64_t)S * M > OP_PLAN_MAX_STAGE_MB) {
        rows_free(rows, nrows);
        return op_errf(err, OP_EINVAL, "%d stages x %d microbatches is more than a schedule may hold "
                       "(64 Mi per kind)", S, M);
    }
    int *rank_of = op_xcalloc((size_t)S, sizeof(int));
    rc = validate(rows, P, S, M, rank_of, err);
    lowering L = {P, S, M, rank_of, NULL};
    row *low = op_xcalloc((size_t)P, sizeof(row));
    int steps = 0, n_comms = 0;
    if (rc == OP_OK && lowered) {
        for (int r = 0; r < P && rc == OP_OK; r++)
            for (int i = 0; i < rows[r].n; i++)
                if (rows[r].a[i].overlap)
                    rc = op_errf(err, OP_EINVAL,
                                 "row %d cell %d: OVERLAP_F_B cells are not lowered here (plans "
                                 "never hold them)", r, rows[r].a[i].cell);
        for (int r = 0; r < P && rc == OP_OK; r++) {
            row ur = {0};
            op_torch_add_unshard_reshard(&rows[r], &ur);
            op_torch_add_reduce_grad(&ur, S, M);
            free(rows[r].a);
            rows[r] = ur;
        }
    }
    if (rc == OP_OK) {
        L.flag = op_xcalloc((size_t)S * (size_t)M, sizeof(uint16_t));
        rc = add_send_recv(&L, rows, low, err);
        if (rc == OP_OK) {
            memset(L.flag, 0, sizeof(uint16_t) * (size_t)S * (size_t)M);
            rc = simulate(&L, low, &steps, err);
        }
        for (int r = 0; r < P; r++)
            for (int i = 0; i < low[r].n; i++) n_comms += low[r].a[i].type >= A_SEND_F &&
                                                          low[r].a[i].type <= A_RECV_B;
    }
    if (rc == OP_OK && lowered) {
        char ab[64];
        for (int r = 0; r < P; r++) {
            op_torch_add_wait_send(&low[r]);
            for (int i = 0; i < low[r].n; i++)
                op_buf_printf(lowered, "%s%s", i ? "," : "", act_str(&low[r].a[i], ab, sizeof ab));
            op_buf_put(lowered, "\n", 1);
        }
    }
    if (rc == OP_OK && info) {
        info->P = P, info->S = S, info->M = M;
        info->n_compute = n_compute, info->n_comms = n_comms, info->sim_steps = steps;
    }
    free(L.flag);
    free(rank_of);
    rows_free(low, P);
    rows_free(rows, nrows);
    return rc;
}

int op_export_torch_csv_check(const char *csv, int P, int S, int M, op_torch_check_info *info,
                              op_err *err) {
    return check_core(csv, P, S, M, info, NULL, err);
}

int op_export_torch_csv_lower(const char *csv, int P, int S, int M, op_buf *out, op_err *err) {
    op_buf b = {0};
    int rc = check_core(csv, P, S, M, NULL, &b, err);
    if (rc == OP_OK) op_buf_put(out, b.data, b.len);
    op_buf_free(&b);
    return rc;
}
