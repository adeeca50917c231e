/* cmd_models.c: `octopipe models [NAME|FILE] [--json]`: the built-in presets, or one model's
 * layers with the dimensions the cost model reads. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_common.h"
#include "octopipe/cost.h"
#include "octopipe/model.h"

/* "parameters 51.57B (12.11B active per token)": the cost model's count, each weight once, MTP
 * blocks apart; nothing where some layer has no size (a profile's layers without dimensions
 * count 0, and a total without them would mislead). */
static int param_totals(const op_model *m, double *total, double *active, double *mtp) {
    op_train_cfg t;
    op_train_cfg_default(&t);
    op_device d;
    op_err e = {0};
    op_layer_cost *c = op_xcalloc((size_t)m->n_layers + 1, sizeof *c);
    *total = *active = *mtp = 0;
    int sized = op_device_preset("h100-80gb", &d, &e) == OP_OK && op_cost_layers(m, &t, &d, c, &e) == OP_OK;
    for (int i = 0; sized && i < m->n_layers; i++)
        if (m->layers[i].shares_params_with < 0 && c[i].params <= 0) sized = 0;
    if (sized) op_cost_param_totals(m, c, total, active, mtp);
    free(c);
    return sized && *total > 0;
}

static void param_line(const op_model *m) {
    double total, active, mtp;
    if (!param_totals(m, &total, &active, &mtp)) return;
    printf("parameters %.2fB", total / 1e9);
    if (active < total * (1 - 1e-9)) printf(" (%.2fB active per token)", active / 1e9);
    if (mtp > 0) printf(", and %.2fB in MTP blocks", mtp / 1e9);
    printf("\n");
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: octopipe models [NAME|FILE] [--json]\n"
            "\n"
            "Without NAME: lists the built-in model presets (name, model type, layer count,\n"
            "layer-kind counts, description).  With NAME (a preset, an HF config.json or a\n"
            "profile JSON): prints the parameter count (each weight once; for MoE models\n"
            "also what one token passes through: every weight outside the routed experts,\n"
            "embedding and head included, and top_k / E of those; MTP blocks apart), then\n"
            "every layer in model order: index, name, kind symbol and the dimensions the\n"
            "cost model uses.\n"
            "\n"
            "options:\n"
            "  --json      machine-readable output instead of tables\n"
            "  -h, --help  this help\n"
            "\n"
            "Layer symbols: E embedding, L head+loss, * attention, M mamba, - MLP, # MoE,\n"
            "T transformer block (attention + MLP/MoE), H parallel attention+mamba,\n"
            "V vision encoder layer, m multi-token-prediction block.\n"
            "\n"
            "HF config.json model types understood:\n ");
    int col = 1;
    for (const char *const *t = op_model_supported_types(); *t; t++) {
        int w = (int)strlen(*t) + 1;
        if (col + w > 78) fprintf(f, "\n "), col = 1;
        fprintf(f, " %s", *t);
        col += w;
    }
    fprintf(f,
            "\n\n"
            "Vision models (qwen2_vl, qwen2_5_vl, qwen3_vl, qwen3_vl_moe, gemma3, llama4) count\n"
            "one image per sample: 448x448 by default (qwen2_vl: 1024 patches of 14 px in the\n"
            "encoder, 256 tokens after the 2x2 merge; qwen3_vl: 784 patches of 16 px, 196\n"
            "tokens).\n"
            "\n"
            "examples:\n"
            "  octopipe models\n"
            "  octopipe models nemotron-h-8b\n"
            "  octopipe models path/to/config.json --json\n");
}

/* "E1 M24 -24 *4 L1": count of each symbol, in first-seen order */
static void kind_counts(const op_model *m, char *out, size_t n) {
    int count[OP_LAYER_KIND_COUNT] = {0}, order[OP_LAYER_KIND_COUNT], n_order = 0;
    for (int i = 0; i < m->n_layers; i++) {
        int k = m->layers[i].kind;
        if (!count[k]++) order[n_order++] = k;
    }
    size_t len = 0;
    out[0] = 0;
    for (int j = 0; j < n_order && len < n; j++)
        len += (size_t)snprintf(out + len, n - len, "%s%c%d", j ? " " : "",
                                op_layer_kind_sym((op_layer_kind)order[j]), count[order[j]]);
}

static const char *attn_name(op_attn_kind a) {
    switch (a) {
    case OP_ATTN_FULL: return "full";
    case OP_ATTN_SLIDING: return "sliding";
    case OP_ATTN_CHUNKED: return "chunked";
    case OP_ATTN_LINEAR: return "linear";
    case OP_ATTN_MLA: return "mla";
    case OP_ATTN_BIDIR: return "bidir";
    default: return "none";
    }
}

/* One line of key dimensions for the table. */
static void dims(const op_layer *l, char *out, size_t n) {
    size_t len = (size_t)snprintf(out, n, "h=%d", l->hidden);
    if (!l->hidden) len = (size_t)snprintf(out, n, "h=?");
#define ADD(...) \
    if (len < n) len += (size_t)snprintf(out + len, n - len, __VA_ARGS__)
    if (l->tokens) ADD(" tok=%d", l->tokens);
    if (l->patch_dim) ADD(" patch_in=%d", l->patch_dim);
    if (l->attn == OP_ATTN_LINEAR) {
        ADD(" attn=linear k=%dx%d v=%dx%d", l->lin_k_heads, l->lin_k_dim, l->lin_v_heads, l->lin_v_dim);
    } else if (l->attn == OP_ATTN_MLA) {
        ADD(" attn=mla heads=%d q_lora=%d kv_lora=%d qk=%d+%d v=%d", l->n_heads, l->q_lora_rank,
            l->kv_lora_rank, l->qk_nope_dim, l->qk_rope_dim, l->v_head_dim);
    } else if (l->attn != OP_ATTN_NONE && !l->n_heads) {
        ADD(" attn=%s", attn_name(l->attn)); /* profile: kind only */
    } else if (l->attn != OP_ATTN_NONE) {
        ADD(" attn=%s heads=%d/%d hd=%d", attn_name(l->attn), l->n_heads, l->n_kv_heads, l->head_dim);
        if (l->window) ADD(" win=%d", l->window);
    }
    if (l->ssm_version == 1)
        ADD(" ssm1 inner=%d state=%d dt_rank=%d conv=%d", l->ssm_inner, l->ssm_state, l->ssm_dt_rank,
            l->ssm_conv);
    if (l->ssm_version == 2)
        ADD(" ssm2 inner=%d state=%d heads=%dx%d groups=%d conv=%d", l->ssm_inner, l->ssm_state,
            l->ssm_heads, l->ssm_head_dim, l->ssm_groups, l->ssm_conv);
    if (l->ffn == OP_FFN_MLP && l->ffn_dim) ADD(" mlp=%d%s", l->ffn_dim, l->ffn_gated ? " gated" : "");
    if (l->attn_in_dim) ADD(" attn_in=%d", l->attn_in_dim);
    if (l->ffn == OP_FFN_MOE) {
        if (l->n_experts) ADD(" moe=%dx%d top%d", l->n_experts, l->expert_dim, l->top_k);
        if (l->n_shared) ADD(" +%dx%d shared", l->n_shared, l->shared_dim);
    }
    if (l->out_hidden) ADD(" out=%d", l->out_hidden);
    if (l->vocab) ADD(" vocab=%d", l->vocab);
    if (l->shares_params_with >= 0) ADD(" shares=%d", l->shares_params_with);
    if (l->has_measured) ADD(" F/I/W=%.3f/%.3f/%.3f ms", l->f_ms, l->i_ms, l->w_ms);
#undef ADD
}

static int list_presets(int json) {
    json_t *arr = json ? json_array() : NULL;
    if (!json) printf("%-22s %-12s %6s  %-26s %s\n", "NAME", "TYPE", "LAYERS", "KINDS", "DESCRIPTION");
    for (const char *const *p = op_model_preset_names(); *p; p++) {
        op_model m;
        op_err e = {0};
        if (op_model_preset(*p, &m, &e) != OP_OK) {
            fprintf(stderr, "octopipe models: preset %s: %s\n", *p, e.msg);
            json_decref(arr);
            return 1;
        }
        char counts[128];
        kind_counts(&m, counts, sizeof counts);
        if (json)
            json_array_append_new(arr, json_pack("{s:s, s:s, s:i, s:s, s:s, s:s}", "name", *p, "model_type",
                                                 m.model_type, "layers", m.n_layers, "pattern", m.pattern,
                                                 "kinds", counts, "description", op_model_preset_desc(*p)));
        else
            printf("%-22s %-12s %6d  %-26s %s\n", *p, m.model_type, m.n_layers, counts, op_model_preset_desc(*p));
        op_model_free(&m);
    }
    if (json) {
        json_t *types = json_array();
        for (const char *const *t = op_model_supported_types(); *t; t++) json_array_append_new(types, json_string(*t));
        json_t *root = json_pack("{s:o, s:o}", "presets", arr, "supported_model_types", types);
        json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        printf("\n");
        json_decref(root);
    }
    return 0;
}

static json_t *layer_json(const op_layer *l, int i) {
    char sym[2] = {op_layer_kind_sym(l->kind), 0};
    json_t *o = json_pack("{s:i, s:s, s:s, s:s, s:i, s:s}", "index", i, "name", l->name, "kind",
                          op_layer_kind_name(l->kind), "sym", sym, "hidden", l->hidden, "attn",
                          attn_name(l->attn));
#define PUT(key, v) \
    if (v) json_object_set_new(o, key, json_integer(v))
    PUT("tokens", l->tokens);
    PUT("n_heads", l->n_heads);
    PUT("n_kv_heads", l->n_kv_heads);
    PUT("head_dim", l->head_dim);
    PUT("window", l->window);
    PUT("q_lora_rank", l->q_lora_rank);
    PUT("kv_lora_rank", l->kv_lora_rank);
    PUT("lin_k_heads", l->lin_k_heads);
    PUT("lin_v_heads", l->lin_v_heads);
    PUT("ffn_dim", l->ffn_dim);
    PUT("n_experts", l->n_experts);
    PUT("top_k", l->top_k);
    PUT("expert_dim", l->expert_dim);
    PUT("n_shared", l->n_shared);
    PUT("shared_dim", l->shared_dim);
    PUT("ssm_version", l->ssm_version);
    PUT("ssm_inner", l->ssm_inner);
    PUT("ssm_state", l->ssm_state);
    PUT("ssm_heads", l->ssm_heads);
    PUT("vocab", l->vocab);
    PUT("out_hidden", l->out_hidden);
#undef PUT
    if (l->shares_params_with >= 0) json_object_set_new(o, "shares_params_with", json_integer(l->shares_params_with));
    if (l->has_measured)
        json_object_set_new(o, "measured_ms", json_pack("{s:f, s:f, s:f}", "F", l->f_ms, "I", l->i_ms, "W", l->w_ms));
    return o;
}

static int show_model(const char *name, int json) {
    op_model m;
    op_err e = {0};
    if (op_model_load(name, &m, &e) != OP_OK) {
        fprintf(stderr, "octopipe models: %s\n", e.msg);
        return 2;
    }
    if (json) {
        json_t *layers = json_array();
        for (int i = 0; i < m.n_layers; i++) json_array_append_new(layers, layer_json(&m.layers[i], i));
        json_t *root = json_pack("{s:s, s:s, s:i, s:i, s:b, s:i, s:s}", "name", m.name, "model_type",
                                 m.model_type, "hidden", m.hidden, "vocab", m.vocab, "tie_embeddings",
                                 m.tie_embeddings, "n_layers", m.n_layers, "pattern", m.pattern);
        double total, active, mtp; /* null where some layer has no size (as the text leaves it out) */
        int sized = param_totals(&m, &total, &active, &mtp);
        json_object_set_new(root, "parameters", sized ? json_integer((json_int_t)total) : json_null());
        json_object_set_new(root, "parameters_active", sized ? json_integer((json_int_t)active) : json_null());
        json_object_set_new(root, "parameters_mtp", sized ? json_integer((json_int_t)mtp) : json_null());
        json_object_set_new(root, "layers", layers);
        json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
        printf("\n");
        json_decref(root);
    } else {
        char counts[128];
        kind_counts(&m, counts, sizeof counts);
        printf("model %s (%s): %d layers [%s], hidden %d, vocab %d%s\n", m.name, m.model_type, m.n_layers,
               counts, m.hidden, m.vocab, m.tie_embeddings ? ", tied embeddings" : "");
        param_line(&m);
        printf("pattern %s\n\n", m.pattern);
        printf("%5s  %-24s %s  %s\n", "INDEX", "NAME", "K", "DIMENSIONS");
        for (int i = 0; i < m.n_layers; i++) {
            char d[256];
            dims(&m.layers[i], d, sizeof d);
            printf("%5d  %-24s %c  %s\n", i, m.layers[i].name, op_layer_kind_sym(m.layers[i].kind), d);
        }
    }
    op_model_free(&m);
    return 0;
}

int cmd_models(int argc, char **argv) {
    int json = 0;
    const char *name = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            char dym[160];
            fprintf(stderr, "octopipe models: unknown flag '%s'%s (octopipe models --help)\n", argv[i],
                    op_cli_suggest(usage, argv[i], dym, sizeof dym));
            return 2;
        } else if (name) {
            fprintf(stderr, "octopipe models: one model at a time ('%s' and '%s')\n", name, argv[i]);
            return 2;
        } else
            name = argv[i];
    }
    return name ? show_model(name, json) : list_presets(json);
}
