/* libFuzzer target: the Hugging Face config.json importer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "octopipe/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *txt = malloc(size + 1);
    memcpy(txt, data, size);
    txt[size] = 0;
    op_model m = {0};
    op_err e = {0};
    if (op_model_from_hf_json(txt, "fuzz", &m, &e) == OP_OK) op_model_free(&m);
    free(txt);
    return 0;
}
