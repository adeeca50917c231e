/* bound_devices.c: how many devices a problem can use (plan.h, op_problem_bound_devices).
 *
 * Why: past some count, more pipeline devices add only bubble.  A layer no device may split
 * (a 256k-vocabulary head with its loss, a MoE block) runs whole on one device, M times, and
 * one microbatch's F and I chain runs in order whatever the plan; once those terms set the
 * lower bound, a plan on more devices cannot be faster than one could be on fewer.  A user who
 * sizes a job (or pays for it) wants to hear that: "32 H100s, 60% idle, and 14 have the same
 * bound" is worth more than a small gap to a bound nobody can beat.
 *
 * The bound here is the larger of op_problem_lower_bound and op_problem_lower_bound_mem: fewer
 * devices hold more static bytes each and leave less room for stashes, so the memory-aware
 * bound rises first where memory binds, and a count whose memory bound is +inf (static bytes
 * alone do not fit) never qualifies.  The search halves the interval [1, P]: the optimum
 * itself never rises with more devices (a plan on k devices is one on k + 1 with one idle),
 * and the bound's terms (work / k, chains, per-layer terms, memory over k devices) follow it,
 * so the count found is the least or close to it; it is only ever reported with the bound
 * computed at that count, never as a promise about a tuned plan there. */
#include <math.h>

#include "octopipe/plan.h"

static double bound_at(const op_problem *pr, int k) {
    op_problem q = *pr;
    q.P = k;
    double lb = op_problem_lower_bound(&q);
    if (q.mem_limit_bytes > 0) {
        double lbm = op_problem_lower_bound_mem(&q);
        if (!(lbm <= lb)) lb = lbm; /* +inf (static bytes do not fit) or NaN count as larger */
    }
    return lb;
}

int op_problem_bound_devices(const op_problem *pr, double tol, double *lb_p, double *lb_k) {
    /* mixed clusters and per-device limits: which devices would go is a choice of its own (and
     * their bound, a search of its own, is not computed for nothing) */
    if (pr->n_types > 1 || pr->dev_mem_limit || pr->P <= 1 || !(tol >= 0)) return pr->P;
    const double lbp = bound_at(pr, pr->P);
    if (lb_p) *lb_p = lbp;
    if (lb_k) *lb_k = lbp;
    if (!isfinite(lbp)) return pr->P;
    const double goal = lbp * (1 + tol);
    int lo = 1, hi = pr->P; /* hi qualifies; find the least that does */
    double at_hi = lbp;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        double b = bound_at(pr, mid);
        if (b <= goal) hi = mid, at_hi = b;
        else lo = mid + 1;
    }
    if (lb_k) *lb_k = at_hi;
    return hi;
}
