/* act_policy.c: names of the activation policies (cost.h), shared by the plan file, the CLI and
 * the reports so that every place spells them the same way. */
#include <string.h>

#include "octopipe/cost.h"

static const char *const k_names[OP_ACT_N] = {"keep", "selective", "full", "offload"};

const char *op_act_policy_name(int policy) {
    return policy >= 0 && policy < OP_ACT_N ? k_names[policy] : "?";
}

int op_act_policy_parse(const char *name, op_act_policy *out, op_err *err) {
    for (int i = 0; i < OP_ACT_N; i++)
        if (name && strcmp(name, k_names[i]) == 0) {
            *out = (op_act_policy)i;
            return OP_OK;
        }
    return op_errf(err, OP_EINVAL, "unknown activation policy '%s' (keep, selective, full, offload)",
                      name ? name : "");
}
