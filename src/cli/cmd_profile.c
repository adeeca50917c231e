/* cmd_profile.c: `octopipe profile comm` measures P2P links (ping-pong between 2 MPI ranks) and
 * writes a cluster file; `octopipe profile --model ...` is the reference model's layer profiler. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_out.h"
#include "octopipe/cluster.h"
#include "octopipe/exec.h"
#include "octopipe/train.h" /* op_cli_profile_model: a strong reference pulls it from the archive */

static void help(void) {
    printf("usage: octopipe profile comm [--out FILE] [--max-bytes N] [--iters N] [--as intra|inter|both]\n"
           "       octopipe profile --model ...   (per-layer costs of the reference model)\n\n"
           "profile comm measures one-way point-to-point time between 2 MPI ranks over message\n"
           "sizes 8 B .. --max-bytes (ping-pong, using the executor's own polite waits), fits\n"
           "t = latency + bytes / bandwidth, prints the table and writes the fit as a cluster file\n"
           "(octopipe.cluster/1) that --cluster FILE loads.  Without mpirun around it, it starts\n"
           "`mpirun -np 2` on itself; under your own mpirun put the 2 ranks where you want them\n"
           "(two hosts measure the inter-node link: --as inter).\n\n"
           "options:\n"
           "  --out FILE        cluster file to write (default: print only)\n"
           "  --max-bytes N     largest message (default 16777216)\n"
           "  --iters N         round trips per size (default 200)\n"
           "  --as WHAT         which link the fit describes: intra (default), inter, or both\n\n"
           "example:\n  octopipe profile comm --out cluster.json\n");
}

static int profile_comm(int argc, char **argv) {
    const char *out = NULL, *as = "intra";
    long max_bytes = 16 << 20, iters = 200;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help();
            return 0;
        } else if (!strcmp(a, "--out") && v) {
            out = v, i++;
        } else if (!strcmp(a, "--as") && v) {
            if (strcmp(v, "intra") && strcmp(v, "inter") && strcmp(v, "both")) {
                fprintf(stderr, "octopipe profile: --as needs intra, inter or both (got '%s')\n", v);
                return 2;
            }
            as = v, i++;
        } else if (!strcmp(a, "--max-bytes") || !strcmp(a, "--iters")) {
            long x = v ? strtol(v, &end, 10) : 0;
            if (!v || *end || x < 1 || x > (1L << 30)) {
                fprintf(stderr, "octopipe profile: %s needs an integer in [1, 2^30] (got '%s')\n", a, v ? v : "");
                return 2;
            }
            if (a[2] == 'm') max_bytes = x;
            else iters = x;
            i++;
        } else {
            fprintf(stderr, "octopipe profile: unknown or incomplete flag '%s' (octopipe profile --help)\n", a);
            return 2;
        }
    }
    if (op_cli_check_out("profile", out)) return 2; /* before mpirun starts */
    op_err e = {0};
    if (!getenv("OMPI_COMM_WORLD_SIZE")) { /* not under mpirun: start 2 ranks of ourselves */
        int code = op_exec_launch(2, argv, argc, 120, NULL, &e);
        if (code) fprintf(stderr, "octopipe profile: %s\n", e.msg[0] ? e.msg : "mpirun failed");
        return code ? 1 : 0;
    }
    op_xport x;
    if (op_xport_mpi_init(&x, &argc, &argv, &e)) {
        fprintf(stderr, "octopipe profile: %s\n", e.msg);
        return 1;
    }
    double lat = 0, bw = 0;
    op_buf tab = {0};
    int rc = op_exec_pingpong(&x, max_bytes, (int)iters, &lat, &bw, &tab, &e);
    if (rc) {
        if (x.rank == 0) fprintf(stderr, "octopipe profile: %s\n", e.msg);
        op_xport_mpi_finalize(&x);
        return 2;
    }
    int code = 0;
    if (x.rank == 0) {
        FILE *info = op_cli_info(out); /* --out -: the cluster file alone on stdout */
        fputs(tab.data, info);
        fprintf(info, "fit: latency %.4f ms, bandwidth %.3f GB/s (%s)\n", lat, bw, as);
        if (out) {
            op_comm c = {0};
            c.intra_lat_ms = c.inter_lat_ms = lat;
            c.intra_bw_GBps = c.inter_bw_GBps = bw;
            if (!strcmp(as, "inter")) c.nodes_of = 1; /* every rank its own node */
            char src[160];
            snprintf(src, sizeof src, "octopipe profile comm: ping-pong 8 B..%ld B, %ld iters, %s link",
                     max_bytes, iters, as);
            if (op_cluster_write(out, &c, src, &e)) {
                fprintf(stderr, "octopipe profile: %s\n", e.msg);
                code = 1;
            } else if (!op_out_is_stdout(out)) {
                printf("wrote %s\n", out);
            }
        }
    }
    op_buf_free(&tab);
    op_xport_mpi_finalize(&x);
    return code;
}

int cmd_profile(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "comm")) return profile_comm(argc, argv);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        help();
        return argc < 2 ? 2 : 0;
    }
    return op_cli_profile_model(argc, argv);
}
