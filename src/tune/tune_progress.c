/* tune_progress.c: one progress line a second for a whole op_tune run.
 *
 * op_tune runs many searches one after another (activation policies, layer views, the
 * canonical problem, refinements, restarts), each with its own best and its own lower bound
 * (of the layers as that search sees them).  Their lines, printed per search, read as one
 * run going backwards: on Nemotron-H 8B on 4 H100s at 42 GiB the "best" went 1114 -> 1386 ->
 * 2383 ms, the gap 24% -> 206% (against three different bounds), "<= 0 s left" then "<= 46 s
 * left" and the count of simulations back to 64.  Here the run keeps what the user asked
 * about: the fastest plan that fits so far over every search, its gap to the problem's own
 * lower bound, the simulations of all searches, the time, and with --time-budget what is left.
 *
 * The run is thread-local (the searches of one op_tune run on its thread); op_tune calls made
 * inside another (what-would-fit advice) keep their own run and give the outer one back. */
#include <math.h>

#include "tune/tune_int.h"

static _Thread_local tn_run *cur;

void tn_run_begin(tn_run *r, const op_problem *pr, const op_tune_opts *o, double t0) {
    r->o = o;
    r->outer = cur;
    r->best = 0;
    r->sims = 0;
    r->searches = 0;
    r->t0 = o && o->started_s > 0 ? o->started_s : t0;
    r->last = r->t0;
    r->pr = pr;
    r->lb = -1; /* at the first line: op_tune has not checked pr yet (it may be NULL) */
    cur = r;
}

void tn_run_end(tn_run *r) { cur = r->outer; }

void tn_run_fit(double makespan_ms) {
    if (cur && (cur->best == 0 || makespan_ms < cur->best)) cur->best = makespan_ms;
}

void tn_run_sim(void) {
    if (cur) cur->sims++;
}

void tn_run_search(void) {
    if (cur) cur->searches++;
}

int tn_run_tick(const char *phase, long done, long budget) {
    tn_run *r = cur;
    if (!r) return 0;
    const op_tune_opts *o = r->o;
    double now = op_now_s();
    if (!o || now - r->last < 1.0) return 1;
    r->last = now;
    /* only where someone reads the lines: on mixed clusters this bound has a search of its own */
    if (r->lb < 0) r->lb = o->verbose || o->progress ? op_problem_lower_bound(r->pr) : 0;
    double gap = r->best > 0 && r->lb > 0 ? r->best / r->lb - 1 : 0;
    if (o->progress) o->progress(o->progress_ctx, phase, r->best, gap);
    if (!o->verbose) return 1;
    char at[64] = "no plan fits yet";
    if (r->best > 0) snprintf(at, sizeof at, "best %.3f ms  gap %.2f%%", r->best, 100 * gap);
    /* how far the search in progress is: the run's own length is not known beforehand (how
     * many policy searches run depends on what memory allows), only a --time-budget's end */
    char left[32] = "";
    double dl = o->time_budget_s > 0 ? r->t0 + o->time_budget_s : 0; /* as op_tune counts it */
    if (dl > 0) snprintf(left, sizeof left, ", <= %.0f s left", fmax(dl - now, 0));
    int pct = budget > 0 ? (int)fmin(100.0 * (double)done / (double)budget, 100) : 0;
    fprintf(stderr, "%s: %-9s %s  (%ld sims, %.1f s; search %d at %d%%%s)\n",
            o->label ? o->label : "octopipe plan", phase, at, r->sims, now - r->t0, r->searches, pct,
            left);
    return 1;
}
