/* cli_out.c: output checks, progress choice and memory wording shared by the commands. */
#include "cli/cli_out.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int op_cli_check_out(const char *cmd, const char *path) {
    if (!path) return 0;
    op_err e = {0};
    if (op_out_check(path, &e) == OP_OK) return 0;
    fprintf(stderr, "octopipe %s: %s\n", cmd, e.msg);
    return 2;
}

int op_cli_check_out_dir(const char *cmd, const char *dir) {
    if (!dir) return 0;
    struct stat st;
    if (stat(dir, &st) != 0) return op_cli_check_out(cmd, dir); /* can it be created? */
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "octopipe %s: %s: cannot write: is not a directory\n", cmd, dir);
        return 2;
    }
    size_t n = strlen(dir) + 32;
    char *probe = malloc(n);
    if (!probe) return 2;
    snprintf(probe, n, "%s/.octopipe-out", dir); /* checked, never written */
    int rc = 0;
    op_err e = {0};
    if (op_out_check(probe, &e) != OP_OK) {
        fprintf(stderr, "octopipe %s: %s: cannot write: cannot create files in it\n", cmd, dir);
        rc = 2;
    }
    free(probe);
    return rc;
}

FILE *op_cli_info(const char *out_path) { return op_out_is_stdout(out_path) ? stderr : stdout; }

int op_cli_progress_wanted(int asked, int quiet) {
    if (quiet) return 0;
    return asked || isatty(STDERR_FILENO);
}

int op_cli_layer_has_mem(const op_layer_cost *c) {
    return c->act_bytes || c->act_w_bytes || c->param_bytes || c->static_bytes || c->act_i_bytes;
}

int op_cli_mem_modelled(const op_layer_cost *layers, int n_layers) {
    for (int l = 0; l < n_layers; l++)
        if (op_cli_layer_has_mem(&layers[l])) return 1;
    return 0;
}

const char *op_cli_mem_limit_str(double limit_bytes, char *buf, size_t cap) {
    if (limit_bytes <= 0) snprintf(buf, cap, "none");
    else {
        char g[32];
        snprintf(buf, cap, "%s GiB", op_gib_text(limit_bytes, g, sizeof g));
    }
    return buf;
}

int op_cli_mpi_other_rank(void) {
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    return r && strcmp(r, "0") != 0;
}
