/* cluster_desc.c: the devices of a cluster description (cluster.h): the --gpus list, and the
 * memory each device has. */
#include <stdlib.h>
#include <string.h>

#include "octopipe/cluster.h"

/* Type index of preset `d` in c, adding it when new; -1 when c has OP_CLUSTER_MAX_TYPES. */
static int type_of(op_cluster *c, const op_device *d) {
    for (int t = 0; t < c->n_types; t++)
        if (!strcmp(c->type_dev[t].name, d->name)) return t;
    if (c->n_types == OP_CLUSTER_MAX_TYPES) return -1;
    c->type_dev[c->n_types] = *d;
    return c->n_types++;
}

int op_cluster_parse_gpus(const char *spec, op_cluster *c, op_err *err) {
    if (!spec || !*spec)
        return op_errf(err, OP_EINVAL, "empty GPU list (expected NAME:COUNT,..., e.g. h100-80gb:4,a100-80gb:4)");
    /* parse everything first, so a bad list leaves c as it was */
    enum { MAX_ITEMS = 64 };
    op_device dev[MAX_ITEMS];
    long cnt[MAX_ITEMS];
    int n = 0;
    long total = c->P;
    const char *p = spec;
    while (1) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[96];
        if (len == 0 || len >= sizeof item)
            return op_errf(err, OP_EINVAL, "GPU list '%.200s': item %d is %s (expected NAME:COUNT)", spec,
                           n + 1, len ? "too long" : "empty");
        if (n == MAX_ITEMS)
            return op_errf(err, OP_EINVAL, "GPU list '%.200s': more than %d items", spec, MAX_ITEMS);
        memcpy(item, p, len);
        item[len] = 0;
        char *colon = strchr(item, ':');
        cnt[n] = 1;
        if (colon) {
            *colon = 0;
            long k = 0;
            if (op_parse_long(colon + 1, &k) || k < 1 || k > OP_CLUSTER_MAX_DEVICES)
                return op_errf(err, OP_EINVAL, "GPU list '%.200s': count '%.40s' of %.40s must be a whole "
                               "number from 1 to %d", spec, colon + 1, item, OP_CLUSTER_MAX_DEVICES);
            cnt[n] = k;
        }
        int rc = op_device_preset(item, &dev[n], err);
        if (rc) return op_err_prefix(err, "GPU list '%.200s'", spec);
        total += cnt[n++];
        if (total > OP_CLUSTER_MAX_DEVICES)
            return op_errf(err, OP_EINVAL, "GPU list '%.200s': more than %d devices", spec,
                           OP_CLUSTER_MAX_DEVICES);
        if (!end) break;
        p = end + 1;
    }
    /* types: at most OP_CLUSTER_MAX_TYPES, counted before anything changes */
    op_cluster probe = {.n_types = c->n_types};
    memcpy(probe.type_dev, c->type_dev, sizeof probe.type_dev);
    for (int i = 0; i < n; i++)
        if (type_of(&probe, &dev[i]) < 0)
            return op_errf(err, OP_EINVAL, "GPU list '%.200s': more than %d GPU types", spec,
                           OP_CLUSTER_MAX_TYPES);
    /* room grows by doubling: a cluster file's device list appends one device per call, and
     * fresh arrays of exactly `total` each time took 114 MB (quadratic) for 4096 devices */
    if (total > c->dev_cap) {
        long cap = 2L * c->dev_cap > total ? 2L * c->dev_cap : total;
        int *dt = OP_ARENA_NEW(&c->arena, int, cap);
        double *mem = OP_ARENA_NEW(&c->arena, double, cap);
        if (c->P) {
            memcpy(dt, c->dev_type, sizeof(int) * (size_t)c->P);
            memcpy(mem, c->dev_mem_GiB, sizeof(double) * (size_t)c->P);
        }
        c->dev_type = dt;
        c->dev_mem_GiB = mem;
        c->dev_cap = (int)cap;
    }
    int *dt = c->dev_type;
    double *mem = c->dev_mem_GiB;
    int d = c->P;
    for (int i = 0; i < n; i++) {
        int t = type_of(c, &dev[i]);
        for (long k = 0; k < cnt[i]; k++, d++) {
            dt[d] = t;
            mem[d] = dev[i].mem_GiB;
        }
    }
    c->P = (int)total;
    return OP_OK;
}

void op_cluster_free(op_cluster *c) {
    op_arena_free(&c->arena);
    memset(c, 0, sizeof *c);
}
