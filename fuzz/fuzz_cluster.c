/* libFuzzer target: the cluster file (--cluster, `octopipe profile comm`): its links and, for
 * a mixed cluster, its devices (GPU type, memory) and per-pair links.  What it accepts must
 * pass the problem's own link check, and a problem of the devices it describes must build
 * from it as `plan --cluster` builds one (per-type costs, per-device limits and host links),
 * so no accepted file reaches an assertion later. */
#include "fuzz_util.h"
#include "octopipe/problem.h"

static op_model cl_model;
static op_device cl_dev;
static op_layer_cost *cl_costs;
static char cl_path[128];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    op_err e = {0};
    /* a hybrid model (Mamba, attention, MLP layers): each GPU type costs its kinds differently */
    if (op_model_load("nemotron-h-8b", &cl_model, &e) != OP_OK ||
        op_device_preset("h100-80gb", &cl_dev, &e) != OP_OK) {
        fprintf(stderr, "fuzz_cluster: %s\n", e.msg);
        abort();
    }
    cl_costs = calloc((size_t)cl_model.n_layers, sizeof *cl_costs);
    if (!cl_costs) abort();
    fuzz_tmp_path("cluster.json", cl_path, sizeof cl_path); /* the problem reads a path */
    return 0;
}

/* The devices and per-pair links the reader kept are what its checks promise. */
static void check_cluster(const op_cluster *cl) {
    if (cl->P < 0 || cl->P > OP_CLUSTER_MAX_DEVICES || (cl->P > 0) != (cl->n_types > 0) ||
        cl->n_types > OP_CLUSTER_MAX_TYPES || !cl->has_links)
        abort();
    for (int d = 0; d < cl->P; d++)
        if (cl->dev_type[d] < 0 || cl->dev_type[d] >= cl->n_types ||
            !(cl->dev_mem_GiB[d] > 0 && cl->dev_mem_GiB[d] <= 1e6))
            abort();
    /* a matrix of another size than the device list is refused */
    if (cl->comm.pair_n < 0 || (cl->P > 0 && cl->comm.pair_n > 0 && cl->comm.pair_n != cl->P)) abort();
}

/* The problem `plan --cluster FILE` builds on an accepted file (which it reads by path). */
static void build_problem(const uint8_t *data, size_t size, int P) {
    fuzz_put_file(cl_path, data, size);
    op_problem_opts o;
    op_problem_opts_default(&o);
    o.cluster_file = cl_path;
    op_cluster st;
    o.cluster = &st;
    op_problem pr;
    op_err e = {0};
    if (op_problem_from_model(&pr, &cl_model, &cl_dev, P, 8, &o, cl_costs, &e) != OP_OK) {
        fprintf(stderr, "fuzz_cluster: accepted, but no problem of %d devices: %s\n", P, e.msg);
        abort();
    }
    if (!(op_comm_ms(&pr.comm, P - 1, 0, (int64_t)1 << 30) >= 0) ||
        !(op_comm_host_ms_dev(&pr.comm, P - 1, (int64_t)1 << 30) > 0))
        abort();
    op_cluster_free(&st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *txt = fuzz_cstr(data, size);
    op_comm c;
    op_cluster cl;
    op_err e = {0}, el = {0};
    int rc = op_cluster_from_json(txt, "fuzz.json", &c, &e);
    /* the full reader: the same answer, and the devices and per-pair links kept */
    int rl = op_cluster_load_json(txt, "fuzz.json", &cl, &el);
    if (rc != rl) abort();
    if (rc == OP_OK) {
        if (op_comm_validate(&c, 4096, &e) != OP_OK) abort(); /* accepted links must be usable */
        (void)op_comm_ms(&c, 0, 4095, (int64_t)1 << 53);
        check_cluster(&cl);
        /* the devices the file gives (its list, else its matrix), else two nodes' worth */
        int P = cl.P ? cl.P : cl.comm.pair_n ? cl.comm.pair_n : 16;
        op_cluster_free(&cl);
        if (P <= cl_model.n_layers) /* more devices than layers: the problem's refusal */
            build_problem(data, size, P);
    }
    free(txt);
    return 0;
}
