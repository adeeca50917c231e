/* libFuzzer target: the link-model file (--cluster, `octopipe profile comm`).  What it accepts
 * must pass the problem's own link check, so no accepted file reaches an assertion later. */
#include "fuzz_util.h"
#include "octopipe/cluster.h"
#include "octopipe/plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *txt = fuzz_cstr(data, size);
    op_comm c;
    op_err e = {0};
    if (op_cluster_from_json(txt, "fuzz.json", &c, &e) == OP_OK) {
        if (op_comm_validate(&c, 4096, &e) != OP_OK) abort(); /* accepted links must be usable */
        (void)op_comm_ms(&c, 0, 4095, (int64_t)1 << 53);
    }
    free(txt);
    return 0;
}
