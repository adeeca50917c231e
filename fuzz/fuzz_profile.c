/* libFuzzer target: the profile file parser. */
#include "fuzz_util.h"
#include "octopipe/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *txt = fuzz_cstr(data, size);
    op_model m = {0};
    op_err e = {0};
    if (op_model_from_profile_json(txt, "fuzz", &m, &e) == OP_OK) op_model_free(&m);
    free(txt);
    return 0;
}
