/* tune_blmemo.c: the classic schedules of one problem, built once while tn_tune_mem searches it
 * again and again.
 *
 * Why: every search (tune.c's core) starts from the baselines of its problem: op_sched_build of
 * each schedule, whose zero-bubble variants try in-flight limits down to 1 when nothing fits.
 * Where memory binds, tn_tune_mem runs up to six searches of the same problem (keep, the joint
 * policy searches, the refining ones; the layer views are other problems), and each built the
 * same baselines again: 44% of a 7 s search on Nemotron-H at 8 devices, 232 microbatches and
 * 30 GiB, which "what would fit" runs several of.  The schedules depend on the problem alone,
 * so the second search on takes them from here: the same plans in the same order, so the same
 * seeds, bar and result.
 *
 * Scope: tn_blmemo_begin(pr) .. tn_blmemo_end() around one tn_tune_mem, per thread, nested
 * calls (an op_tune inside another) keep their own.  Only that pr (the pointer, alive the
 * whole time, so no other problem can have its address) is kept: the layer views are built
 * and freed per trial, and two of them may share an address with different layers.
 * Memory: the plans of every schedule at once, where a search held one; above
 * TN_BLMEMO_MAX_BYTES of ops (a plan of 64 devices x 1024 microbatches x 128 stages has 400k
 * ops, 12 MB) the memo gives up and each search builds its own, as before. */
#include <stdlib.h>

#include "octopipe/sched.h"
#include "tune/tune_int.h"

#define TN_BLMEMO_MAX_BYTES (256.0 * 1024 * 1024)

struct tn_blmemo {
    const op_problem *pr;
    double bytes;       /* ops held */
    int state;          /* 0 empty, 1 filling, 2 complete, -1 abandoned (a search stopped
                         * early, or the plans are too large to keep) */
    int n;              /* schedules, in op_sched_names order */
    int *ok;            /* [n] op_sched_build succeeded */
    op_plan *plan;      /* [n] its plan where ok */
    struct tn_blmemo *outer;
};

static _Thread_local tn_blmemo *cur;

static int n_names(void) {
    int n = 0;
    for (const char *const *s = op_sched_names(); *s; s++) n++;
    return n;
}

static void drop_plans(tn_blmemo *m) {
    for (int i = 0; i < m->n; i++)
        if (m->ok[i]) op_plan_free(&m->plan[i]), m->ok[i] = 0;
}

void tn_blmemo_begin(const op_problem *pr) {
    tn_blmemo *m = op_xcalloc(1, sizeof *m);
    m->pr = pr;
    m->n = n_names();
    m->ok = op_xcalloc((size_t)m->n, sizeof *m->ok);
    m->plan = op_xcalloc((size_t)m->n, sizeof *m->plan);
    m->outer = cur;
    cur = m;
}

void tn_blmemo_end(void) {
    tn_blmemo *m = cur;
    if (!m) return;
    drop_plans(m);
    free(m->ok);
    free(m->plan);
    cur = m->outer;
    free(m);
}

tn_blmemo *tn_blmemo_for(const op_problem *pr) {
    return cur && cur->pr == pr && cur->state >= 0 ? cur : NULL;
}

int tn_blmemo_complete(const tn_blmemo *m) { return m && m->state == 2; }

const op_plan *tn_blmemo_plan(const tn_blmemo *m, int i) {
    return i >= 0 && i < m->n && m->ok[i] ? &m->plan[i] : NULL;
}

void tn_blmemo_put(tn_blmemo *m, int i, op_plan *p) {
    if (m->state == 0) m->state = 1;
    if (m->state != 1 || i < 0 || i >= m->n || m->ok[i]) {
        op_plan_free(p);
        return;
    }
    for (int d = 0; d < p->P; d++) m->bytes += (double)p->n_ops[d] * (double)sizeof(op_op);
    if (m->bytes > TN_BLMEMO_MAX_BYTES) { /* too large to keep: every search builds its own */
        op_plan_free(p);
        drop_plans(m);
        m->state = -1;
        return;
    }
    m->plan[i] = *p; /* moves the arena */
    m->ok[i] = 1;
}

void tn_blmemo_done(tn_blmemo *m, int all) {
    if (m->state == 0 || m->state == 1) m->state = all ? 2 : -1;
}
