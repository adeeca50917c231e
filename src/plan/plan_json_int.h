/* plan_json_int.h: what the plan file reader's two halves share (plan_json.c: the header,
 * layers, links, stages and types; plan_json_sched.c: the schedule and the recorded times and
 * prediction, checked against a re-simulation). */
#ifndef OCTOPIPE_PLAN_JSON_INT_H
#define OCTOPIPE_PLAN_JSON_INT_H
#include <jansson.h>
#include <stdint.h>

#include "octopipe/plan_io.h"

/* The file being read: its name starts every error line. */
typedef struct pj_rd {
    const char *src;
    op_err *err;
} pj_rd;

/* "FILE: PATH: message", OP_EINVAL. */
int pj_fail(pj_rd *r, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Unknown keys are errors (typos must not pass silently); so are missing required ones. */
int pj_check_keys(pj_rd *r, json_t *obj, const char *path, const char *const *allowed,
                  const char *const *required);
int pj_get_int(pj_rd *r, json_t *v, const char *path, int64_t lo, int64_t hi, int64_t *out);
int pj_get_num(pj_rd *r, json_t *v, const char *path, double *out); /* finite, >= 0 */
void pj_op_name(char *buf, size_t n, int kind, int s, int m);     /* "F(s3,mb5)" */
double pj_tol_of(double x); /* the tolerance of a recorded time x */

/* Parses "schedule" into p->ops (structure only: kinds, ranges, devices, duplicates, missing
 * ops, split); rec[d][i] gets the recorded start/end, *has_times whether there were any. */
int pj_read_schedule(pj_rd *r, json_t *arr, json_t *split_arr, op_plan *p, op_op **rec,
                     int *has_times);
/* Recorded times: right durations, one op at a time per device, no op before its input. */
int pj_check_times(pj_rd *r, const op_plan *p);
/* "predicted" against the re-simulation in p->pred (info: how far they differ). */
int pj_check_pred(pj_rd *r, json_t *o, const op_plan *p, op_plan_file_info *info);

#endif
