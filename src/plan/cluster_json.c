/* cluster_json.c: read/write the link-model file (cluster.h). */
#include <jansson.h>
#include <string.h>

#include "octopipe/cluster.h"

int op_cluster_read(const char *path, op_comm *c, op_err *err) {
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root)
        return op_errf(err, OP_EINVAL, "%s:%d:%d: %s", path, je.line, je.column, je.text);
    const char *fmt = NULL, *src = NULL;
    int nodes_of = 0;
    double il = 0, ib = 0, xl = 0, xb = 0;
    if (json_unpack_ex(root, &je, JSON_STRICT, "{s:s, s:i, s:F, s:F, s:F, s:F, s?s}", "format",
                       &fmt, "nodes_of", &nodes_of, "intra_lat_ms", &il, "intra_bw_GBps", &ib,
                       "inter_lat_ms", &xl, "inter_bw_GBps", &xb, "source", &src) != 0) {
        int rc = op_errf(err, OP_EINVAL, "%s: %s", path, je.text);
        json_decref(root);
        return rc;
    }
    int rc = OP_OK;
    if (strcmp(fmt, "octopipe.cluster/1") != 0)
        rc = op_errf(err, OP_EINVAL, "%s: format is \"%s\", expected \"octopipe.cluster/1\"", path,
                     fmt);
    else if (nodes_of < 0 || il < 0 || xl < 0 || ib <= 0 || xb <= 0)
        rc = op_errf(err, OP_EINVAL,
                     "%s: latencies must be >= 0, bandwidths > 0 and nodes_of >= 0", path);
    if (rc == OP_OK) {
        memset(c, 0, sizeof *c);
        c->nodes_of = nodes_of;
        c->intra_lat_ms = il;
        c->intra_bw_GBps = ib;
        c->inter_lat_ms = xl;
        c->inter_bw_GBps = xb;
    }
    json_decref(root);
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
