/* cli_common.c: shared model/cluster flags -> op_problem (see cli_common.h). */
#include "cli/cli_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_out.h"
#include "octopipe/out.h"


void op_cli_setup_init(op_cli_setup *s) {
    memset(s, 0, sizeof *s);
    s->P = 0;
    s->M = 0;
    op_train_cfg_default(&s->train);
    s->gpu = "h100-80gb";
    s->nodes_of = 8;
}

const char *op_cli_value(const char *cmd, int argc, char **argv, int *i) {
    if (*i + 1 >= argc || !argv[*i + 1][0]) {
        fprintf(stderr, "octopipe %s: %s needs a value\n", cmd, argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

int op_cli_int(const char *cmd, const char *flag, const char *v, long lo, long hi, int *out) {
    long x;
    if (op_parse_long(v, &x)) {
        /* the range too: a number too large to read (2^63) is refused here, not by the range */
        fprintf(stderr, "octopipe %s: %s expects a whole number (%ld to %ld), got '%s'\n", cmd, flag,
                lo, hi, v);
        return -1;
    }
    if (x < lo || x > hi) {
        fprintf(stderr, "octopipe %s: %s must be between %ld and %ld, got %ld\n", cmd, flag, lo,
                hi, x);
        return -1;
    }
    *out = (int)x;
    return 0;
}

int op_cli_decimal(const char *v, double *out) {
    return v ? op_parse_decimal(v, strlen(v), out) : -1;
}

int op_cli_double(const char *cmd, const char *flag, const char *v, double lo, double hi,
                  double *out) {
    double x;
    if (op_cli_decimal(v, &x)) {
        /* %.10g: "0.001 to 1000000", not %g's "1e+06" */
        fprintf(stderr, "octopipe %s: %s expects a number (%.10g to %.10g), got '%s'\n", cmd, flag,
                lo, hi, v);
        return -1;
    }
    if (x < lo || x > hi) {
        fprintf(stderr, "octopipe %s: %s must be between %.10g and %.10g, got %.10g\n", cmd, flag,
                lo, hi, x);
        return -1;
    }
    *out = x;
    return 0;
}

const char *op_cli_setup_help(void) {
    return "model and cluster:\n"
           "  --model FILE|PRESET   HF config.json, profile JSON, or a preset (octopipe models)\n"
           "  --devices P           pipeline devices (1..4096); may be left out where --gpus or\n"
           "                        a --cluster file lists them (or its per-pair links)\n"
           "  --microbatches M      microbatches per iteration (1..65536; our executor, `run`,\n"
           "                        runs plans of up to 65535: its message tags)\n"
           "  --seq N               tokens per sample (default 4096; a profile's own \"seq\"\n"
           "                        where it gives one)\n"
           "  --mbs N               samples per microbatch (default 1; a profile's \"mbs\")\n"
           "  --tp N                tensor-parallel degree inside each stage (default 1)\n"
           "  --dp N                data-parallel degree, for --zero1 and --ep (default 1)\n"
           "  --zero1               shard optimizer state over the DP group (ZeRO-1; a routed\n"
           "                        expert's over the dp / ep ranks that hold it)\n"
           "  --ep N                expert-parallel degree: each MoE layer's routed experts\n"
           "                        split over N data-parallel ranks (Megatron's\n"
           "                        --expert-model-parallel-size; N divides --dp and every MoE\n"
           "                        layer's expert count), with the token all-to-all priced\n"
           "                        on the in-node link (default 1)\n"
           "  --gpu NAME            a100-40gb | a100-80gb | h100-80gb | h200 | b200 (default\n"
           "                        h100-80gb); with --gpus, the GPU a profile's times were\n"
           "                        measured on\n"
           "  --gpus NAME:N,...     mixed cluster: each device's GPU in rank order, e.g.\n"
           "                        h100-80gb:4,a100-80gb:4 (counts add up to --devices, which\n"
           "                        may then be left out); docs/cluster.md\n"
           "  --nodes-of N          devices per node; links between nodes are slower (default 8;\n"
           "                        a --cluster file gives its own)\n"
           "  --cluster FILE        cluster file: measured links (`octopipe profile comm`),\n"
           "                        and optionally devices and per-pair links (docs/cluster.md)\n"
           "  --comm none|default   none: free communication (for analytic comparisons); a\n"
           "                        --cluster file's devices still count, its links do not;\n"
           "                        default: the link model (the default)\n"
           "  --mem-limit GiB|none  per-device memory limit (default: 90% of the GPU's memory,\n"
           "                        leaving room for the CUDA context, NCCL buffers and\n"
           "                        fragmentation, which the model does not count)\n"
           "  --op-overhead MS      per-op dispatch cost added to every op (default 0)\n";
}

int op_cli_setup_flag(op_cli_setup *s, int argc, char **argv, int *i, const char *cmd) {
    const char *f = argv[*i], *v;
#define VALUE() \
    do { if (!(v = op_cli_value(cmd, argc, argv, i))) return -1; } while (0)
    if (!strcmp(f, "--model")) {
        VALUE();
        s->model_arg = v;
        op_out_protect(v); /* no output of this command may replace it */
    } else if (!strcmp(f, "--devices")) {
        VALUE();
        if (op_cli_int(cmd, f, v, 1, 4096, &s->P)) return -1;
    } else if (!strcmp(f, "--microbatches")) {
        VALUE();
        if (op_cli_int(cmd, f, v, 1, 65536, &s->M)) return -1;
    } else if (!strcmp(f, "--seq")) {
        VALUE();
        if (op_cli_int(cmd, f, v, 1, 16777216, &s->train.seq)) return -1;
        s->batch_given = 1;
    } else if (!strcmp(f, "--mbs")) {
        VALUE();
        if (op_cli_int(cmd, f, v, 1, 65536, &s->train.mbs)) return -1;
        s->batch_given = 1;
    } else if (!strcmp(f, "--tp")) {
        VALUE();
        if (op_cli_int(cmd, f, v, 1, 1024, &s->train.tp)) return -1;
    } else if (!strcmp(f, "--dp")) {
        VALUE();
        if (op_cli_int(cmd, f, v, 1, 1 << 20, &s->train.dp)) return -1;
    } else if (!strcmp(f, "--ep")) {
        VALUE();
        if (op_cli_int(cmd, f, v, 1, 1024, &s->train.ep)) return -1;
    } else if (!strcmp(f, "--zero1")) {
        s->train.zero1 = 1;
    } else if (!strcmp(f, "--gpu")) {
        VALUE();
        s->gpu = v;
        s->gpu_given = 1;
    } else if (!strcmp(f, "--gpus")) {
        VALUE();
        s->gpus = v;
    } else if (!strcmp(f, "--nodes-of")) {
        VALUE();
        if (op_cli_int(cmd, f, v, 1, 1 << 20, &s->nodes_of)) return -1;
        s->nodes_of_given = 1;
    } else if (!strcmp(f, "--cluster")) {
        VALUE();
        s->cluster_file = v;
        op_out_protect(v);
    } else if (!strcmp(f, "--comm")) {
        VALUE();
        if (strcmp(v, "none") != 0 && strcmp(v, "default") != 0) {
            fprintf(stderr, "octopipe %s: --comm takes 'none' or 'default', got '%s'\n", cmd, v);
            return -1;
        }
        s->comm_none = !strcmp(v, "none");
    } else if (!strcmp(f, "--mem-limit")) {
        VALUE();
        /* the last --mem-limit wins, as for every flag: "none 60" ran without a limit */
        s->no_mem_limit = !strcmp(v, "none");
        if (!s->no_mem_limit && op_cli_double(cmd, f, v, 1e-3, 1e6, &s->mem_limit_gib)) return -1;
    } else if (!strcmp(f, "--op-overhead")) {
        VALUE();
        if (op_cli_double(cmd, f, v, 0, 1e6, &s->op_overhead_ms)) return -1;
    } else {
        return 0;
    }
#undef VALUE
    return 1;
}

/* A profile with sizes for some layers only (hidden and vocab give the embedding, head and
 * Mamba layers theirs; MLP and attention layers need act_bytes and param_bytes): its peaks
 * leave the others out, and the memory columns alone do not say so (nemotron-h-8b-profile:
 * 31.6 GiB for 1F1B on 4 devices where the analytic model has 61.6). */
static void mem_partial_note(const op_cli_setup *s, const char *cmd) {
    const op_problem *pr = &s->pr;
    if (!op_cli_mem_modelled(pr->layers, pr->n_layers)) return; /* "not modelled" says it */
    char syms[16] = "", kinds[64] = "";
    int n = 0, ns = 0;
    for (int l = 0; l < pr->n_layers; l++) {
        const op_layer_cost *c = &pr->layers[l];
        if (op_cli_layer_has_mem(c)) continue;
        n++;
        if (ns < 15 && !strchr(syms, c->sym)) syms[ns++] = c->sym;
    }
    if (!n) return;
    for (int i = 0; i < ns; i++)
        snprintf(kinds + strlen(kinds), sizeof kinds - strlen(kinds), "%s'%c'", i ? " " : "", syms[i]);
    fprintf(stderr, "octopipe %s: note: %d of %d layers (%s) have no memory sizes: every peak and "
                    "limit below leaves their weights and activations out (a profile gives them "
                    "with act_bytes and param_bytes)\n",
            cmd, n, pr->n_layers, kinds);
}

/* --ep: the expert-parallel ranks are data-parallel ranks (Megatron builds the EP group inside
 * the DP group), each holding whole experts; a model without routed experts gains nothing,
 * which a reader of the unchanged figures could not tell.  0, or -1 after saying why. */
static int ep_check(const op_cli_setup *s, const char *cmd) {
    int ep = s->train.ep, dp = s->train.dp > 1 ? s->train.dp : 1;
    if (ep <= 1) return 0;
    if (dp % ep != 0) {
        fprintf(stderr, "octopipe %s: --ep %d needs a data-parallel degree it divides: the "
                        "expert-parallel ranks are data-parallel ranks holding the same stage "
                        "(Megatron's --expert-model-parallel-size divides the data-parallel "
                        "size); give --dp as a multiple of %d, such as %d\n",
                cmd, ep, ep, dp > ep ? (dp + ep - 1) / ep * ep : ep);
        return -1;
    }
    int g = op_model_expert_gcd(&s->model);
    if (g == 0) {
        fprintf(stderr, "octopipe %s: note: --ep %d changes nothing: %s has no MoE layer whose "
                        "experts the cost model sizes%s\n",
                cmd, ep, s->model.name,
                strcmp(s->model.model_type, "profile") ? ""
                                                       : " (a profile's measured layers keep their "
                                                         "measured times and bytes)");
        return 0;
    }
    if (g % ep != 0) {
        fprintf(stderr, "octopipe %s: --ep %d does not divide the routed experts of every MoE "
                        "layer of %s (their common divisor is %d): each rank holds whole experts\n",
                cmd, ep, s->model.name, g);
        return -1;
    }
    if (ep > 8)
        fprintf(stderr, "octopipe %s: note: --ep %d spans more than the 8 GPUs of a node: its "
                        "all-to-all is priced at the in-node link's speed, which it would not get "
                        "across nodes\n",
                cmd, ep);
    return 0;
}

int op_cli_setup_finish(op_cli_setup *s, const char *cmd) {
    op_err e = {0};
    if (!s->model_arg) {
        fprintf(stderr, "octopipe %s: --model is required (a preset from `octopipe models`, or a file)\n", cmd);
        return -1;
    }
    if (!s->P && (s->gpus || s->cluster_file)) { /* the devices listed say how many */
        op_cluster c = {0};
        int rc = s->gpus ? op_cluster_parse_gpus(s->gpus, &c, &e) : op_cluster_load(s->cluster_file, &c, &e);
        if (rc != OP_OK) {
            fprintf(stderr, "octopipe %s: %s%s\n", cmd, s->gpus ? "--gpus: " : "", e.msg);
            return -1;
        }
        s->P = c.P ? c.P : c.comm.pair_n; /* a link matrix (profile comm) is one row per device */
        op_cluster_free(&c);
    }
    if (!s->P) {
        fprintf(stderr, "octopipe %s: --devices is required%s\n", cmd,
                s->cluster_file ? " (the cluster file lists no devices and no per-pair links)" : "");
        return -1;
    }
    if (!s->M) {
        fprintf(stderr, "octopipe %s: --microbatches is required\n", cmd);
        return -1;
    }
    if (op_device_preset(s->gpu, &s->dev, &e) != OP_OK) {
        fprintf(stderr, "octopipe %s: %s\n", cmd, e.msg);
        return -1;
    }
    if (op_model_load(s->model_arg, &s->model, &e) != OP_OK) {
        fprintf(stderr, "octopipe %s: %s\n", cmd, e.msg);
        return -1;
    }
    if (ep_check(s, cmd)) return -1;
    /* a profile that says the batch its times were measured at: costed at it (the library
     * does so too); another batch on the command line would need other measurements */
    if (s->model.measured_seq > 0) {
        if (s->batch_given && (s->train.seq != s->model.measured_seq || s->train.mbs != s->model.measured_mbs)) {
            fprintf(stderr, "octopipe %s: %s was measured at seq %d, mbs %d (its \"seq\" and "
                            "\"mbs\"); --seq %d --mbs %d would need times measured at that "
                            "batch: drop --seq/--mbs or give the profile's\n", cmd, s->model_arg,
                    s->model.measured_seq, s->model.measured_mbs, s->train.seq, s->train.mbs);
            return -1;
        }
        s->train.seq = s->model.measured_seq, s->train.mbs = s->model.measured_mbs;
    }
    /* costs, tokens, links and the memory limit: the library's op_problem_from_model */
    op_problem_opts o;
    op_problem_opts_default(&o);
    o.train = s->train;
    o.nodes_of = s->nodes_of;
    o.comm_none = s->comm_none;
    o.cluster_file = s->cluster_file;
    o.gpus = s->gpus;
    o.cluster = &s->cluster;
    o.op_overhead_ms = s->op_overhead_ms;
    if (s->no_mem_limit) o.mem_limit_bytes = -1;
    else if (s->mem_limit_gib > 0) o.mem_limit_bytes = s->mem_limit_gib * 1073741824.0;
    if (s->model.n_layers > 0) s->costs = op_xcalloc((size_t)s->model.n_layers, sizeof *s->costs);
    if (op_problem_from_model(&s->pr, &s->model, &s->dev, s->P, s->M, &o, s->costs, &e) != OP_OK) {
        fprintf(stderr, "octopipe %s: %s\n", cmd, e.msg);
        return -1;
    }
    /* with the devices listed, --gpu only says which GPU a profile's times were measured on */
    if (s->gpu_given && s->cluster.P > 0 && strcmp(s->model.model_type, "profile") != 0) {
        fprintf(stderr, "octopipe %s: --gpu %s has no effect here: %s lists each device's GPU, "
                        "and --gpu only names the GPU a profile was measured on (%s is not a "
                        "profile); drop --gpu\n",
                cmd, s->gpu, s->gpus ? "--gpus" : s->cluster_file, s->model_arg);
        return -1;
    }
    /* a cluster file's measured links come with its own node size, which wins: a different
     * --nodes-of beside it was silently ignored */
    if (s->nodes_of_given && s->cluster_file && !s->comm_none && s->pr.comm.nodes_of != s->nodes_of) {
        fprintf(stderr, "octopipe %s: --nodes-of %d disagrees with %s, whose nodes_of is %d (its "
                        "links were measured on that layout); drop --nodes-of or edit the file\n",
                cmd, s->nodes_of, s->cluster_file, s->pr.comm.nodes_of);
        return -1;
    }
    /* the data-parallel degree enters the model only through ZeRO-1's sharding (DP's gradient
     * reduction is outside the per-microbatch costs): either flag alone changes no figure, which
     * a reader of the output cannot tell */
    if (s->train.zero1 && s->train.dp <= 1)
        fprintf(stderr, "octopipe %s: note: --zero1 without --dp N shards the optimizer state over "
                        "one rank, which saves nothing; give the data-parallel degree with --dp\n",
                cmd);
    else if (!s->train.zero1 && s->train.dp > 1 && s->train.ep <= 1)
        fprintf(stderr, "octopipe %s: note: --dp %d changes nothing without --zero1: only ZeRO-1's "
                        "sharding depends on the data-parallel degree here\n",
                cmd, s->train.dp);
    /* TP's collectives are priced on the GPU's in-node link (NVLink): past the 8 GPUs of an
     * HGX node they would cross the inter-node fabric, several times slower */
    if (s->train.tp > 8)
        fprintf(stderr, "octopipe %s: note: --tp %d spans more than the 8 GPUs of a node: its "
                        "collectives are priced at the in-node link's speed, which they would not "
                        "get across nodes\n",
                cmd, s->train.tp);
    if (s->cluster.P > 0) s->dev = s->cluster.type_dev[0];
    /* a limit above every device's memory is legal (a what-if), but more often a slip of a
     * digit (800 for 80): say so, once, and go on */
    double most = s->cluster.P > 0 ? 0 : s->dev.mem_GiB;
    for (int d = 0; d < s->cluster.P; d++) most = fmax(most, s->cluster.dev_mem_GiB[d]);
    if (s->mem_limit_gib > 0 && most > 0 && s->mem_limit_gib > most)
        fprintf(stderr, "octopipe %s: note: --mem-limit %g GiB is more than any device has (%g GiB): "
                        "plans are made for memory the GPUs do not have\n",
                cmd, s->mem_limit_gib, most);
    mem_partial_note(s, cmd);
    return 0;
}

void op_cli_setup_free(op_cli_setup *s) {
    free(s->costs);
    s->costs = NULL;
    op_model_free(&s->model);
    op_cluster_free(&s->cluster);
}

int op_cli_mem_bound_shows(double lb, double lbm) { return lbm - lb >= 0.005; }

double op_cli_min_mem_GiB(const op_cli_setup *s) {
    double m = s->dev.mem_GiB;
    for (int d = 0; d < s->cluster.P; d++)
        if (d == 0 || s->cluster.dev_mem_GiB[d] < m) m = s->cluster.dev_mem_GiB[d];
    return m;
}

const char *op_cli_zero1_text(int zero1, int dp, char *buf, size_t cap) {
    if (zero1 && dp > 1) snprintf(buf, cap, ", ZeRO-1 over dp %d", dp);
    else if (cap) buf[0] = 0;
    return buf;
}

int op_cli_mixed(const op_cli_setup *s) { return s->pr.n_types > 1 || s->pr.dev_mem_limit != NULL; }

const char *op_cli_dev_type(const op_cli_setup *s, int d) {
    return op_cli_mixed(s) && s->cluster.P > 0 ? s->cluster.type_dev[s->cluster.dev_type[d]].name : NULL;
}

void op_cli_print_types(FILE *f, const op_cli_setup *s) {
    const op_cluster *c = &s->cluster;
    if (!op_cli_mixed(s) || c->P == 0) return;
    for (int t = 0; t < c->n_types; t++) {
        int n = 0, first = -1, last = -1, runs = 0;
        double mlo = INFINITY, mhi = 0, llo = INFINITY, lhi = 0;
        for (int d = 0; d < c->P; d++) {
            if (c->dev_type[d] != t) continue;
            if (last != d - 1 || first < 0) runs++;
            if (first < 0) first = d;
            last = d;
            n++;
            mlo = fmin(mlo, c->dev_mem_GiB[d]), mhi = fmax(mhi, c->dev_mem_GiB[d]);
            double l = op_problem_dev_mem_limit(&s->pr, d) / 1073741824.0;
            llo = fmin(llo, l), lhi = fmax(lhi, l);
        }
        char where[48], mem[48], lim[48];
        if (runs == 1) snprintf(where, sizeof where, n > 1 ? "devices %d-%d" : "device %d", first, last);
        else snprintf(where, sizeof where, "devices %d..%d, not contiguous", first, last);
        if (mlo == mhi) snprintf(mem, sizeof mem, "%.0f GiB", mlo);
        else snprintf(mem, sizeof mem, "%.0f-%.0f GiB", mlo, mhi);
        if (!(lhi > 0)) snprintf(lim, sizeof lim, "no limit");
        else if (llo == lhi) snprintf(lim, sizeof lim, "limit %.2f GiB", llo);
        else snprintf(lim, sizeof lim, "limits %.2f-%.2f GiB", llo, lhi);
        fprintf(f, "  %d x %s (%s): %s, %s\n", n, c->type_dev[t].name, where, mem, lim);
    }
    op_device g;
    op_err ge = {0};
    char scaled[160] = "";
    for (int t = 0; t < c->n_types && op_problem_profile_scaled(&s->pr, &s->model); t++)
        if (!op_model_gpu_ms(&s->model, c->type_dev[t].name) &&
            (op_device_preset(s->gpu, &g, &ge) || strcmp(g.name, c->type_dev[t].name)))
            snprintf(scaled + strlen(scaled), sizeof scaled - strlen(scaled), "%s%s", *scaled ? ", " : "",
                     c->type_dev[t].name);
    if (*scaled)
        fprintf(f, "  note: the profile's times are taken as measured on %s (--gpu); it has none of its "
                "own (by_gpu) for %s: those are scaled per layer kind by the analytic model's ratio\n",
                s->gpu, scaled);
}

const char *op_cli_suggest(void (*usage)(FILE *), const char *flag, char *out, size_t n) {
    if (n) out[0] = 0;
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem) return out;
    usage(mem);
    fclose(mem);
    op_flag_suggest(text, flag, out, n);
    free(text);
    return out;
}
