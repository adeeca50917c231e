/* libFuzzer target: the torch.distributed.pipelining compute_only CSV checker (it parses
 * user-edited CSV files: `octopipe export --check-csv`). */
#include "fuzz_util.h"
#include "octopipe/export.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    /* first byte picks the rank count so row-count checks are reachable */
    int P = 1 + data[0] % 8;
    char *txt = fuzz_cstr(data + 1, size - 1);
    op_err e = {0};
    (void)op_export_torch_csv_check(txt, P, 0, 0, NULL, &e);
    op_buf low = {0}; /* and the compute_comms lowering of whatever passes */
    (void)op_export_torch_csv_lower(txt, P, 0, 0, &low, &e);
    op_buf_free(&low);
    free(txt);
    return 0;
}
