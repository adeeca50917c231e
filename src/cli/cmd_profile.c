/* cmd_profile.c: `octopipe profile comm` measures P2P links (ping-pong between MPI ranks 0 and
 * 1, and between every pair over 3 or more ranks) and writes a cluster file; `octopipe profile --model ...` is the reference model's layer profiler. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_common.h"
#include "cli/cli_out.h"
#include "octopipe/cluster.h"
#include "octopipe/exec.h"

static void usage(FILE *f) {
    fprintf(f,
           "usage: octopipe profile comm [--out FILE] [--ranks N] [--pairs | --no-pairs] [--max-bytes N]\n"
           "                              [--iters N] [--as intra|inter|both]\n"
           "       octopipe profile --model PRESET|PATTERN ...   (the reference model's layers: below)\n\n"
           "profile comm measures one-way point-to-point time between MPI ranks 0 and 1 over message\n"
           "sizes 8 B, 32 B, ... (x4) up to --max-bytes (8 MiB at the default cap; ping-pong, with the\n"
           "executor's own polite waits), fits t = latency + bytes / bandwidth, prints the table\n"
           "and writes the fit as a cluster file (octopipe.cluster/1) that --cluster FILE loads.\n"
           "Over 3 or more ranks it also measures every pair of ranks (8 B and a large message\n"
           "each, one pair at a time) and writes them as pair_lat_ms / pair_bw_GBps: the file then\n"
           "describes exactly that many devices, device d being rank d.  Without mpirun around it,\n"
           "it starts `mpirun -np N` on itself (--ranks, default 2); under your own mpirun put the\n"
           "ranks where the devices are (two hosts measure the inter-node link: --as inter).\n\n"
           "options:\n"
           "  --out FILE        cluster file to write (default: print only)\n"
           "  --ranks N         ranks to start when not under mpirun (2 to 64, default 2)\n"
           "  --pairs           measure and write every pair also over 2 ranks\n"
           "  --no-pairs        only the fit, also over 3 or more ranks (the file fits any device count)\n"
           "  --max-bytes N     cap on the message size, at least 32 (default 16777216: the largest\n"
           "                    size sent is then 8 MiB; per pair at most 4 MiB)\n"
           "  --iters N         round trips per size (default 200; per pair a quarter, 5 to 50)\n"
           "  --as WHAT         which link the fit describes: intra (default), inter, or both\n\n"
           "examples:\n  octopipe profile comm --out cluster.json\n"
           "  octopipe profile comm --ranks 4 --out cluster4.json   (then: plan --cluster cluster4.json: 4 devices)\n\n");
    cmd_profile_model_help(f);
}

/* Rank 0: the per-pair table (one line per pair a < b; the links are the same both ways). */
static void print_pairs(FILE *f, int P, const double *lat, const double *bw) {
    fprintf(f, "%6s %6s %12s %12s\n", "rank a", "rank b", "latency ms", "GB/s");
    for (int a = 0; a < P; a++)
        for (int b = a + 1; b < P; b++)
            fprintf(f, "%6d %6d %12.4f %12.3f\n", a, b, lat[a * P + b], bw[a * P + b]);
}

static int profile_comm(int argc, char **argv) {
    const char *out = NULL, *as = "intra";
    long max_bytes = 16 << 20, iters = 200, ranks = 2;
    int pairs = -1; /* -1: over 3 or more ranks */
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--out") && v) {
            out = v, i++;
        } else if (!strcmp(a, "--as") && v) {
            if (strcmp(v, "intra") && strcmp(v, "inter") && strcmp(v, "both")) {
                fprintf(stderr, "octopipe profile: --as needs intra, inter or both (got '%s')\n", v);
                return 2;
            }
            as = v, i++;
        } else if (!strcmp(a, "--pairs") || !strcmp(a, "--no-pairs")) {
            pairs = a[2] == 'p';
        } else if (!strcmp(a, "--ranks")) {
            long x = 0;
            if (op_parse_long(v, &x) || x < 2 || x > 64) {
                fprintf(stderr, "octopipe profile: --ranks needs an integer in [2, 64] (got '%s')\n", v ? v : "");
                return 2;
            }
            ranks = x, i++;
        } else if (!strcmp(a, "--max-bytes") || !strcmp(a, "--iters")) {
            long x = 0;
            if (op_parse_long(v, &x) || x < 1 || x > (1L << 30)) {
                fprintf(stderr, "octopipe profile: %s needs an integer in [1, 2^30] (got '%s')\n", a, v ? v : "");
                return 2;
            }
            /* sizes go 8, 32, 128, ...: below 32 there is one size, and one point fits no line */
            if (a[2] == 'm' && x < 32) {
                fprintf(stderr, "octopipe profile: --max-bytes needs at least 32 (two message sizes, "
                        "8 B and 32 B, to fit latency and bandwidth; got %ld)\n", x);
                return 2;
            }
            if (a[2] == 'm') max_bytes = x;
            else iters = x;
            i++;
        } else {
            char dym[160];
            fprintf(stderr, "octopipe profile: unknown or incomplete flag '%s'%s (octopipe profile --help)\n",
                    a, op_cli_suggest(usage, a, dym, sizeof dym));
            return 2;
        }
    }
    if (op_cli_check_out("profile", out)) return 2; /* before mpirun starts */
    op_err e = {0};
    if (!getenv("OMPI_COMM_WORLD_SIZE")) { /* not under mpirun: start 2 ranks of ourselves */
        int code = op_exec_launch((int)ranks, argv, argc, 120 + 30 * (double)ranks, NULL, &e);
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
    const int P = x.size;
    if (pairs < 0) pairs = P >= 3;
    double *plat = NULL, *pbw = NULL;
    const long large = max_bytes < (4L << 20) ? max_bytes : 4L << 20;
    const long piters = iters / 4 < 5 ? 5 : iters / 4 > 50 ? 50 : iters / 4;
    if (pairs) {
        plat = op_xcalloc((size_t)P * (size_t)P, sizeof(double));
        pbw = op_xcalloc((size_t)P * (size_t)P, sizeof(double));
        if ((rc = op_exec_pingpong_pairs(&x, large, (int)piters, plat, pbw, &e))) {
            if (x.rank == 0) fprintf(stderr, "octopipe profile: %s\n", e.msg);
            free(plat), free(pbw), op_buf_free(&tab);
            op_xport_mpi_finalize(&x);
            return 2;
        }
    }
    long top = 8; /* the largest size sent: 8 x 4^k within the cap */
    while (top * 4 <= max_bytes) top *= 4;
    int code = 0;
    /* checked on rank 0 only after the pairs, which every rank takes part in: stopping earlier
     * would leave the others waiting at a barrier */
    if (x.rank == 0 && !(isfinite(lat) && lat >= 0 && isfinite(bw) && bw > 0)) {
        fprintf(stderr, "octopipe profile: the ping-pong times over 8 B..%ld B fit no link (latency %g ms, "
                "bandwidth %g GB/s)%s; try a larger --max-bytes%s\n", top, lat, bw,
                bw == 0 ? ": the larger messages were no slower" : "", out ? " (nothing written)" : "");
        code = 1;
    } else if (x.rank == 0) {
        FILE *info = op_cli_info(out); /* --out -: the cluster file alone on stdout */
        fputs(tab.data, info);
        fprintf(info, "fit: latency %.4f ms, bandwidth %.3f GB/s (%s)\n", lat, bw, as);
        if (pairs) print_pairs(info, P, plat, pbw);
        if (out) {
            op_comm c = {0};
            c.intra_lat_ms = c.inter_lat_ms = lat;
            c.intra_bw_GBps = c.inter_bw_GBps = bw;
            if (!strcmp(as, "inter")) c.nodes_of = 1; /* every rank its own node */
            if (pairs) c.pair_n = P, c.pair_lat_ms = plat, c.pair_bw_GBps = pbw;
            char src[200], ps[80] = "";
            if (pairs)
                snprintf(ps, sizeof ps, "; every pair of %d ranks: 8 B and %ld B, %ld iters", P, large, piters);
            snprintf(src, sizeof src, "octopipe profile comm: ping-pong 8 B..%ld B, %ld iters, %s link%s",
                     top, iters, as, ps);
            if (op_cluster_write(out, &c, src, &e)) {
                fprintf(stderr, "octopipe profile: %s\n", e.msg);
                code = 1;
            } else if (!op_out_is_stdout(out)) {
                printf("wrote %s\n", out);
            }
        }
    }
    free(plat);
    free(pbw);
    op_buf_free(&tab);
    op_xport_mpi_finalize(&x);
    return code;
}

int cmd_profile(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "comm")) return profile_comm(argc, argv);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return argc < 2 ? 2 : 0;
    }
    return cmd_profile_model(argc, argv);
}
