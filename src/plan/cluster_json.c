/* cluster_json.c: read/write the cluster file (cluster.h): links, and for mixed clusters the
 * devices (types, memory) and per-pair links. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "octopipe/cluster.h"

static const char *const k_fields[] = {"format",       "nodes_of",      "intra_lat_ms",
                                       "intra_bw_GBps", "inter_lat_ms",  "inter_bw_GBps",
                                       "source",       "gpus",          "devices",
                                       "pair_lat_ms",  "pair_bw_GBps",  NULL};

/* Required number field `key` -> *out; one line naming the file and the field otherwise. */
static int num(const char *path, json_t *root, const char *key, double *out, op_err *err) {
    json_t *v = json_object_get(root, key);
    if (!v) return op_errf(err, OP_EINVAL, "%s: missing field \"%s\" (an octopipe.cluster/1 file has "
                           "format, nodes_of, intra_lat_ms, intra_bw_GBps, inter_lat_ms, inter_bw_GBps)",
                           path, key);
    if (!json_is_number(v) || !isfinite(json_number_value(v)))
        return op_errf(err, OP_EINVAL, "%s: %s: expected a number", path, key);
    *out = json_number_value(v);
    return OP_OK;
}

/* "devices": [{"gpu": NAME, "mem_GiB": x}, ...] -> cl (types in order of first device). */
static int read_devices(const char *path, json_t *arr, op_cluster *cl, op_err *err) {
    if (!json_is_array(arr) || json_array_size(arr) < 1 || json_array_size(arr) > OP_CLUSTER_MAX_DEVICES)
        return op_errf(err, OP_EINVAL, "%s: devices: expected 1 to %d objects {\"gpu\": NAME, "
                       "\"mem_GiB\": x}", path, OP_CLUSTER_MAX_DEVICES);
    const int P = (int)json_array_size(arr);
    for (int d = 0; d < P; d++) {
        json_t *o = json_array_get(arr, (size_t)d), *v;
        const char *k;
        if (!json_is_object(o))
            return op_errf(err, OP_EINVAL, "%s: devices[%d]: expected {\"gpu\": NAME, \"mem_GiB\": x}",
                           path, d);
        json_object_foreach(o, k, v) if (strcmp(k, "gpu") && strcmp(k, "mem_GiB"))
            return op_errf(err, OP_EINVAL, "%s: devices[%d]: unknown field \"%.64s\" (known: gpu, "
                           "mem_GiB)", path, d, k);
        v = json_object_get(o, "gpu");
        if (!json_is_string(v))
            return op_errf(err, OP_EINVAL, "%s: devices[%d].gpu: expected a GPU name", path, d);
        int rc = op_cluster_parse_gpus(json_string_value(v), cl, err);
        if (rc == OP_OK && cl->P != d + 1)
            rc = op_errf(err, OP_EINVAL, "one GPU name, without a count");
        if (rc) return op_err_prefix(err, "%s: devices[%d].gpu", path, d);
        if ((v = json_object_get(o, "mem_GiB"))) {
            double g = json_is_number(v) ? json_number_value(v) : NAN;
            if (!(g >= 0.001 && g <= 1e6)) /* as --mem-limit: 1e-9 GiB printed "limit 9e-10 GiB" */
                return op_errf(err, OP_EINVAL, "%s: devices[%d].mem_GiB: expected a number in [0.001, 1e6]",
                               path, d);
            cl->dev_mem_GiB[d] = g;
        }
    }
    return OP_OK;
}

/* "pair_lat_ms" / "pair_bw_GBps": n x n rows (a -> b) into the arena.  A device's link to
 * itself is unused, yet it is copied into plan files, whose reader takes only finite numbers
 * >= 0: a diagonal of null or text here would let `plan` tune and then refuse to write. */
static int read_matrix(const char *path, json_t *v, const char *key, int n, int bw, op_cluster *cl,
                       const double **out, op_err *err) {
    if (!json_is_array(v) || (int)json_array_size(v) != n)
        return op_errf(err, OP_EINVAL, "%s: %s: expected %d rows of %d numbers (one per device; the "
                       "matrix must be devices x devices)", path, key, n, n);
    double *m = OP_ARENA_NEW(&cl->arena, double, (size_t)n * (size_t)n);
    for (int a = 0; a < n; a++) {
        json_t *row = json_array_get(v, (size_t)a);
        if (!json_is_array(row) || (int)json_array_size(row) != n)
            return op_errf(err, OP_EINVAL, "%s: %s[%d]: expected %d numbers (the matrix must be "
                           "devices x devices)", path, key, a, n);
        for (int b = 0; b < n; b++) {
            json_t *e = json_array_get(row, (size_t)b);
            double x = json_is_number(e) ? json_number_value(e) : NAN;
            int ok = bw ? isfinite(x) && (a == b ? x >= 0 : x >= OP_MIN_GBPS) : x >= 0 && x <= OP_MAX_MS;
            if (!ok)
                return op_errf(err, OP_EINVAL, "%s: %s[%d][%d]: %s", path, key, a, b,
                               !bw ? "expected a latency in [0, 1e9] ms"
                               : a != b ? "expected a bandwidth of at least 1e-06 GB/s (1 kB/s)"
                                        : "expected a number >= 0 (a device's link to itself is unused: 0 will do)");
            m[(size_t)a * n + b] = x;
        }
    }
    *out = m;
    return OP_OK;
}

/* The mixed-cluster fields of a file: devices (or gpus) and per-pair links. */
static int read_mixed(const char *path, json_t *root, op_cluster *cl, op_err *err) {
    json_t *g = json_object_get(root, "gpus"), *dv = json_object_get(root, "devices");
    int rc;
    if (g && dv)
        return op_errf(err, OP_EINVAL, "%s: gpus and devices: give the devices once", path);
    if (g) {
        if (!json_is_string(g)) return op_errf(err, OP_EINVAL, "%s: gpus: expected a string such as "
                                               "\"h100-80gb:4,a100-80gb:4\"", path);
        if ((rc = op_cluster_parse_gpus(json_string_value(g), cl, err)))
            return op_err_prefix(err, "%s: gpus", path);
    }
    if (dv && (rc = read_devices(path, dv, cl, err))) return rc;
    json_t *pl = json_object_get(root, "pair_lat_ms"), *pb = json_object_get(root, "pair_bw_GBps");
    if (!pl && !pb) return OP_OK;
    if (!pl || !pb)
        return op_errf(err, OP_EINVAL, "%s: %s: missing (per-pair links need both pair_lat_ms and "
                       "pair_bw_GBps)", path, pl ? "pair_bw_GBps" : "pair_lat_ms");
    /* without devices the matrix sets the device count (checked against --devices later) */
    int n = cl->P > 0 ? cl->P : (json_is_array(pl) ? (int)json_array_size(pl) : 0);
    if (n < 1 || n > OP_CLUSTER_MAX_DEVICES)
        return op_errf(err, OP_EINVAL, "%s: pair_lat_ms: expected 1 to %d rows", path,
                       OP_CLUSTER_MAX_DEVICES);
    if ((rc = read_matrix(path, pl, "pair_lat_ms", n, 0, cl, &cl->comm.pair_lat_ms, err)) ||
        (rc = read_matrix(path, pb, "pair_bw_GBps", n, 1, cl, &cl->comm.pair_bw_GBps, err)))
        return rc;
    cl->comm.pair_n = n;
    return OP_OK;
}

static int read_root(const char *path, json_t *root, op_cluster *cl, op_err *err) {
    op_comm *c = &cl->comm;
    if (!json_is_object(root))
        return op_errf(err, OP_EINVAL, "%s: expected a JSON object {\"format\": \"octopipe.cluster/1\", "
                       "...} (write one with `octopipe profile comm`)", path);
    json_t *v = json_object_get(root, "format");
    if (!v) return op_errf(err, OP_EINVAL, "%s: missing field \"format\": not an octopipe.cluster/1 file "
                           "(write one with `octopipe profile comm`)", path);
    if (!json_is_string(v) || strcmp(json_string_value(v), "octopipe.cluster/1") != 0)
        return op_errf(err, OP_EINVAL, "%s: format is not \"octopipe.cluster/1\"", path);
    const char *k;
    json_object_foreach(root, k, v) {
        int known = 0;
        for (const char *const *q = k_fields; *q && !known; q++) known = !strcmp(*q, k);
        if (known) continue;
        /* the list is k_fields itself, so a new field cannot be left out of the message */
        op_buf list = {0};
        for (const char *const *q = k_fields; *q; q++)
            op_buf_printf(&list, "%s%s", q == k_fields ? "" : ", ", *q);
        int rc = op_errf(err, OP_EINVAL, "%s: unknown field \"%.64s\" (known: %s)", path, k, list.data);
        op_buf_free(&list);
        return rc;
    }
    v = json_object_get(root, "source");
    if (v && !json_is_string(v)) return op_errf(err, OP_EINVAL, "%s: source: expected a string", path);
    v = json_object_get(root, "nodes_of");
    if (!v) return op_errf(err, OP_EINVAL, "%s: missing field \"nodes_of\"", path);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 1 << 20)
        return op_errf(err, OP_EINVAL, "%s: nodes_of: expected an integer in [0, %d] (0 = one node)", path,
                       1 << 20);
    op_comm t = {0};
    t.nodes_of = (int)json_integer_value(v);
    int rc;
    if ((rc = num(path, root, "intra_lat_ms", &t.intra_lat_ms, err)) ||
        (rc = num(path, root, "intra_bw_GBps", &t.intra_bw_GBps, err)) ||
        (rc = num(path, root, "inter_lat_ms", &t.inter_lat_ms, err)) ||
        (rc = num(path, root, "inter_bw_GBps", &t.inter_bw_GBps, err)))
        return rc;
    /* both links are checked whatever P will be: the file describes a machine, not a run */
    const struct { const char *key; double v; int bw; } f[] = {
        {"intra_lat_ms", t.intra_lat_ms, 0}, {"intra_bw_GBps", t.intra_bw_GBps, 1},
        {"inter_lat_ms", t.inter_lat_ms, 0}, {"inter_bw_GBps", t.inter_bw_GBps, 1}};
    for (int i = 0; i < 4; i++) {
        if (f[i].bw && !(f[i].v >= OP_MIN_GBPS && isfinite(f[i].v)))
            return op_errf(err, OP_EINVAL, "%s: %s: %g must be a bandwidth of at least %g GB/s (1 kB/s)",
                           path, f[i].key, f[i].v, OP_MIN_GBPS);
        if (!f[i].bw && !(f[i].v >= 0 && f[i].v <= OP_MAX_MS))
            return op_errf(err, OP_EINVAL, "%s: %s: %g is not in [0, %g]", path, f[i].key, f[i].v,
                           OP_MAX_MS);
    }
    *c = t;
    cl->has_links = 1;
    return read_mixed(path, root, cl, err);
}

int op_cluster_load_json(const char *text, const char *name, op_cluster *cl, op_err *err) {
    memset(cl, 0, sizeof *cl);
    json_error_t je;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return op_errf(err, OP_EINVAL, "%s:%d:%d: not valid JSON: %s", name, je.line, je.column, je.text);
    int rc = read_root(name, root, cl, err);
    json_decref(root);
    if (rc) op_cluster_free(cl);
    return rc;
}

int op_cluster_load(const char *path, op_cluster *cl, op_err *err) {
    memset(cl, 0, sizeof *cl);
    char *text = NULL;
    int rc = op_read_file(path, &text, NULL, err);
    if (rc != OP_OK) return rc;
    rc = op_cluster_load_json(text, path, cl, err);
    free(text);
    return rc;
}

/* Links only: the per-pair arrays would point into a freed arena, so they are dropped. */
static int links_only(int rc, op_cluster *cl, op_comm *c) {
    if (rc == OP_OK) {
        *c = cl->comm;
        c->pair_n = 0;
        c->pair_lat_ms = c->pair_bw_GBps = NULL;
    }
    op_cluster_free(cl);
    return rc;
}

int op_cluster_from_json(const char *text, const char *name, op_comm *c, op_err *err) {
    op_cluster cl;
    return links_only(op_cluster_load_json(text, name, &cl, err), &cl, c);
}

int op_cluster_read(const char *path, op_comm *c, op_err *err) {
    op_cluster cl;
    return links_only(op_cluster_load(path, &cl, err), &cl, c);
}

/* n x n rows of m as a JSON array of arrays. */
static json_t *matrix(const double *m, int n) {
    json_t *rows = json_array();
    for (int a = 0; a < n; a++) {
        json_t *row = json_array();
        for (int b = 0; b < n; b++) json_array_append_new(row, json_real(m[(size_t)a * n + b]));
        json_array_append_new(rows, row);
    }
    return rows;
}

/* A link the reader would refuse (or JSON cannot hold: NaN, infinity) is refused here, so a
 * written file always loads back.  Diagonal bandwidths are unused: only finite, for JSON. */
static int check_links(const op_comm *c, op_err *err) {
    /* as op_cluster_read takes it: a file written with another count could not be read back */
    if (c->nodes_of < 0 || c->nodes_of > 1 << 20)
        return op_errf(err, OP_EINVAL, "nodes_of: %d is not in [0, %d] (0 = one node)", c->nodes_of,
                       1 << 20);
    const struct { const char *key; double v; int bw; } f[] = {
        {"intra_lat_ms", c->intra_lat_ms, 0}, {"intra_bw_GBps", c->intra_bw_GBps, 1},
        {"inter_lat_ms", c->inter_lat_ms, 0}, {"inter_bw_GBps", c->inter_bw_GBps, 1}};
    for (int i = 0; i < 4; i++) {
        if (f[i].bw && !(f[i].v >= OP_MIN_GBPS && isfinite(f[i].v)))
            return op_errf(err, OP_EINVAL, "%s: %g is not a bandwidth of at least %g GB/s (1 kB/s)",
                           f[i].key, f[i].v, OP_MIN_GBPS);
        if (!f[i].bw && !(f[i].v >= 0 && f[i].v <= OP_MAX_MS))
            return op_errf(err, OP_EINVAL, "%s: %g is not a latency in [0, %g] ms", f[i].key, f[i].v,
                           OP_MAX_MS);
    }
    if (c->pair_n > 0 && c->pair_lat_ms && c->pair_bw_GBps)
        for (int a = 0; a < c->pair_n; a++)
            for (int b = 0; b < c->pair_n; b++) {
                double l = c->pair_lat_ms[(size_t)a * c->pair_n + b];
                double w = c->pair_bw_GBps[(size_t)a * c->pair_n + b];
                if (!(l >= 0 && l <= OP_MAX_MS))
                    return op_errf(err, OP_EINVAL, "pair_lat_ms[%d][%d]: %g is not a latency in [0, %g] ms",
                                   a, b, l, OP_MAX_MS);
                if (!isfinite(w) || (!(w >= OP_MIN_GBPS) && a != b))
                    return op_errf(err, OP_EINVAL, "pair_bw_GBps[%d][%d]: %g is not a bandwidth of at "
                                   "least %g GB/s (1 kB/s)", a, b, w, OP_MIN_GBPS);
            }
    return OP_OK;
}

int op_cluster_write(const char *path, const op_comm *c, const char *source, op_err *err) {
    int bad = check_links(c, err);
    if (bad) return bad;
    /* jansson refuses a string that is not UTF-8 (a caller's Latin-1 host or file name) */
    char src[512];
    op_copy_name(src, sizeof src, source);
    json_t *o = json_pack("{s:s, s:i, s:f, s:f, s:f, s:f, s:s}", "format", "octopipe.cluster/1",
                          "nodes_of", c->nodes_of, "intra_lat_ms", c->intra_lat_ms,
                          "intra_bw_GBps", c->intra_bw_GBps, "inter_lat_ms", c->inter_lat_ms,
                          "inter_bw_GBps", c->inter_bw_GBps, "source", src);
    OP_ASSERT(o, "json_pack failed"); /* every string is UTF-8 now: only out of memory */
    if (c->pair_n > 0 && c->pair_lat_ms && c->pair_bw_GBps) {
        json_object_set_new(o, "pair_lat_ms", matrix(c->pair_lat_ms, c->pair_n));
        json_object_set_new(o, "pair_bw_GBps", matrix(c->pair_bw_GBps, c->pair_n));
    }
    char *txt = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(9));
    json_decref(o);
    op_buf b = {0};
    op_buf_printf(&b, "%s\n", txt);
    free(txt);
    int rc = op_write_file_atomic(path, b.data, b.len, err);
    op_buf_free(&b);
    return rc;
}
