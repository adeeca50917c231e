/* hf_json.c: lenient JSON parsing (Infinity / NaN) and typed look-ups with a sticky error. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"

static int is_ident(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Replaces tok at p (len n) with rep padded by spaces to n chars, when it stands alone. */
static int swap_token(char *s, size_t i, const char *tok, const char *rep) {
    size_t n = strlen(tok);
    if (strncmp(s + i, tok, n) != 0) return 0;
    if (i > 0 && is_ident(s[i - 1])) return 0;
    if (is_ident(s[i + n])) return 0;
    size_t r = strlen(rep);
    memcpy(s + i, rep, r);
    memset(s + i + r, ' ', n - r);
    return (int)n;
}

/* 1-based line and column of byte i, as jansson counts them (columns in bytes). */
static void line_col(const char *s, size_t i, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (size_t k = 0; k < i; k++) {
        if (s[k] == '\n') {
            ++*line;
            *col = 1;
        } else {
            ++*col;
        }
    }
}

/* finite = 1 (files of measured numbers): a bare Infinity / NaN is an error at its position
 * instead of a rewrite, and so is a key given twice in one object, where jansson would keep the
 * last value silently (HF configs keep that: Python's json does the same). */
static json_t *parse(const char *text, const char *file, int finite, op_err *err) {
    char *s = op_xstrdup(text);
    if (!strncmp(s, "\xEF\xBB\xBF", 3)) memset(s, ' ', 3); /* UTF-8 BOM from some editors */
    int in_str = 0;
    for (size_t i = 0; s[i]; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '\\' && s[i + 1]) i++;
            else if (c == '"') in_str = 0;
            continue;
        }
        if (c == '"') {
            in_str = 1;
            continue;
        }
        /* NVIDIA configs write bare Infinity / NaN (Python's json.dumps); jansson rejects them.
         * Same-width numbers keep every later line:col in error messages right. */
        int k = swap_token(s, i, "-Infinity", "-1e308");
        if (!k) k = swap_token(s, i, "Infinity", "1e308");
        /* NaN stands for no number: a one-character string no config holds (a raw DEL), so a
         * field read as a number says "got NaN" where "0" read as layer 0 or a count of 0 */
        if (!k) k = swap_token(s, i, "NaN", finite ? "0" : "\"\x7f\"");
        if (k && finite) {
            int line, col;
            line_col(s, i, &line, &col);
            free(s);
            op_errf(err, OP_EINVAL, "%s:%d:%d: %.*s is not allowed here: give a finite number", file,
                    line, col, k, text + i);
            return NULL;
        }
        if (k) i += (size_t)k - 1;
    }
    json_error_t je;
    json_t *root = json_loads(s, finite ? JSON_REJECT_DUPLICATES : 0, &je);
    free(s);
    if (!root) {
        op_errf(err, OP_EINVAL, "%s:%d:%d: %s", file, je.line, je.column, je.text);
        return NULL;
    }
    return root;
}

json_t *op_json_parse_lenient(const char *text, const char *file, op_err *err) {
    return parse(text, file, 0, err);
}

json_t *op_json_parse_finite(const char *text, const char *file, op_err *err) {
    return parse(text, file, 1, err);
}

void op_hf_fail(op_hf *h, const char *key, const char *fmt, ...) {
    if (h->bad) return;
    h->bad = 1;
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    op_errf(h->err, OP_EINVAL, "%s: %s%s: %s", h->file, h->prefix, key, what);
}

static json_t *get(op_hf *h, const char *key) {
    json_t *v = h->obj ? json_object_get(h->obj, key) : NULL;
    return v && !json_is_null(v) ? v : NULL;
}

int op_hf_has(op_hf *h, const char *key) { return get(h, key) != NULL; }

int op_hf_is_nan(const json_t *v) { return json_is_string(v) && !strcmp(json_string_value(v), "\x7f"); }

static const char *type_name(json_t *v) {
    if (op_hf_is_nan(v)) return "NaN";
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

static void missing(op_hf *h, const char *key) {
    if (h->bad) return;
    h->bad = 1;
    op_errf(h->err, OP_EINVAL, "%s: missing required field '%s%s'", h->file, h->prefix, key);
}

/* Sizes that a layer cannot have zero of when a config gives them (a 0 head dim or group count
 * would load and cost nothing); counts that may be 0 (shared experts, dense layers first, LoRA
 * ranks of the query) are not here. */
static int is_dimension(const char *key) {
    static const char *const dims[] = {
        "attention_head_dim", "attention_hidden_size", "conv_kernel", "head_dim", "hidden_size",
        "intermediate_size", "intermediate_size_mlp", "kv_lora_rank", "linear_key_head_dim",
        "linear_num_key_heads", "linear_num_value_heads", "linear_value_head_dim",
        "mamba_d_conv", "mamba_d_head", "mamba_d_ssm", "mamba_d_state", "mamba_expand",
        "mamba_head_dim", "mamba_headdim", "mamba_n_groups", "mamba_n_heads", "mamba_ngroups",
        "mamba_num_heads", "moe_intermediate_size", "n_groups", "n_mamba_heads",
        "num_attention_heads", "num_key_value_heads", "qk_nope_head_dim", "qk_rope_head_dim",
        "ssm_state_size", "v_head_dim", "vocab_size", NULL};
    for (int i = 0; dims[i]; i++)
        if (!strcmp(key, dims[i])) return 1;
    return 0;
}

int op_hf_int(op_hf *h, const char *key, int def) {
    json_t *v = get(h, key);
    if (!v) {
        if (def == OP_HF_REQUIRED) {
            missing(h, key);
            return 0;
        }
        return def;
    }
    double d;
    if (json_is_integer(v)) d = (double)json_integer_value(v);
    else if (json_is_real(v)) d = json_real_value(v);
    else {
        op_hf_fail(h, key, "expected an integer, got %s", type_name(v));
        return 0;
    }
    if (d != floor(d)) {
        op_hf_fail(h, key, "expected an integer, got %.6g", d);
        return 0;
    }
    if (d < 0 || d > OP_HF_MAX_INT) {
        op_hf_fail(h, key, "%.6g is out of range (0..%d)", d, OP_HF_MAX_INT);
        return 0;
    }
    if (d == 0 && is_dimension(key)) {
        op_hf_fail(h, key, "must be positive, got 0");
        return 0;
    }
    return (int)d;
}

double op_hf_num(op_hf *h, const char *key, double def) {
    json_t *v = get(h, key);
    if (!v) return def;
    if (!json_is_number(v)) {
        op_hf_fail(h, key, "expected a number, got %s", type_name(v));
        return def;
    }
    return json_number_value(v);
}

int op_hf_bool(op_hf *h, const char *key, int def) {
    json_t *v = get(h, key);
    if (!v) return def;
    if (json_is_boolean(v)) return json_is_true(v);
    /* 0 and 1 from converters that write config.json themselves: Python reads them as such */
    json_int_t i = json_is_integer(v) ? json_integer_value(v) : -1;
    if (i == 0 || i == 1) return (int)i;
    if (json_is_integer(v)) op_hf_fail(h, key, "expected true or false, got %" JSON_INTEGER_FORMAT, i);
    else op_hf_fail(h, key, "expected true or false, got %s", type_name(v));
    return def;
}

const char *op_hf_str(op_hf *h, const char *key, const char *def) {
    json_t *v = get(h, key);
    if (!v) return def;
    if (!json_is_string(v) || op_hf_is_nan(v)) {
        op_hf_fail(h, key, "expected a string, got %s", type_name(v));
        return def;
    }
    return json_string_value(v);
}

json_t *op_hf_array(op_hf *h, const char *key) {
    json_t *v = get(h, key);
    if (v && !json_is_array(v)) {
        op_hf_fail(h, key, "expected an array, got %s", type_name(v));
        return NULL;
    }
    return v;
}

/* Entry i of the per-layer list `key` (one entry per layer): NULL when absent or wrong. */
static json_t *list_entry(op_hf *h, const char *key, int n, int i) {
    json_t *a = op_hf_array(h, key);
    if (!a) return NULL;
    if ((int)json_array_size(a) != n) {
        op_hf_fail(h, key, "has %zu entries but the model has %d layers", json_array_size(a), n);
        return NULL;
    }
    return json_array_get(a, (size_t)i);
}

const char *op_hf_list_str(op_hf *h, const char *key, int n, int i) {
    json_t *v = list_entry(h, key, n, i);
    if (!v) return NULL;
    if (!json_is_string(v) || op_hf_is_nan(v)) {
        op_hf_fail(h, key, "entry [%d] is %s, expected a string", i, type_name(v));
        return NULL;
    }
    return json_string_value(v);
}

int op_hf_list_flag(op_hf *h, const char *key, int n, int i, const char *meaning) {
    if (!op_hf_array(h, key)) return -1;
    json_t *v = list_entry(h, key, n, i);
    if (!v) return 0;
    if (json_is_boolean(v)) return json_is_true(v);
    if (json_is_integer(v) && (json_integer_value(v) == 0 || json_integer_value(v) == 1))
        return (int)json_integer_value(v);
    if (op_hf_is_nan(v)) op_hf_fail(h, key, "entry [%d] is NaN: expected %s", i, meaning);
    else op_hf_fail(h, key, "entry [%d]: expected %s", i, meaning);
    return 0;
}

int op_hf_layer_ids(op_hf *h, const char *key, int n, unsigned char *in) {
    return op_hf_layer_ids_of(h, key, n, in, "num_hidden_layers");
}

int op_hf_layer_ids_of(op_hf *h, const char *key, int n, unsigned char *in, const char *count_key) {
    json_t *a = op_hf_array(h, key);
    if (!a) return 0;
    size_t j;
    json_t *v;
    json_array_foreach(a, j, v) {
        if (!json_is_number(v)) {
            op_hf_fail(h, key, "entry [%zu] is %s, expected an integer", j, type_name(v));
            return 0;
        }
        double d = json_number_value(v);
        if (d != floor(d)) {
            op_hf_fail(h, key, "entry [%zu] is %.6g, expected an integer", j, d);
            return 0;
        }
        if (d < 0 || d >= n) {
            op_hf_fail(h, key, "entry [%zu] is %.6g, outside 0..%d (%s%s is %d)", j, d,
                       n - 1, h->prefix, count_key, n);
            return 0;
        }
        in[(int)d] = 1;
    }
    return 1;
}

int op_hf_int_auto(op_hf *h, const char *key, int *v) {
    json_t *j = json_object_get(h->obj, key);
    if (!j || json_is_null(j)) return 1;
    if (json_is_string(j) && !op_hf_is_nan(j)) {
        if (!strcmp(json_string_value(j), "auto")) return 1; /* transformers knows "auto" alone */
        op_hf_fail(h, key, "expected a whole number or \"auto\", got \"%.40s\"", json_string_value(j));
        return 0;
    }
    *v = op_hf_int(h, key, 0);
    return 0;
}

void op_hf_need_pos(op_hf *h, const char *key, int v) {
    if (!h->bad && v <= 0) op_hf_fail(h, key, "must be positive, got %d", v);
}

void op_hf_need_moe(op_hf *h, const char *experts_key, int experts, int top_k) {
    op_hf_need_moe_k(h, experts_key, experts, "num_experts_per_tok", top_k);
}

void op_hf_need_moe_k(op_hf *h, const char *experts_key, int experts, const char *top_k_key, int top_k) {
    op_hf_need_pos(h, experts_key, experts);
    op_hf_need_pos(h, top_k_key, top_k);
    if (!h->bad && top_k > experts)
        op_hf_fail(h, top_k_key, "%d is more than the %d experts (%s)", top_k, experts, experts_key);
}

op_layer *op_hf_moe_layer(op_hf *h, op_mbuild *b, int i, const char *experts_key, int experts,
                          int top_k, int expert_dim, int n_shared, int shared_dim) {
    op_hf_need_moe(h, experts_key, experts, top_k);
    op_layer *l = op_mbuild_add(b, OP_LAYER_MOE, "layers.%d.moe", i);
    op_hf_set_moe(l, experts, top_k, expert_dim, n_shared, shared_dim);
    return l;
}

void op_hf_set_moe(op_layer *l, int experts, int top_k, int expert_dim, int n_shared, int shared_dim) {
    l->ffn = OP_FFN_MOE;
    l->n_experts = experts;
    l->top_k = top_k;
    l->expert_dim = expert_dim;
    l->n_shared = n_shared > 0 ? n_shared : 0;
    l->shared_dim = n_shared > 0 ? shared_dim : 0;
}

void op_hf_need_layers(op_hf *h, const char *key, int n) {
    if (!h->bad && (n <= 0 || n > OP_HF_MAX_BLOCKS))
        op_hf_fail(h, key, "%d layers; expected 1..%d", n, OP_HF_MAX_BLOCKS);
}

int op_hf_derived(op_hf *h, const char *key, double v) {
    if (h->bad) return 0;
    if (!(v >= 1 && v <= (double)(1 << 30))) {
        op_hf_fail(h, key, "gives a size of %g, out of range", v);
        return 0;
    }
    return (int)v;
}

int op_hf_split(op_hf *h, const char *parts_key, int parts, const char *whole_key, int whole,
                const char *derived) {
    if (h->bad || parts <= 0 || whole <= 0) return 0;
    if (whole / parts > 0) return whole / parts;
    op_hf_fail(h, parts_key, "%d is more than %s %d (%s = %s / %s would be 0)", parts, whole_key, whole,
               derived, whole_key, parts_key);
    return 0;
}

int op_hf_split_even(op_hf *h, const char *parts_key, int parts, const char *whole_key, int whole,
                     const char *derived) {
    int q = op_hf_split(h, parts_key, parts, whole_key, whole, derived);
    if (q > 0 && whole % parts) {
        op_hf_fail(h, parts_key, "%d does not divide %s %d (%s = %s / %s must be whole)", parts,
                   whole_key, whole, derived, whole_key, parts_key);
        return 0;
    }
    return q;
}
