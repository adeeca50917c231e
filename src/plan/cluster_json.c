/* cluster_json.c: read/write the link-model file (cluster.h). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "octopipe/cluster.h"

static const char *const k_fields[] = {"format", "nodes_of", "intra_lat_ms", "intra_bw_GBps",
                                       "inter_lat_ms", "inter_bw_GBps", "source", NULL};

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

static int read_root(const char *path, json_t *root, op_comm *c, op_err *err) {
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
        if (!known)
            return op_errf(err, OP_EINVAL, "%s: unknown field \"%.64s\" (known: format, nodes_of, "
                           "intra_lat_ms, intra_bw_GBps, inter_lat_ms, inter_bw_GBps, source)", path, k);
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
        if (f[i].bw && !(f[i].v > 0))
            return op_errf(err, OP_EINVAL, "%s: %s: %g must be > 0", path, f[i].key, f[i].v);
        if (!f[i].bw && !(f[i].v >= 0 && f[i].v <= OP_MAX_MS))
            return op_errf(err, OP_EINVAL, "%s: %s: %g is not in [0, %g]", path, f[i].key, f[i].v,
                           OP_MAX_MS);
    }
    *c = t;
    return OP_OK;
}

int op_cluster_from_json(const char *text, const char *name, op_comm *c, op_err *err) {
    json_error_t je;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return op_errf(err, OP_EINVAL, "%s:%d:%d: not valid JSON: %s", name, je.line, je.column, je.text);
    int rc = read_root(name, root, c, err);
    json_decref(root);
    return rc;
}

int op_cluster_read(const char *path, op_comm *c, op_err *err) {
    char *text = NULL;
    int rc = op_read_file(path, &text, NULL, err);
    if (rc != OP_OK) return rc;
    rc = op_cluster_from_json(text, path, c, err);
    free(text);
    return rc;
}

int op_cluster_write(const char *path, const op_comm *c, const char *source, op_err *err) {
    json_t *o = json_pack("{s:s, s:i, s:f, s:f, s:f, s:f, s:s}", "format", "octopipe.cluster/1",
                          "nodes_of", c->nodes_of, "intra_lat_ms", c->intra_lat_ms,
                          "intra_bw_GBps", c->intra_bw_GBps, "inter_lat_ms", c->inter_lat_ms,
                          "inter_bw_GBps", c->inter_bw_GBps, "source", source ? source : "");
    OP_ASSERT(o, "json_pack failed");
    char *txt = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(9));
    json_decref(o);
    op_buf b = {0};
    op_buf_printf(&b, "%s\n", txt);
    free(txt);
    int rc = op_write_file_atomic(path, b.data, b.len, err);
    op_buf_free(&b);
    return rc;
}
