/* pipe_fit.c: per-layer-kind F/I/W times fitted to what ops cost inside real pipelined runs.
 *
 * Why: a layer profiled alone (one-layer stage, one microbatch) is not the layer inside a run:
 * its stage folds W gradients over all the stage's parameters (out of cache), several
 * microbatches' activations are in flight, the other rank shares the L3 cache and the memory
 * bus.  On this project's box the isolated profile was off by -5..+20% per run, and by more
 * from run to run (the VM's cores are shared).  So, as the paper's layer_time_solver does, the
 * per-kind times are solved for from measured per-(stage, kind) op times of calibration runs:
 *
 *   mean time of op k on stage s = sum over layers l of s of x[kind(l), k] + c      (k = F, I, W)
 *   B rows: x[., I] + x[., W]
 *   I and B rows of a stage that recomputes add the re-run forward, as the simulator charges it
 *   (op_stage_recompute_ms): full + x[., F]; selective + r x[., F], r = the attention core's
 *   share of F in the prior (f_sel_ms / f_ms), and the fitted f_sel_ms keeps that share.
 *   Offload adds nothing: a wait for a reload is outside the op's time (pipe_copy.c).
 *
 * weighted by 1 / measured (relative error), plus ridge * ((x - prior) / scale)^2 per unknown
 * so that what the calibration runs cannot separate keeps the isolated profile's shape. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "octopipe/ptrain.h"

/* Solves a x = b (n x n, row-major, overwritten) by Gaussian elimination with partial
 * pivoting.  Returns 0, or -1 when singular. */
static int solve(double *a, double *b, int n) {
    for (int c = 0; c < n; c++) {
        int piv = c;
        for (int r = c + 1; r < n; r++)
            if (fabs(a[r * n + c]) > fabs(a[piv * n + c])) piv = r;
        if (fabs(a[piv * n + c]) < 1e-300) return -1;
        if (piv != c) {
            for (int j = 0; j < n; j++) {
                double t = a[c * n + j];
                a[c * n + j] = a[piv * n + j], a[piv * n + j] = t;
            }
            double t = b[c];
            b[c] = b[piv], b[piv] = t;
        }
        for (int r = c + 1; r < n; r++) {
            double f = a[r * n + c] / a[c * n + c];
            if (f == 0) continue;
            for (int j = c; j < n; j++) a[r * n + j] -= f * a[c * n + j];
            b[r] -= f * b[c];
        }
    }
    for (int c = n - 1; c >= 0; c--) {
        double s = b[c];
        for (int j = c + 1; j < n; j++) s -= a[c * n + j] * b[j];
        b[c] = s / a[c * n + c];
    }
    return 0;
}

/* Column of layer kind sym, op k (0 F, 1 I, 2 W) among the prior's kinds; -1 if unknown. */
static int col(const op_layer_prof *prior, int n_prior, char sym, int k) {
    for (int i = 0; i < n_prior; i++)
        if (prior[i].sym == sym) return 3 * i + k;
    return -1;
}

double op_ptrain_fit_costs(const op_nn_model *m, const op_plan *const *plans,
                           const op_ptrain_report *const *reps, int n, const op_layer_prof *prior,
                           int n_prior, double ridge, op_layer_prof *out, double *call_ms) {
    const int nu = 3 * n_prior + 1, cc = nu - 1; /* unknowns: x[kind][F,I,W], then c */
    double *ata = op_xcalloc((size_t)nu * nu, sizeof(double)), *atb = op_xcalloc((size_t)nu, sizeof(double));
    double *x0 = op_xcalloc((size_t)nu, sizeof(double)), *sc = op_xcalloc((size_t)nu, sizeof(double));
    double *row = op_xcalloc((size_t)nu, sizeof(double));
    for (int i = 0; i < n_prior; i++) {
        const double v[3] = {prior[i].f_ms, prior[i].i_ms, prior[i].w_ms};
        for (int k = 0; k < 3; k++) x0[3 * i + k] = v[k], sc[3 * i + k] = v[k] > 0.05 ? v[k] : 0.05;
    }
    x0[cc] = 0, sc[cc] = 0.1; /* the per-call constant: expected well under 0.1 ms */
    /* quiet wall times when any run had quiet steps, else CPU times of every timed step */
    int quiet = 0;
    for (int pi = 0; pi < n; pi++) quiet |= reps[pi]->n_quiet > 0;
    int rows = 0;
    double *ys = NULL;
    double **rs = NULL;
    for (int pi = 0; pi < n; pi++) {
        const op_plan *p = plans[pi];
        for (int s = 0; s < p->S && s < 64; s++)
            for (int k = 0; k < 4; k++) {
                const op_ptrain_opstat *o = quiet ? &reps[pi]->ops_quiet[s * 4 + k] : &reps[pi]->ops[s * 4 + k];
                double t = quiet ? o->wall_ms : o->cpu_ms;
                if (o->n <= 0 || t <= 0) continue;
                double y = t / (double)o->n;
                memset(row, 0, sizeof(double) * (size_t)nu);
                int ok = 1;
                int pol = p->stage_act ? p->stage_act[s] : OP_ACT_KEEP;
                for (int l = p->stage_first[s]; l < p->stage_first[s + 1]; l++) {
                    char sym = m->pattern[l];
                    if ((k == OP_I || k == OP_B) && (pol == OP_ACT_FULL || pol == OP_ACT_SELECTIVE)) {
                        int f = col(prior, n_prior, sym, 0);
                        const op_layer_prof *q = f >= 0 ? &prior[f / 3] : NULL;
                        if (q) row[f] += pol == OP_ACT_FULL ? 1.0 : q->f_ms > 0 ? q->f_sel_ms / q->f_ms : 0.0;
                    }
                    if (k == OP_B) {
                        int a = col(prior, n_prior, sym, 1), b = col(prior, n_prior, sym, 2);
                        if (a < 0 || b < 0) ok = 0;
                        else row[a] += 1, row[b] += 1;
                    } else {
                        int a = col(prior, n_prior, sym, k);
                        if (a < 0) ok = 0;
                        else row[a] += 1;
                    }
                }
                if (!ok) continue;
                row[cc] = 1;
                /* relative weighting: residual / y */
                double w = 1.0 / (y * y);
                for (int i = 0; i < nu; i++) {
                    if (row[i] == 0) continue;
                    atb[i] += w * row[i] * y;
                    for (int j = 0; j < nu; j++) ata[i * nu + j] += w * row[i] * row[j];
                }
                ys = op_xrealloc(ys, sizeof(double) * (size_t)(rows + 1));
                rs = op_xrealloc(rs, sizeof(double *) * (size_t)(rows + 1));
                ys[rows] = y;
                rs[rows] = op_xmalloc(sizeof(double) * (size_t)nu);
                memcpy(rs[rows], row, sizeof(double) * (size_t)nu);
                rows++;
            }
    }
    double rms = -1;
    if (rows > 0) {
        for (int i = 0; i < nu; i++) {
            double w = ridge / (sc[i] * sc[i]);
            ata[i * nu + i] += w;
            atb[i] += w * x0[i];
        }
        if (solve(ata, atb, nu) == 0) {
            for (int i = 0; i < nu; i++)
                if (atb[i] < 0) atb[i] = 0;
            double ss = 0;
            for (int r = 0; r < rows; r++) {
                double f = 0;
                for (int i = 0; i < nu; i++) f += rs[r][i] * atb[i];
                ss += (f - ys[r]) * (f - ys[r]) / (ys[r] * ys[r]);
            }
            rms = 100 * sqrt(ss / rows);
            for (int i = 0; i < n_prior; i++) {
                out[i] = prior[i];
                out[i].f_ms = atb[3 * i], out[i].i_ms = atb[3 * i + 1], out[i].w_ms = atb[3 * i + 2];
                /* the recompute share of F stays the profile's */
                out[i].f_sel_ms = prior[i].f_ms > 0 ? prior[i].f_sel_ms * out[i].f_ms / prior[i].f_ms : 0;
            }
            *call_ms = atb[cc];
        }
    }
    for (int r = 0; r < rows; r++) free(rs[r]);
    free(rs), free(ys), free(ata), free(atb), free(x0), free(sc), free(row);
    return rms;
}
