/* tune_quota.c: per-stage in-flight quotas for the engine's memory-aware admission (knob
 * memres QUOTA / OWED, tn_cand).
 *
 * Why: the engine admits an F first come, first served while it fits the limit, so on a device
 * that holds an early and a late stage (V-like and irregular placements) the early stage fills
 * the memory that the late stage, on which its own I waits, must have.  Jamba at P=16 holds a
 * 47 GiB MoE layer per device and has room for ~9 microbatches' stashes where 1F1B's first
 * stages want 16.  Quotas share each device's free memory among its stages by need.
 *
 * Stage s's need: its round trip (F and I of every later stage, and the links between them)
 * over the period T (the busiest device's work per microbatch), plus itself: 1F1B's S - s on
 * even stages; on a V the early chunk needs many and its device's late chunk few.  Every stage
 * gets one (a stage without one never runs); then quotas grow one microbatch at a time on the
 * stage furthest below its need (lowest quota / need) while the device's free memory holds
 * them: limit - static, less one pending W per stage (act_w held from I to W) and the largest
 * transient (what an F reserves beyond its stash).  Growth stops at the need: more in flight
 * than the round trip needs only holds memory.  O(S + sum of quotas x local stages). */
#include <math.h>
#include <string.h>

#include "tune/tune_int.h"

void tn_quota(const tn_prob *pb, const tn_cand *c, const tn_quota_in *in, double *work,
              double *need, int *scap) {
    int S = c->S, P = pb->P;
    double T = 0, rt = 0;
    memset(work, 0, sizeof(double) * (size_t)P);
    for (int s = 0; s < S; s++) work[c->dev[s]] += in->tf[s] + in->ti[s] + in->tw[s];
    for (int d = 0; d < P; d++)
        if (work[d] > T) T = work[d];
    for (int s = S - 1; s >= 0; s--) { /* rt: the round trip after stage s's F */
        need[s] = T > 0 ? rt / T + 1 : 1;
        rt += in->tf[s] + in->ti[s] + (s > 0 ? in->cf[s - 1] + in->cb[s - 1] : 0);
    }
    for (int d = 0; d < P; d++) {
        const int j0 = in->dstart[d], j1 = in->dstart[d + 1];
        double lim = tn_dev_lim(pb, d);
        for (int j = j0; j < j1; j++) scap[in->dst[j]] = 0;
        if (lim <= 0 || j1 == j0) continue; /* no limit: no quota */
        double room = lim - (double)in->stat[d];
        int64_t extra = 0;
        for (int j = j0; j < j1; j++) {
            int s = in->dst[j];
            room -= (double)in->actw[s];
            if (in->fneed[s] - in->act[s] > extra) extra = in->fneed[s] - in->act[s];
        }
        room -= (double)extra;
        for (int j = j0; j < j1; j++) {
            int s = in->dst[j];
            scap[s] = 1;
            room -= (double)in->act[s];
        }
        for (;;) {
            int bs = -1;
            for (int j = j0; j < j1; j++) {
                int s = in->dst[j];
                if (scap[s] >= ceil(need[s]) || (double)in->act[s] > room) continue;
                if (bs < 0 || scap[s] * need[bs] < scap[bs] * need[s]) bs = s;
            }
            if (bs < 0) break;
            scap[bs]++;
            room -= (double)in->act[bs];
        }
    }
}
