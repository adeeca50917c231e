/* libFuzzer target: the plan file reader and validator, then the simulator on what it accepts
 * (a plan that reads back must simulate without crashing or hanging), and the exports' training
 * settings (batch, degrees, per-stage policies as framework flags). */
#include "fuzz_util.h"
#include "octopipe/export.h"
#include "octopipe/plan.h"
#include "octopipe/sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *txt = fuzz_cstr(data, size);
    op_plan p;
    op_err e = {0};
    if (op_plan_from_json(txt, "fuzz.json", &p, &e) == OP_OK) {
        (void)op_sim_replay(&p, NULL, &e);
        op_buf b = {0}, n = {0};
        op_export_megatron_settings(&p, OP_MEGATRON_LAYOUT, &b, &n);
        op_export_megatron_settings(&p, OP_MEGATRON_HYBRID, &b, &n);
        op_export_torch_hint(&p, &b);
        op_buf_free(&b), op_buf_free(&n);
        op_plan_free(&p);
    }
    free(txt);
    return 0;
}
