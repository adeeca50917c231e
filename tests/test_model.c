/* test_model.c: HF config import for every supported model type (small configs in
 * tests/data/hf/), profiles, presets, and rejected bad input with the right message. */
#include <pthread.h>
#include <sys/wait.h>

#include "check.h"
#include "octopipe/model.h"

static char data_dir[512];

/* tests/data/<rel>, found next to this source file */
static const char *data(const char *rel) {
    static char path[1024];
    if (!data_dir[0]) {
        snprintf(data_dir, sizeof data_dir, "%s", __FILE__);
        char *slash = strrchr(data_dir, '/');
        if (slash) slash[1] = 0;
        else data_dir[0] = 0;
        strncat(data_dir, "data/", sizeof data_dir - strlen(data_dir) - 1);
    }
    snprintf(path, sizeof path, "%s%s", data_dir, rel);
    return path;
}

static op_model m;
static op_err e;
static const char *argv0;

/* Loads tests/data/hf/<type>.json; the pattern must match. */
static int load_hf(const char *type, const char *pattern) {
    char rel[128];
    snprintf(rel, sizeof rel, "hf/%s.json", type);
    memset(&e, 0, sizeof e);
    int rc = op_model_load(data(rel), &m, &e);
    CHECK_MSG(rc == OP_OK, "%s: %s", type, e.msg);
    if (rc != OP_OK) return 0;
    CHECK_MSG(!strcmp(m.pattern, pattern), "%s: pattern %s, expected %s", type, m.pattern, pattern);
    CHECK_EQ_INT(m.n_layers, (int)strlen(pattern));
    CHECK(!strcmp(m.model_type, type));
    CHECK(!strcmp(m.name, type));
    return 1;
}

static const op_layer *L(int i) { return &m.layers[i]; }

TEST(kind_symbols_round_trip) {
    for (int k = 0; k < OP_LAYER_KIND_COUNT; k++)
        CHECK_EQ_INT(op_layer_kind_from_sym(op_layer_kind_sym((op_layer_kind)k)), k);
    CHECK_EQ_INT(op_layer_kind_from_sym('x'), -1);
    CHECK(!strcmp(op_layer_kind_name(OP_LAYER_MAMBA), "mamba"));
    /* a kind outside the enum (a hand-built layer) is '?' / "?"; it aborted */
    const int bad[] = {-1, OP_LAYER_KIND_COUNT, 1 << 30};
    for (int i = 0; i < 3; i++) {
        CHECK(op_layer_kind_sym((op_layer_kind)bad[i]) == '?');
        CHECK(!strcmp(op_layer_kind_name((op_layer_kind)bad[i]), "?"));
    }
    CHECK_EQ_INT(op_layer_kind_from_sym('?'), -1);
    int n = 0;
    for (const char *const *t = op_model_supported_types(); *t; t++) n++;
    CHECK(n >= 19);
}

TEST(hf_llama_defaults) {
    if (!load_hf("llama", "ETTTTL")) return;
    CHECK_EQ_INT(L(1)->n_heads, 8);
    CHECK_EQ_INT(L(1)->n_kv_heads, 8); /* default: num_attention_heads */
    CHECK_EQ_INT(L(1)->head_dim, 32);  /* default: hidden / heads */
    CHECK_EQ_INT(L(1)->attn, OP_ATTN_FULL);
    CHECK_EQ_INT(L(1)->ffn, OP_FFN_MLP);
    CHECK_EQ_INT(L(1)->ffn_dim, 688);
    CHECK_EQ_INT(L(1)->ffn_gated, 1);
    CHECK_EQ_INT(L(0)->vocab, 32000);
    CHECK_EQ_INT(L(5)->vocab, 32000);
    CHECK_EQ_INT(L(5)->shares_params_with, -1);
    CHECK_EQ_INT(m.hidden, 256);
    CHECK(!strcmp(L(4)->name, "layers.3"));
    op_model_free(&m);
}

TEST(hf_mistral_window_default) {
    if (!load_hf("mistral", "ETTTL")) return;
    for (int i = 1; i <= 3; i++) {
        CHECK_EQ_INT(L(i)->attn, OP_ATTN_SLIDING);
        CHECK_EQ_INT(L(i)->window, 4096); /* absent sliding_window: MistralConfig's 4096 */
    }
    CHECK_EQ_INT(L(1)->n_kv_heads, 2);
    op_model_free(&m);
}

TEST(hf_mixtral_moe) {
    if (!load_hf("mixtral", "ETTL")) return;
    CHECK_EQ_INT(L(1)->attn, OP_ATTN_FULL); /* sliding_window: null */
    CHECK_EQ_INT(L(1)->ffn, OP_FFN_MOE);
    CHECK_EQ_INT(L(1)->n_experts, 8);
    CHECK_EQ_INT(L(1)->top_k, 2);
    CHECK_EQ_INT(L(1)->expert_dim, 896);
    CHECK_EQ_INT(L(1)->n_shared, 0);
    op_model_free(&m);
}

TEST(hf_qwen2_max_window_layers_and_tie) {
    if (!load_hf("qwen2", "ETTTTL")) return;
    CHECK_EQ_INT(L(1)->attn, OP_ATTN_FULL);
    CHECK_EQ_INT(L(2)->attn, OP_ATTN_FULL);
    CHECK_EQ_INT(L(3)->attn, OP_ATTN_SLIDING); /* layer 2 >= max_window_layers */
    CHECK_EQ_INT(L(4)->window, 1024);
    CHECK_EQ_INT(m.tie_embeddings, 1);
    CHECK_EQ_INT(L(5)->shares_params_with, 0);
    op_model_free(&m);
}

TEST(hf_qwen2_moe_sparse_step) {
    if (!load_hf("qwen2_moe", "ETTTTTTL")) return;
    /* decoder_sparse_step 2: layers 1, 3, 5 sparse; 3 is in mlp_only_layers */
    int want[6] = {0, 1, 0, 0, 0, 1};
    for (int i = 0; i < 6; i++) CHECK_EQ_INT(L(1 + i)->ffn, want[i] ? OP_FFN_MOE : OP_FFN_MLP);
    CHECK_EQ_INT(L(2)->n_experts, 60);
    CHECK_EQ_INT(L(2)->top_k, 4);
    CHECK_EQ_INT(L(2)->expert_dim, 128);
    CHECK_EQ_INT(L(2)->n_shared, 1);
    CHECK_EQ_INT(L(2)->shared_dim, 512);
    CHECK_EQ_INT(L(1)->ffn_dim, 1024);
    op_model_free(&m);
}

TEST(hf_qwen3_moe) {
    if (!load_hf("qwen3_moe", "ETTTL")) return;
    CHECK_EQ_INT(L(1)->head_dim, 128); /* explicit, not hidden / heads */
    CHECK_EQ_INT(L(1)->ffn, OP_FFN_MOE);
    CHECK_EQ_INT(L(1)->n_experts, 128);
    CHECK_EQ_INT(L(1)->top_k, 8);
    CHECK_EQ_INT(L(1)->expert_dim, 96);
    CHECK_EQ_INT(L(1)->n_shared, 0);
    op_model_free(&m);
}

TEST(hf_gemma2_alternating) {
    if (!load_hf("gemma2", "ETTTTL")) return;
    CHECK_EQ_INT(L(1)->attn, OP_ATTN_SLIDING);
    CHECK_EQ_INT(L(1)->window, 512);
    CHECK_EQ_INT(L(2)->attn, OP_ATTN_FULL);
    CHECK_EQ_INT(L(3)->attn, OP_ATTN_SLIDING);
    CHECK_EQ_INT(L(4)->attn, OP_ATTN_FULL);
    CHECK_EQ_INT(L(1)->head_dim, 64);
    CHECK_EQ_INT(m.tie_embeddings, 1); /* gemma ties by default */
    op_model_free(&m);
}

TEST(hf_gemma3_text_config_and_vision) {
    if (!load_hf("gemma3", "VVVVVETTTTTTTL")) return;
    CHECK_EQ_INT(L(0)->tokens, 4096); /* (896 / 14)^2 patches */
    CHECK_EQ_INT(L(1)->attn, OP_ATTN_BIDIR);
    CHECK_EQ_INT(L(1)->ffn_dim, 4304);
    CHECK_EQ_INT(L(4)->tokens, 256); /* mm_tokens_per_image */
    CHECK_EQ_INT(L(4)->out_hidden, 256);
    /* 5 local : 1 global; text layer 5 is global */
    for (int i = 0; i < 7; i++)
        CHECK_EQ_INT(L(6 + i)->attn, i == 5 ? OP_ATTN_FULL : OP_ATTN_SLIDING);
    CHECK_EQ_INT(L(6)->window, 1024);
    CHECK_EQ_INT(L(5)->vocab, 262208);
    op_model_free(&m);
}

TEST(hf_gemma3_sparse_text_config_defaults) {
    /* as gemma-3-4b's config.json: text_config names only what differs from Gemma3TextConfig */
    const char *txt = "{\"model_type\": \"gemma3\", \"text_config\": {\"hidden_size\": 2560,"
                      " \"intermediate_size\": 10240, \"model_type\": \"gemma3_text\","
                      " \"num_hidden_layers\": 34, \"sliding_window\": 1024}}";
    int rc = op_model_from_hf_json(txt, "g.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc != OP_OK) return;
    CHECK_EQ_INT(m.n_layers, 36); /* no vision_config: text only */
    CHECK_EQ_INT(m.vocab, 262208);
    CHECK_EQ_INT(L(1)->n_heads, 8);
    CHECK_EQ_INT(L(1)->n_kv_heads, 4);
    CHECK_EQ_INT(L(1)->head_dim, 256);
    CHECK_EQ_INT(L(6)->attn, OP_ATTN_FULL); /* layer 5 */
    CHECK_EQ_INT(L(7)->attn, OP_ATTN_SLIDING);
    op_model_free(&m);
}

TEST(hf_deepseek_v2_first_k_dense) {
    if (!load_hf("deepseek_v2", "ETTTTL")) return;
    CHECK_EQ_INT(L(1)->ffn, OP_FFN_MLP);
    CHECK_EQ_INT(L(1)->ffn_dim, 1024);
    for (int i = 2; i <= 4; i++) CHECK_EQ_INT(L(i)->ffn, OP_FFN_MOE);
    CHECK_EQ_INT(L(2)->n_experts, 16);
    CHECK_EQ_INT(L(2)->top_k, 6);
    CHECK_EQ_INT(L(2)->n_shared, 2);
    CHECK_EQ_INT(L(2)->expert_dim, 64);
    CHECK_EQ_INT(L(1)->attn, OP_ATTN_MLA);
    CHECK_EQ_INT(L(1)->q_lora_rank, 0); /* null: dense q projection */
    CHECK_EQ_INT(L(1)->kv_lora_rank, 64);
    CHECK_EQ_INT(L(1)->qk_nope_dim, 32);
    CHECK_EQ_INT(L(1)->qk_rope_dim, 16);
    CHECK_EQ_INT(L(1)->v_head_dim, 32);
    CHECK_EQ_INT(L(1)->head_dim, 48);
    op_model_free(&m);
}

TEST(hf_deepseek_v3_defaults_and_mtp) {
    if (!load_hf("deepseek_v3", "ETTTTTmL")) return;
    for (int i = 1; i <= 3; i++) CHECK_EQ_INT(L(i)->ffn, OP_FFN_MLP); /* first_k_dense_replace 3 */
    CHECK_EQ_INT(L(4)->ffn, OP_FFN_MOE);
    CHECK_EQ_INT(L(4)->n_shared, 1); /* defaults of DeepseekV3Config */
    CHECK_EQ_INT(L(4)->q_lora_rank, 1536);
    CHECK_EQ_INT(L(4)->kv_lora_rank, 512);
    CHECK_EQ_INT(L(4)->qk_rope_dim, 64);
    CHECK_EQ_INT(L(4)->n_kv_heads, 8);
    CHECK_EQ_INT(L(6)->kind, OP_LAYER_MTP);
    CHECK_EQ_INT(L(6)->ffn, OP_FFN_MOE);
    CHECK_EQ_INT(L(6)->vocab, 129280);
    CHECK_EQ_INT(L(6)->attn, OP_ATTN_MLA);
    op_model_free(&m);
    /* without num_nextn_predict_layers: DeepseekV3Config's one MTP block; 0 builds none */
    static const char *const cfg[2] = {
        "{\"model_type\": \"deepseek_v3\", \"hidden_size\": 64, \"num_hidden_layers\": 4,"
        " \"intermediate_size\": 128, \"vocab_size\": 100}",
        "{\"model_type\": \"deepseek_v3\", \"hidden_size\": 64, \"num_hidden_layers\": 4,"
        " \"intermediate_size\": 128, \"vocab_size\": 100, \"num_nextn_predict_layers\": 0}"};
    static const char *const want[2] = {"ETTTTmL", "ETTTTL"};
    for (int k = 0; k < 2; k++) {
        memset(&e, 0, sizeof e);
        int rc = op_model_from_hf_json(cfg[k], "d.json", &m, &e);
        CHECK_MSG(rc == OP_OK, "%s", e.msg);
        if (rc != OP_OK) continue;
        CHECK_MSG(!strcmp(m.pattern, want[k]), "pattern %s, want %s", m.pattern, want[k]);
        op_model_free(&m);
    }
}

TEST(hf_jamba_periods) {
    /* attention at i % 8 == 4, MoE at i % 2 == 1 */
    if (!load_hf("jamba", "EM-M#M-M#*-M#M-M#L")) return;
    CHECK_EQ_INT(L(1)->ssm_version, 1);
    CHECK_EQ_INT(L(1)->ssm_inner, 512);
    CHECK_EQ_INT(L(1)->ssm_state, 16);
    CHECK_EQ_INT(L(1)->ssm_conv, 4);
    CHECK_EQ_INT(L(1)->ssm_dt_rank, 16); /* "auto": ceil(256 / 16) */
    CHECK_EQ_INT(L(9)->n_kv_heads, 8);   /* JambaConfig default */
    CHECK_EQ_INT(L(4)->n_experts, 16);
    CHECK_EQ_INT(L(4)->top_k, 2);
    CHECK_EQ_INT(L(4)->expert_dim, 1024);
    CHECK(!strcmp(L(9)->name, "layers.4.attn"));
    op_model_free(&m);
}

TEST(hf_nemotron_h_pattern_moe_infinity) {
    if (!load_hf("nemotron_h", "EM-M*-M#M*#L")) return;
    CHECK_EQ_INT(L(1)->ssm_version, 2);
    CHECK_EQ_INT(L(1)->ssm_inner, 512);
    CHECK_EQ_INT(L(1)->ssm_heads, 16);
    CHECK_EQ_INT(L(1)->ssm_head_dim, 32);
    CHECK_EQ_INT(L(1)->ssm_groups, 2);
    CHECK_EQ_INT(L(1)->ssm_state, 64);
    CHECK_EQ_INT(L(2)->ffn_gated, 0); /* relu^2 */
    CHECK_EQ_INT(L(4)->head_dim, 64);
    CHECK_EQ_INT(L(4)->n_kv_heads, 2);
    CHECK_EQ_INT(L(7)->n_experts, 32);
    CHECK_EQ_INT(L(7)->top_k, 4);
    CHECK_EQ_INT(L(7)->expert_dim, 128);
    CHECK_EQ_INT(L(7)->n_shared, 1);
    CHECK_EQ_INT(L(7)->shared_dim, 256);
    op_model_free(&m);
}

TEST(hf_qwen2_vl_vision_in_front) {
    if (!load_hf("qwen2_vl", "VVVVETTL")) return;
    CHECK_EQ_INT(L(0)->tokens, 1024); /* 448x448, patch 14 */
    CHECK_EQ_INT(L(0)->patch_dim, 3 * 2 * 14 * 14);
    CHECK_EQ_INT(L(1)->n_heads, 4);
    CHECK_EQ_INT(L(1)->head_dim, 32);
    CHECK_EQ_INT(L(1)->ffn_dim, 512);
    CHECK_EQ_INT(L(3)->tokens, 256); /* after the 2x2 merge */
    CHECK_EQ_INT(L(3)->hidden, 512);
    CHECK_EQ_INT(L(3)->out_hidden, 256);
    CHECK_EQ_INT(L(4)->kind, OP_LAYER_EMBED);
    CHECK_EQ_INT(L(5)->tokens, 0);
    op_model_free(&m);
}

TEST(hf_glm4_moe_dense_then_moe_and_mtp) {
    if (!load_hf("glm4_moe", "ETTTmL")) return;
    CHECK_EQ_INT(L(1)->ffn, OP_FFN_MLP); /* first_k_dense_replace 1 */
    CHECK_EQ_INT(L(1)->ffn_dim, 1024);
    CHECK_EQ_INT(L(1)->ffn_gated, 1);
    CHECK_EQ_INT(L(1)->attn, OP_ATTN_FULL);
    CHECK_EQ_INT(L(1)->n_heads, 8);
    CHECK_EQ_INT(L(1)->n_kv_heads, 2);
    CHECK_EQ_INT(L(1)->head_dim, 64); /* head_dim given: 8 x 64 > hidden 256 */
    for (int i = 2; i <= 4; i++) {
        CHECK_EQ_INT(L(i)->ffn, OP_FFN_MOE);
        CHECK_EQ_INT(L(i)->n_experts, 16);
        CHECK_EQ_INT(L(i)->top_k, 4);
        CHECK_EQ_INT(L(i)->expert_dim, 64);
        CHECK_EQ_INT(L(i)->n_shared, 1);
        CHECK_EQ_INT(L(i)->shared_dim, 64);
    }
    CHECK_EQ_INT(L(4)->kind, OP_LAYER_MTP);
    CHECK_EQ_INT(L(4)->vocab, 151552);
    CHECK(!strcmp(L(4)->name, "mtp.0"));
    CHECK_EQ_INT(L(5)->shares_params_with, -1);
    CHECK_EQ_INT(m.tie_embeddings, 0);
    op_model_free(&m);
    /* Glm4MoeConfig's defaults: 128 experts top 8 of 1408, one shared, one dense layer, one
     * MTP block (num_mtp_layers), 96 heads / 8 KV heads, vocab 151552 */
    int rc = op_model_from_hf_json("{\"model_type\": \"glm4_moe\", \"hidden_size\": 192,"
                                   " \"num_hidden_layers\": 2, \"intermediate_size\": 512}",
                                   "g.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc != OP_OK) return;
    CHECK(!strcmp(m.pattern, "ETTmL"));
    CHECK_EQ_INT(L(1)->ffn, OP_FFN_MLP);
    CHECK_EQ_INT(L(2)->n_experts, 128);
    CHECK_EQ_INT(L(2)->top_k, 8);
    CHECK_EQ_INT(L(2)->expert_dim, 1408);
    CHECK_EQ_INT(L(2)->n_shared, 1);
    CHECK_EQ_INT(L(2)->n_heads, 96);
    CHECK_EQ_INT(L(2)->n_kv_heads, 8);
    CHECK_EQ_INT(L(2)->head_dim, 2); /* hidden / heads */
    CHECK_EQ_INT(m.vocab, 151552);
    op_model_free(&m);
    /* no MTP block and no shared expert when the config says so; all layers dense */
    rc = op_model_from_hf_json("{\"model_type\": \"glm4_moe\", \"hidden_size\": 64, \"num_hidden_layers\": 2,"
                               " \"intermediate_size\": 128, \"num_attention_heads\": 8,"
                               " \"num_key_value_heads\": 8, \"num_nextn_predict_layers\": 0,"
                               " \"n_shared_experts\": 0, \"first_k_dense_replace\": 1}",
                               "g.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc != OP_OK) return;
    CHECK(!strcmp(m.pattern, "ETTL"));
    CHECK_EQ_INT(L(2)->ffn, OP_FFN_MOE);
    CHECK_EQ_INT(L(2)->n_shared, 0);
    CHECK_EQ_INT(L(2)->shared_dim, 0);
    op_model_free(&m);
}

TEST(hf_ernie4_5_moe_layer_range) {
    if (!load_hf("ernie4_5_moe", "ETTTTL")) return;
    /* moe_layer_start_index 1, moe_layer_end_index 2: layers 1 and 2 MoE, 0 and 3 dense */
    for (int i = 0; i < 4; i++) {
        const op_layer *l = L(1 + i);
        CHECK_EQ_INT(l->attn, OP_ATTN_FULL);
        CHECK_EQ_INT(l->n_heads, 8);
        CHECK_EQ_INT(l->n_kv_heads, 2);
        CHECK_EQ_INT(l->head_dim, 16);
        CHECK_EQ_INT(l->ffn_gated, 1);
        if (i == 1 || i == 2) {
            CHECK_EQ_INT(l->ffn, OP_FFN_MOE);
            CHECK_EQ_INT(l->n_experts, 8);
            CHECK_EQ_INT(l->top_k, 2);
            CHECK_EQ_INT(l->expert_dim, 64);
            CHECK_EQ_INT(l->n_shared, 1);
            CHECK_EQ_INT(l->shared_dim, 64);
        } else {
            CHECK_EQ_INT(l->ffn, OP_FFN_MLP);
            CHECK_EQ_INT(l->ffn_dim, 512);
        }
    }
    CHECK_EQ_INT(m.tie_embeddings, 1); /* Ernie4_5_MoeConfig ties by default */
    CHECK_EQ_INT(L(5)->shares_params_with, 0);
    op_model_free(&m);
    /* the defaults: MoE from layer 1 to the last (-1), 64 experts top 6 of 1536, 2 shared,
     * 20 heads / 4 KV heads, vocab 103424; an interval of 2 makes every other layer MoE */
    int rc = op_model_from_hf_json("{\"model_type\": \"ernie4_5_moe\", \"hidden_size\": 160,"
                                   " \"num_hidden_layers\": 5, \"intermediate_size\": 256,"
                                   " \"moe_layer_end_index\": -1, \"moe_layer_interval\": 2}",
                                   "e.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc != OP_OK) return;
    CHECK(!strcmp(m.pattern, "ETTTTTL"));
    for (int i = 0; i < 5; i++)
        CHECK_EQ_INT(L(1 + i)->ffn, (i == 1 || i == 3) ? OP_FFN_MOE : OP_FFN_MLP);
    CHECK_EQ_INT(L(2)->n_experts, 64);
    CHECK_EQ_INT(L(2)->top_k, 6);
    CHECK_EQ_INT(L(2)->expert_dim, 1536);
    CHECK_EQ_INT(L(2)->n_shared, 2);
    CHECK_EQ_INT(L(2)->n_heads, 20);
    CHECK_EQ_INT(L(2)->n_kv_heads, 4);
    CHECK_EQ_INT(L(2)->head_dim, 8);
    CHECK_EQ_INT(m.vocab, 103424);
    op_model_free(&m);
}

TEST(hf_hunyuan_v1_moe_per_layer_topk) {
    if (!load_hf("hunyuan_v1_moe", "ETTTL")) return;
    for (int i = 1; i <= 3; i++) {
        CHECK_EQ_INT(L(i)->ffn, OP_FFN_MOE); /* every layer */
        CHECK_EQ_INT(L(i)->n_experts, 8);
        CHECK_EQ_INT(L(i)->top_k, i == 3 ? 4 : 2); /* moe_topk, one per layer */
        CHECK_EQ_INT(L(i)->expert_dim, 96);
        CHECK_EQ_INT(L(i)->n_shared, 1); /* the shared MLP of intermediate_size */
        CHECK_EQ_INT(L(i)->shared_dim, 96);
        CHECK_EQ_INT(L(i)->ffn_gated, 1);
        CHECK_EQ_INT(L(i)->n_heads, 4);
        CHECK_EQ_INT(L(i)->n_kv_heads, 2);
        CHECK_EQ_INT(L(i)->head_dim, 32);
        CHECK_EQ_INT(L(i)->attn, OP_ATTN_FULL);
    }
    CHECK_EQ_INT(m.tie_embeddings, 1);
    op_model_free(&m);
    /* HunYuanMoEV1Config's defaults: 1 expert, top 1, 32 heads and as many KV heads, vocab
     * 290943, untied; one moe_topk for all layers */
    int rc = op_model_from_hf_json("{\"model_type\": \"hunyuan_v1_moe\", \"hidden_size\": 256,"
                                   " \"num_hidden_layers\": 2, \"intermediate_size\": 64}",
                                   "h.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc != OP_OK) return;
    CHECK(!strcmp(m.pattern, "ETTL"));
    CHECK_EQ_INT(L(1)->n_experts, 1);
    CHECK_EQ_INT(L(1)->top_k, 1);
    CHECK_EQ_INT(L(1)->n_heads, 32);
    CHECK_EQ_INT(L(1)->n_kv_heads, 32);
    CHECK_EQ_INT(L(1)->head_dim, 8);
    CHECK_EQ_INT(m.vocab, 290943);
    CHECK_EQ_INT(m.tie_embeddings, 0);
    op_model_free(&m);
    rc = op_model_from_hf_json("{\"model_type\": \"hunyuan_v1_moe\", \"hidden_size\": 256,"
                               " \"num_hidden_layers\": 2, \"intermediate_size\": 64,"
                               " \"num_experts\": 16, \"moe_topk\": 8}", "h.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc != OP_OK) return;
    CHECK_EQ_INT(L(2)->top_k, 8);
    CHECK_EQ_INT(L(2)->n_experts, 16);
    op_model_free(&m);
}

TEST(hf_minimax_m2_every_layer_moe) {
    if (!load_hf("minimax_m2", "ETTTL")) return;
    for (int i = 1; i <= 3; i++) {
        CHECK_EQ_INT(L(i)->ffn, OP_FFN_MOE);
        CHECK_EQ_INT(L(i)->n_experts, 16);
        CHECK_EQ_INT(L(i)->top_k, 2);
        CHECK_EQ_INT(L(i)->expert_dim, 64);
        CHECK_EQ_INT(L(i)->n_shared, 0);
        CHECK_EQ_INT(L(i)->ffn_gated, 1);
        CHECK_EQ_INT(L(i)->attn, OP_ATTN_FULL);
        CHECK_EQ_INT(L(i)->head_dim, 32); /* head_dim given: 8 x 32 > hidden 128 */
        CHECK_EQ_INT(L(i)->n_kv_heads, 2);
    }
    CHECK_EQ_INT(m.tie_embeddings, 0);
    op_model_free(&m);
    /* MiniMaxM2Config's defaults: 256 experts top 8, 48 heads / 8 KV heads of 128, vocab
     * 200064; a sliding_window in the config does not make any layer sliding */
    int rc = op_model_from_hf_json("{\"model_type\": \"minimax_m2\", \"hidden_size\": 96,"
                                   " \"num_hidden_layers\": 2, \"intermediate_size\": 32,"
                                   " \"sliding_window\": 16}", "mm.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc != OP_OK) return;
    CHECK(!strcmp(m.pattern, "ETTL"));
    CHECK_EQ_INT(L(1)->n_experts, 256);
    CHECK_EQ_INT(L(1)->top_k, 8);
    CHECK_EQ_INT(L(1)->n_heads, 48);
    CHECK_EQ_INT(L(1)->n_kv_heads, 8);
    CHECK_EQ_INT(L(1)->head_dim, 128);
    CHECK_EQ_INT(L(2)->attn, OP_ATTN_FULL);
    CHECK_EQ_INT(m.vocab, 200064);
    op_model_free(&m);
}

TEST(hf_olmo2_dense) {
    if (!load_hf("olmo2", "ETTL")) return;
    for (int i = 1; i <= 2; i++) {
        CHECK_EQ_INT(L(i)->ffn, OP_FFN_MLP);
        CHECK_EQ_INT(L(i)->ffn_dim, 256);
        CHECK_EQ_INT(L(i)->ffn_gated, 1);
        CHECK_EQ_INT(L(i)->attn, OP_ATTN_FULL);
        CHECK_EQ_INT(L(i)->n_kv_heads, 8); /* None: as many as the heads */
        CHECK_EQ_INT(L(i)->head_dim, 16);
    }
    CHECK_EQ_INT(m.tie_embeddings, 0);
    op_model_free(&m);
    /* Olmo2Config's defaults (32 heads, vocab 50304); no layer is sliding, whatever the config */
    int rc = op_model_from_hf_json("{\"model_type\": \"olmo2\", \"hidden_size\": 256,"
                                   " \"num_hidden_layers\": 2, \"intermediate_size\": 64,"
                                   " \"sliding_window\": 16}", "o.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc != OP_OK) return;
    CHECK_EQ_INT(L(1)->n_heads, 32);
    CHECK_EQ_INT(L(1)->attn, OP_ATTN_FULL);
    CHECK_EQ_INT(m.vocab, 50304);
    op_model_free(&m);
}

TEST(hf_olmo3_sliding_and_full) {
    if (!load_hf("olmo3", "ETTTTL")) return;
    for (int i = 0; i < 4; i++) { /* layer_types as given */
        CHECK_EQ_INT(L(1 + i)->attn, i % 2 ? OP_ATTN_FULL : OP_ATTN_SLIDING);
        CHECK_EQ_INT(L(1 + i)->window, i % 2 ? 0 : 64);
        CHECK_EQ_INT(L(1 + i)->ffn, OP_FFN_MLP);
    }
    op_model_free(&m);
    /* without layer_types: Olmo3Config's three sliding layers of 4096, then one full */
    int rc = op_model_from_hf_json("{\"model_type\": \"olmo3\", \"hidden_size\": 256,"
                                   " \"num_hidden_layers\": 8, \"intermediate_size\": 64}",
                                   "o.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc != OP_OK) return;
    for (int i = 0; i < 8; i++) {
        int full = (i + 1) % 4 == 0;
        CHECK_EQ_INT(L(1 + i)->attn, full ? OP_ATTN_FULL : OP_ATTN_SLIDING);
        CHECK_EQ_INT(L(1 + i)->window, full ? 0 : 4096);
    }
    CHECK_EQ_INT(L(1)->n_heads, 32);
    CHECK_EQ_INT(m.vocab, 50304);
    CHECK_EQ_INT(m.tie_embeddings, 0);
    op_model_free(&m);
}

/* Imports js and checks each decoder's attention against slide ('S' sliding with this window,
 * 'F' full) and the first decoder's heads, KV heads and the vocab. */
static void check_slides(const char *js, const char *slide, int window, int heads, int kv, int vocab) {
    memset(&e, 0, sizeof e);
    int rc = op_model_from_hf_json(js, "s.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s: %s", js, e.msg);
    if (rc != OP_OK) return;
    for (int i = 0; slide[i]; i++) {
        int sl = slide[i] == 'S';
        CHECK_MSG(L(1 + i)->attn == (sl ? OP_ATTN_SLIDING : OP_ATTN_FULL), "%s: layer %d", js, i);
        CHECK_EQ_INT(L(1 + i)->window, sl ? window : 0);
    }
    CHECK_EQ_INT(L(1)->n_heads, heads);
    CHECK_EQ_INT(L(1)->n_kv_heads, kv);
    CHECK_EQ_INT(m.vocab, vocab);
    op_model_free(&m);
}

TEST(hf_exaone4_sliding_and_global) {
    if (!load_hf("exaone4", "ETTTTL")) return;
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_INT(L(1 + i)->attn, i == 3 ? OP_ATTN_FULL : OP_ATTN_SLIDING);
        CHECK_EQ_INT(L(1 + i)->window, i == 3 ? 0 : 32);
        CHECK_EQ_INT(L(1 + i)->n_kv_heads, 2);
        CHECK_EQ_INT(L(1 + i)->ffn_dim, 256);
    }
    CHECK_EQ_INT(m.tie_embeddings, 0);
    op_model_free(&m);
    /* without layer_types: sliding_window_pattern (Exaone4Config: 4, window 4096, 32 heads and
     * 32 KV heads, vocab 102400), an integer or a string of L / G repeated from layer 0 */
    static const struct { const char *extra; const char *slide; } pats[] = {
        {"", "SSSFSS"},
        {", \"sliding_window_pattern\": 3", "SSFSSF"},
        {", \"sliding_window_pattern\": \"LG\"", "SFSFSF"},
        {", \"sliding_window\": null", "FFFFFF"},
    };
    for (size_t k = 0; k < sizeof pats / sizeof pats[0]; k++) {
        char js[512];
        snprintf(js, sizeof js, "{\"model_type\": \"exaone4\", \"hidden_size\": 256,"
                 " \"num_hidden_layers\": 6, \"intermediate_size\": 64%s}", pats[k].extra);
        check_slides(js, pats[k].slide, 4096, 32, 32, 102400);
    }
}

TEST(hf_smollm3_nope_layers) {
    /* NoPE layers cost what RoPE layers do: without sliding all are full attention */
    if (!load_hf("smollm3", "ETTTTL")) return;
    for (int i = 1; i <= 4; i++) {
        CHECK_EQ_INT(L(i)->attn, OP_ATTN_FULL);
        CHECK_EQ_INT(L(i)->ffn, OP_FFN_MLP);
        CHECK_EQ_INT(L(i)->ffn_dim, 256);
        CHECK_EQ_INT(L(i)->n_kv_heads, 2);
    }
    CHECK_EQ_INT(m.tie_embeddings, 1); /* SmolLM3Config ties by default */
    CHECK_EQ_INT(L(5)->shares_params_with, 0);
    op_model_free(&m);
    /* use_sliding_window with a window: the NoPE layers slide (every no_rope_layer_interval-th,
     * or those no_rope_layers marks 0); defaults 16 heads / 4 KV heads, vocab 128256 */
    static const struct { const char *extra; const char *slide; } pats[] = {
        {"", "FFFSFF"},
        {", \"no_rope_layer_interval\": 2", "FSFSFS"},
        {", \"no_rope_layers\": [0, 1, 1, 1, 1, 0]", "SFFFFS"},
        {", \"layer_types\": [\"sliding_attention\", \"full_attention\", \"full_attention\","
         " \"full_attention\", \"full_attention\", \"full_attention\"]", "SFFFFF"},
    };
    for (size_t k = 0; k < sizeof pats / sizeof pats[0]; k++) {
        char js[512];
        snprintf(js, sizeof js, "{\"model_type\": \"smollm3\", \"hidden_size\": 256,"
                 " \"num_hidden_layers\": 6, \"intermediate_size\": 64, \"use_sliding_window\": true,"
                 " \"sliding_window\": 128%s}", pats[k].extra);
        check_slides(js, pats[k].slide, 128, 16, 4, 128256);
    }
    /* sliding entries in layer_types without use_sliding_window: full, as in its model */
    int rc = op_model_from_hf_json("{\"model_type\": \"smollm3\", \"hidden_size\": 256,"
                                   " \"num_hidden_layers\": 2, \"intermediate_size\": 64,"
                                   " \"sliding_window\": 128, \"layer_types\": [\"sliding_attention\","
                                   " \"full_attention\"]}", "s.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc != OP_OK) return;
    CHECK_EQ_INT(L(1)->attn, OP_ATTN_FULL);
    CHECK_EQ_INT(L(1)->window, 0);
    op_model_free(&m);
}

TEST(hf_seed_oss_dense) {
    if (!load_hf("seed_oss", "ETTL")) return;
    for (int i = 1; i <= 2; i++) {
        CHECK_EQ_INT(L(i)->attn, OP_ATTN_FULL);
        CHECK_EQ_INT(L(i)->head_dim, 32);
        CHECK_EQ_INT(L(i)->n_kv_heads, 2);
        CHECK_EQ_INT(L(i)->ffn, OP_FFN_MLP);
        CHECK_EQ_INT(L(i)->ffn_dim, 256);
    }
    CHECK_EQ_INT(m.tie_embeddings, 0);
    op_model_free(&m);
    /* SeedOssConfig's defaults: 80 heads / 8 KV heads of 128, vocab 155136 */
    int rc = op_model_from_hf_json("{\"model_type\": \"seed_oss\", \"hidden_size\": 256,"
                                   " \"num_hidden_layers\": 2, \"intermediate_size\": 64}",
                                   "s.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc != OP_OK) return;
    CHECK_EQ_INT(L(1)->n_heads, 80);
    CHECK_EQ_INT(L(1)->n_kv_heads, 8);
    CHECK_EQ_INT(L(1)->head_dim, 128);
    CHECK_EQ_INT(m.vocab, 155136);
    op_model_free(&m);
}

TEST(hf_olmoe_every_layer_moe) {
    if (!load_hf("olmoe", "ETTL")) return;
    for (int i = 1; i <= 2; i++) {
        CHECK_EQ_INT(L(i)->ffn, OP_FFN_MOE);
        CHECK_EQ_INT(L(i)->n_experts, 64); /* OlmoeConfig defaults */
        CHECK_EQ_INT(L(i)->top_k, 8);
        CHECK_EQ_INT(L(i)->expert_dim, 64);
        CHECK_EQ_INT(L(i)->ffn_gated, 1);
        CHECK_EQ_INT(L(i)->n_shared, 0);
        CHECK_EQ_INT(L(i)->n_kv_heads, 8); /* None: as many as the heads */
        CHECK_EQ_INT(L(i)->attn, OP_ATTN_FULL);
    }
    CHECK_EQ_INT(m.tie_embeddings, 0);
    op_model_free(&m);
}

TEST(hf_phimoe_top2_and_window) {
    if (!load_hf("phimoe", "ETTL")) return;
    for (int i = 1; i <= 2; i++) {
        CHECK_EQ_INT(L(i)->ffn, OP_FFN_MOE);
        CHECK_EQ_INT(L(i)->n_experts, 16); /* PhimoeConfig defaults */
        CHECK_EQ_INT(L(i)->top_k, 2);
        CHECK_EQ_INT(L(i)->expert_dim, 128);
        CHECK_EQ_INT(L(i)->ffn_gated, 1);
        CHECK_EQ_INT(L(i)->attn, OP_ATTN_SLIDING); /* sliding_window applies to every layer */
        CHECK_EQ_INT(L(i)->window, 2048);
        CHECK_EQ_INT(L(i)->n_kv_heads, 2);
    }
    CHECK_EQ_INT(m.tie_embeddings, 0);
    op_model_free(&m);
    /* no sliding_window (PhimoeConfig's None): full attention, 8 KV heads by default */
    int rc = op_model_from_hf_json("{\"model_type\": \"phimoe\", \"hidden_size\": 64, \"num_hidden_layers\": 1,"
                                   " \"intermediate_size\": 32}", "p.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc != OP_OK) return;
    CHECK_EQ_INT(L(1)->attn, OP_ATTN_FULL);
    CHECK_EQ_INT(L(1)->n_heads, 32);
    CHECK_EQ_INT(L(1)->n_kv_heads, 8);
    CHECK_EQ_INT(m.vocab, 32064);
    op_model_free(&m);
}

TEST(hf_qwen2_5_vl_window_attention) {
    if (!load_hf("qwen2_5_vl", "VVVVVVETTL")) return;
    CHECK_EQ_INT(L(0)->tokens, 1024); /* 448x448, patch 14 */
    CHECK_EQ_INT(L(0)->patch_dim, 3 * 2 * 14 * 14);
    /* blocks 0 and 2 attend within windows of (112 / 2 / 14)^2 merged tokens of 2x2 patches */
    CHECK_EQ_INT(L(1)->attn, OP_ATTN_SLIDING);
    CHECK_EQ_INT(L(1)->window, 64);
    CHECK_EQ_INT(L(3)->attn, OP_ATTN_SLIDING);
    CHECK_EQ_INT(L(2)->attn, OP_ATTN_BIDIR); /* fullatt_block_indexes [1, 3] */
    CHECK_EQ_INT(L(4)->attn, OP_ATTN_BIDIR);
    CHECK_EQ_INT(L(2)->window, 0);
    CHECK_EQ_INT(L(1)->n_heads, 4);
    CHECK_EQ_INT(L(1)->head_dim, 32);
    CHECK_EQ_INT(L(1)->ffn_dim, 256); /* intermediate_size, SwiGLU */
    CHECK_EQ_INT(L(1)->ffn_gated, 1);
    CHECK_EQ_INT(L(5)->tokens, 256); /* after the 2x2 merge */
    CHECK_EQ_INT(L(5)->hidden, 512);
    CHECK_EQ_INT(L(5)->ffn_dim, 512);
    CHECK_EQ_INT(L(5)->out_hidden, 256); /* out_hidden_size */
    CHECK_EQ_INT(L(6)->kind, OP_LAYER_EMBED);
    CHECK_EQ_INT(L(7)->n_kv_heads, 2);
    CHECK_EQ_INT(L(9)->shares_params_with, 6); /* tie_word_embeddings at the top level */
    CHECK_EQ_INT(m.tie_embeddings, 1);
    op_model_free(&m);
    /* defaults: Qwen2_5_VLVisionConfig's full-attention blocks 7, 15, 23, 31 of 32; a window
     * as large as the image is full attention; tie_word_embeddings in text_config ties too */
    int rc = op_model_from_hf_json(
        "{\"model_type\": \"qwen2_5_vl\", \"text_config\": {\"hidden_size\": 64, \"num_hidden_layers\": 1,"
        " \"intermediate_size\": 128, \"num_attention_heads\": 16, \"tie_word_embeddings\": true},"
        " \"vision_config\": {\"hidden_size\": 32, \"num_heads\": 2, \"intermediate_size\": 64,"
        " \"out_hidden_size\": 64}}", "q.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc != OP_OK) return;
    CHECK_EQ_INT(m.n_layers, 1 + 32 + 1 + 3);
    for (int i = 0; i < 32; i++)
        CHECK_EQ_INT(L(1 + i)->attn, i % 8 == 7 ? OP_ATTN_BIDIR : OP_ATTN_SLIDING);
    CHECK_EQ_INT(L(36)->shares_params_with, 34);
    CHECK_EQ_INT(L(35)->n_kv_heads, 8); /* Qwen2_5_VLTextConfig's default */
    op_model_free(&m);
    rc = op_model_from_hf_json(
        "{\"model_type\": \"qwen2_5_vl\", \"hidden_size\": 64, \"num_hidden_layers\": 1,"
        " \"intermediate_size\": 128, \"num_attention_heads\": 8, \"vision_config\": {\"depth\": 2,"
        " \"hidden_size\": 32, \"num_heads\": 2, \"intermediate_size\": 64, \"out_hidden_size\": 64,"
        " \"window_size\": 448}}", "q.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc != OP_OK) return;
    CHECK_EQ_INT(L(1)->attn, OP_ATTN_BIDIR);
    CHECK_EQ_INT(L(2)->attn, OP_ATTN_BIDIR);
    CHECK_EQ_INT(m.tie_embeddings, 0);
    op_model_free(&m);
}

/* qwen3_vl: Qwen3-VL's ViT (GELU MLP, learned position embeddings priced in the patch
 * embedding), a DeepStack merger after each block of deepstack_visual_indexes, then the Qwen3
 * language model; only the top-level tie_word_embeddings ties the head. */
TEST(hf_qwen3_vl_deepstack) {
    if (!load_hf("qwen3_vl", "VVVVVVVVETTL")) return;
    CHECK(!strcmp(L(0)->name, "visual.patch_embed"));
    CHECK_EQ_INT(L(0)->tokens, 784);                       /* (448 / 16)^2 patches */
    CHECK_EQ_INT(L(0)->patch_dim, 3 * 2 * 16 * 16 + 576); /* pixels + position table */
    CHECK_EQ_INT(L(0)->hidden, 128);
    /* blocks 0 .. 3 at 1, 3, 4, 6; deepstack_visual_indexes [2, 0]: merger 1 after block 0,
     * merger 0 after block 2 */
    static const int blk[] = {1, 3, 4, 6};
    for (int i = 0; i < 4; i++) {
        const op_layer *l = L(blk[i]);
        char want[32];
        snprintf(want, sizeof want, "visual.blocks.%d", i);
        CHECK_MSG(!strcmp(l->name, want), "%s, expected %s", l->name, want);
        CHECK_EQ_INT(l->attn, OP_ATTN_BIDIR);
        CHECK_EQ_INT(l->tokens, 784);
        CHECK_EQ_INT(l->n_heads, 4);
        CHECK_EQ_INT(l->head_dim, 32);
        CHECK_EQ_INT(l->ffn, OP_FFN_MLP);
        CHECK_EQ_INT(l->ffn_dim, 512);
        CHECK_EQ_INT(l->ffn_gated, 0); /* linear_fc1 -> gelu -> linear_fc2 */
    }
    CHECK(!strcmp(L(2)->name, "visual.deepstack.1"));
    CHECK(!strcmp(L(5)->name, "visual.deepstack.0"));
    CHECK(!strcmp(L(7)->name, "visual.merger"));
    static const int mg[] = {2, 5, 7};
    for (int i = 0; i < 3; i++) {
        const op_layer *l = L(mg[i]);
        CHECK_EQ_INT(l->kind, OP_LAYER_VISION);
        CHECK_EQ_INT(l->attn, OP_ATTN_NONE);
        CHECK_EQ_INT(l->hidden, 512); /* 128 x 2 x 2 */
        CHECK_EQ_INT(l->tokens, 196);
        CHECK_EQ_INT(l->ffn_dim, 512);
        CHECK_EQ_INT(l->out_hidden, 256);
    }
    CHECK_EQ_INT(L(8)->kind, OP_LAYER_EMBED);
    CHECK_EQ_INT(L(9)->n_heads, 8);
    CHECK_EQ_INT(L(9)->n_kv_heads, 2);
    CHECK_EQ_INT(L(9)->head_dim, 32);
    CHECK_EQ_INT(L(9)->ffn_dim, 1024);
    CHECK_EQ_INT(L(9)->ffn_gated, 1);
    CHECK_EQ_INT(L(9)->attn, OP_ATTN_FULL);
    /* text_config says tied, the top level (which the model reads) says not */
    CHECK_EQ_INT(L(11)->shares_params_with, -1);
    CHECK_EQ_INT(m.tie_embeddings, 0);
    CHECK_EQ_INT(m.vocab, 151936);
    op_model_free(&m);
    /* defaults: Qwen3VLVisionConfig (27 blocks of 1152, DeepStack after 8, 16, 24, 2304
     * positions, patch 16) and Qwen3VLTextConfig (32 heads, 32 KV heads, head_dim 128, no
     * sliding window even when asked for); the top-level flag ties */
    int rc = op_model_from_hf_json(
        "{\"model_type\": \"qwen3_vl\", \"tie_word_embeddings\": true, \"text_config\": {\"hidden_size\": 64,"
        " \"num_hidden_layers\": 1, \"intermediate_size\": 128, \"use_sliding_window\": true,"
        " \"sliding_window\": 16}, \"vision_config\": {\"out_hidden_size\": 64}}", "q.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc != OP_OK) return;
    CHECK_EQ_INT(m.n_layers, 1 + 27 + 3 + 1 + 1 + 1 + 1);
    CHECK_EQ_INT(L(0)->patch_dim, 3 * 2 * 16 * 16 + 2304);
    CHECK_EQ_INT(L(0)->hidden, 1152);
    CHECK_EQ_INT(L(1)->ffn_dim, 4304);
    CHECK_EQ_INT(L(1)->n_heads, 16);
    CHECK(!strcmp(L(10)->name, "visual.deepstack.0")); /* after block 8 (layer 9) */
    CHECK(!strcmp(L(19)->name, "visual.deepstack.1"));
    CHECK(!strcmp(L(28)->name, "visual.deepstack.2"));
    CHECK_EQ_INT(L(28)->hidden, 1152 * 4);
    CHECK(!strcmp(L(31)->name, "visual.merger"));
    CHECK_EQ_INT(L(33)->n_heads, 32);
    CHECK_EQ_INT(L(33)->n_kv_heads, 32);
    CHECK_EQ_INT(L(33)->head_dim, 128);
    CHECK_EQ_INT(L(33)->attn, OP_ATTN_FULL);
    CHECK_EQ_INT(L(34)->shares_params_with, 32);
    CHECK_EQ_INT(m.tie_embeddings, 1);
    CHECK_EQ_INT(m.vocab, 151936);
    op_model_free(&m);
    /* an empty deepstack_visual_indexes: no extra mergers */
    rc = op_model_from_hf_json(
        "{\"model_type\": \"qwen3_vl\", \"text_config\": {\"hidden_size\": 64, \"num_hidden_layers\": 1,"
        " \"intermediate_size\": 128, \"num_attention_heads\": 4, \"num_key_value_heads\": 4},"
        " \"vision_config\": {\"depth\": 2,"
        " \"hidden_size\": 32, \"num_heads\": 2, \"out_hidden_size\": 64, \"deepstack_visual_indexes\": []}}",
        "q.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc != OP_OK) return;
    CHECK(!strcmp(m.pattern, "VVVVETL"));
    op_model_free(&m);
}

/* qwen3_vl_moe: the same encoder, then Qwen3-MoE layers (mlp_only_layers dense) */
TEST(hf_qwen3_vl_moe_experts) {
    if (!load_hf("qwen3_vl_moe", "VVVVVVETTTL")) return;
    CHECK_EQ_INT(L(0)->tokens, 1024); /* patch 14: (448 / 14)^2 */
    CHECK_EQ_INT(L(0)->patch_dim, 3 * 2 * 14 * 14 + 2304);
    CHECK(!strcmp(L(3)->name, "visual.deepstack.0")); /* after block 1 */
    CHECK_EQ_INT(L(3)->hidden, 256);
    CHECK_EQ_INT(L(3)->tokens, 256);
    CHECK_EQ_INT(L(3)->out_hidden, 256);
    CHECK(!strcmp(L(5)->name, "visual.merger"));
    CHECK_EQ_INT(L(4)->ffn_gated, 0);
    for (int i = 7; i <= 9; i += 2) {
        CHECK_EQ_INT(L(i)->ffn, OP_FFN_MOE);
        CHECK_EQ_INT(L(i)->n_experts, 16);
        CHECK_EQ_INT(L(i)->top_k, 4);
        CHECK_EQ_INT(L(i)->expert_dim, 64);
        CHECK_EQ_INT(L(i)->n_shared, 0);
        CHECK_EQ_INT(L(i)->ffn_gated, 1);
        CHECK_EQ_INT(L(i)->head_dim, 64);
    }
    CHECK_EQ_INT(L(8)->ffn, OP_FFN_MLP); /* mlp_only_layers [1] */
    CHECK_EQ_INT(L(8)->ffn_dim, 768);
    CHECK_EQ_INT(L(10)->shares_params_with, 6); /* tie_word_embeddings at the top level */
    CHECK_EQ_INT(m.tie_embeddings, 1);
    CHECK_EQ_INT(m.vocab, 1000);
    op_model_free(&m);
    /* Qwen3VLMoeTextConfig's defaults: 60 experts, top 4 of 1408, 16 heads and KV heads,
     * head_dim = hidden / heads; untied unless the top level ties (its text default does not) */
    int rc = op_model_from_hf_json(
        "{\"model_type\": \"qwen3_vl_moe\", \"text_config\": {\"hidden_size\": 64, \"num_hidden_layers\": 1,"
        " \"intermediate_size\": 128}, \"vision_config\": {\"depth\": 1, \"hidden_size\": 32,"
        " \"num_heads\": 2, \"out_hidden_size\": 64, \"deepstack_visual_indexes\": [0]}}", "q.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc != OP_OK) return;
    CHECK(!strcmp(m.pattern, "VVVVETL"));
    CHECK_EQ_INT(L(5)->n_experts, 60);
    CHECK_EQ_INT(L(5)->top_k, 4);
    CHECK_EQ_INT(L(5)->expert_dim, 1408);
    CHECK_EQ_INT(L(5)->n_heads, 16);
    CHECK_EQ_INT(L(5)->n_kv_heads, 16);
    CHECK_EQ_INT(L(5)->head_dim, 4);
    CHECK_EQ_INT(L(1)->ffn_dim, 4304);
    CHECK_EQ_INT(m.tie_embeddings, 0);
    op_model_free(&m);
}

TEST(hf_qwen3_next_linear_and_full) {
    if (!load_hf("qwen3_next", "E*#*#*#*#*#*#*#*#L")) return;
    for (int i = 0; i < 8; i++) {
        const op_layer *a = L(1 + 2 * i);
        CHECK_EQ_INT(a->attn, (i + 1) % 4 == 0 ? OP_ATTN_FULL : OP_ATTN_LINEAR);
    }
    CHECK_EQ_INT(L(1)->lin_k_heads, 4);
    CHECK_EQ_INT(L(1)->lin_v_heads, 8);
    CHECK_EQ_INT(L(1)->lin_k_dim, 32);
    CHECK_EQ_INT(L(7)->n_kv_heads, 2);
    CHECK_EQ_INT(L(7)->head_dim, 64);
    CHECK_EQ_INT(L(2)->n_experts, 512);
    CHECK_EQ_INT(L(2)->top_k, 10);
    CHECK_EQ_INT(L(2)->n_shared, 1);
    op_model_free(&m);
}

TEST(hf_falcon_h1_hybrid) {
    if (!load_hf("falcon_h1", "EH-H-H-L")) return;
    CHECK_EQ_INT(L(1)->attn, OP_ATTN_FULL);
    CHECK_EQ_INT(L(1)->n_heads, 4);
    CHECK_EQ_INT(L(1)->n_kv_heads, 2);
    CHECK_EQ_INT(L(1)->ssm_version, 2);
    CHECK_EQ_INT(L(1)->ssm_inner, 512);
    CHECK_EQ_INT(L(1)->ssm_heads, 16);
    CHECK_EQ_INT(L(1)->ssm_head_dim, 32);
    CHECK_EQ_INT(L(2)->ffn_dim, 768);
    op_model_free(&m);
}

TEST(hf_zamba2_shared_blocks) {
    if (!load_hf("zamba2", "EM*-MM*-MM*-ML")) return;
    CHECK_EQ_INT(L(2)->shares_params_with, -1); /* shared block 0, first use */
    CHECK_EQ_INT(L(6)->shares_params_with, -1); /* shared block 1, first use */
    CHECK_EQ_INT(L(10)->shares_params_with, 2); /* block 0 again */
    CHECK_EQ_INT(L(11)->shares_params_with, 3);
    CHECK_EQ_INT(L(2)->attn_in_dim, 256);
    CHECK_EQ_INT(L(2)->head_dim, 32); /* 2 * hidden / heads */
    CHECK_EQ_INT(L(3)->ffn_dim, 512);
    CHECK_EQ_INT(L(1)->ssm_heads, 8); /* expand * hidden / headdim */
    CHECK_EQ_INT(L(13)->shares_params_with, 0); /* tied head by default */
    op_model_free(&m);
}

/* Granite 4.0 H: layer_types picks Mamba2 or attention; every block's FFN is the routed experts
 * plus the dense shared MLP as one ungated shared expert (transformers sums the two). */
TEST(hf_granitemoehybrid_layers) {
    if (!load_hf("granitemoehybrid", "EM#*#M#M#L")) return;
    CHECK_EQ_INT(L(1)->ssm_version, 2);
    CHECK_EQ_INT(L(1)->ssm_inner, 512);
    CHECK_EQ_INT(L(1)->ssm_heads, 16);
    CHECK_EQ_INT(L(1)->ssm_head_dim, 32);
    CHECK_EQ_INT(L(1)->ssm_groups, 2);
    CHECK_EQ_INT(L(1)->ssm_state, 64);
    CHECK_EQ_INT(L(1)->ssm_conv, 4);
    CHECK_EQ_INT(L(3)->attn, OP_ATTN_FULL);
    CHECK_EQ_INT(L(3)->n_heads, 4);
    CHECK_EQ_INT(L(3)->n_kv_heads, 2);
    CHECK_EQ_INT(L(3)->head_dim, 64);
    CHECK_EQ_INT(L(2)->ffn, OP_FFN_MOE);
    CHECK_EQ_INT(L(2)->n_experts, 8);
    CHECK_EQ_INT(L(2)->top_k, 2);
    CHECK_EQ_INT(L(2)->expert_dim, 128);
    CHECK_EQ_INT(L(2)->n_shared, 1);
    CHECK_EQ_INT(L(2)->shared_dim, 512);
    CHECK_EQ_INT(L(2)->ffn_gated, 1);
    CHECK_EQ_INT(L(9)->shares_params_with, 0); /* tied */
    op_model_free(&m);
    /* no experts: the shared MLP alone; older configs name the list layers_block_type, and
     * transformers' own names for the entries are read too */
    int rc = op_model_from_hf_json("{\"model_type\": \"granitemoehybrid\", \"hidden_size\": 64,"
                                   " \"num_hidden_layers\": 3, \"shared_intermediate_size\": 96,"
                                   " \"num_local_experts\": 0, \"num_attention_heads\": 4,"
                                   " \"layers_block_type\": [\"linear_attention\", \"full_attention\", \"mamba\"]}",
                                   "g.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc != OP_OK) return;
    CHECK(!strcmp(m.pattern, "EM-*-M-L"));
    CHECK_EQ_INT(L(2)->ffn, OP_FFN_MLP);
    CHECK_EQ_INT(L(2)->ffn_dim, 96);
    CHECK_EQ_INT(L(2)->ffn_gated, 1);
    /* transformers' defaults: 128 Mamba heads of expand x hidden / heads, 1 group, state 256,
     * KV heads = heads, vocab 32000, untied */
    CHECK_EQ_INT(L(1)->ssm_heads, 128);
    CHECK_EQ_INT(L(1)->ssm_head_dim, 1);
    CHECK_EQ_INT(L(1)->ssm_groups, 1);
    CHECK_EQ_INT(L(1)->ssm_state, 256);
    CHECK_EQ_INT(L(3)->n_kv_heads, 4);
    CHECK_EQ_INT(m.vocab, 32000);
    CHECK_EQ_INT(m.tie_embeddings, 0);
    op_model_free(&m);
    /* no layer_types at all: every mixer is Mamba2, as transformers builds it */
    rc = op_model_from_hf_json("{\"model_type\": \"granitemoehybrid\", \"hidden_size\": 64,"
                               " \"num_hidden_layers\": 2, \"shared_intermediate_size\": 96,"
                               " \"intermediate_size\": 32}",
                               "g.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc != OP_OK) return;
    CHECK(!strcmp(m.pattern, "EM#M#L"));
    CHECK_EQ_INT(L(2)->n_experts, 8); /* default num_local_experts, top 2 */
    CHECK_EQ_INT(L(2)->top_k, 2);
    op_model_free(&m);
}

/* Bamba: attention at attn_layer_indices (0-based), Mamba2 elsewhere, a gated MLP in every block. */
TEST(hf_bamba_layers) {
    if (!load_hf("bamba", "EM-M-*-M-L")) return;
    CHECK_EQ_INT(L(1)->ssm_version, 2);
    CHECK_EQ_INT(L(1)->ssm_heads, 8);
    CHECK_EQ_INT(L(1)->ssm_head_dim, 64); /* "auto": expand x hidden / heads */
    CHECK_EQ_INT(L(1)->ssm_groups, 2);
    CHECK_EQ_INT(L(5)->attn, OP_ATTN_FULL);
    CHECK_EQ_INT(L(5)->n_heads, 8);
    CHECK_EQ_INT(L(5)->n_kv_heads, 4);
    CHECK_EQ_INT(L(5)->head_dim, 32);
    CHECK_EQ_INT(L(6)->ffn_dim, 640);
    CHECK_EQ_INT(L(6)->ffn_gated, 1);
    CHECK_EQ_INT(L(9)->shares_params_with, -1);
    op_model_free(&m);
    /* no attn_layer_indices: Mamba2 throughout; vocab 128000 by default */
    int rc = op_model_from_hf_json("{\"model_type\": \"bamba\", \"hidden_size\": 64, \"num_hidden_layers\": 2,"
                                   " \"intermediate_size\": 32, \"attn_layer_indices\": null}",
                                   "b.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc != OP_OK) return;
    CHECK(!strcmp(m.pattern, "EM-M-L"));
    CHECK_EQ_INT(m.vocab, 128000);
    op_model_free(&m);
}

/* Pure SSM language models: one Mamba layer per block and nothing else. */
TEST(hf_mamba_models) {
    if (load_hf("mamba2", "EMMML")) {
        CHECK_EQ_INT(L(1)->ssm_version, 2);
        CHECK_EQ_INT(L(1)->ssm_inner, 512);
        CHECK_EQ_INT(L(1)->ssm_heads, 16);
        CHECK_EQ_INT(L(1)->ssm_head_dim, 32);
        CHECK_EQ_INT(L(1)->ssm_groups, 4);
        CHECK_EQ_INT(L(1)->ssm_state, 64);
        CHECK_EQ_INT(m.tie_embeddings, 0);
        op_model_free(&m);
    }
    if (load_hf("mamba", "EMMML")) {
        CHECK_EQ_INT(L(1)->ssm_version, 1);
        CHECK_EQ_INT(L(1)->ssm_inner, 256);
        CHECK_EQ_INT(L(1)->ssm_state, 16);
        CHECK_EQ_INT(L(1)->ssm_conv, 4);
        CHECK_EQ_INT(L(1)->ssm_dt_rank, 8); /* "auto": ceil(128 / 16) */
        CHECK_EQ_INT(L(4)->shares_params_with, 0); /* mamba ties by default */
        op_model_free(&m);
    }
    if (load_hf("falcon_mamba", "EMML")) {
        CHECK_EQ_INT(L(1)->ssm_version, 1);
        CHECK_EQ_INT(L(1)->ssm_inner, 512);
        CHECK_EQ_INT(L(1)->ssm_dt_rank, 12);
        CHECK_EQ_INT(m.tie_embeddings, 0);
        op_model_free(&m);
    }
    /* defaults: intermediate_size = expand x hidden, time_step_rank "auto", vocab 50280 (mamba);
     * Mamba2: 128 heads of 64, 8 groups, state 128, vocab 32768 */
    int rc = op_model_from_hf_json("{\"model_type\": \"falcon_mamba\", \"hidden_size\": 100, \"num_hidden_layers\": 1}",
                                   "fm.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc == OP_OK) {
        CHECK_EQ_INT(L(1)->ssm_inner, 200);
        CHECK_EQ_INT(L(1)->ssm_dt_rank, 7);
        CHECK_EQ_INT(L(1)->ssm_state, 16);
        CHECK_EQ_INT(m.vocab, 50280);
        CHECK_EQ_INT(m.tie_embeddings, 1);
        op_model_free(&m);
    }
    rc = op_model_from_hf_json("{\"model_type\": \"mamba2\", \"hidden_size\": 4096, \"num_hidden_layers\": 1}",
                               "m2.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc == OP_OK) {
        CHECK_EQ_INT(L(1)->ssm_heads, 128);
        CHECK_EQ_INT(L(1)->ssm_head_dim, 64);
        CHECK_EQ_INT(L(1)->ssm_groups, 8);
        CHECK_EQ_INT(L(1)->ssm_state, 128);
        CHECK_EQ_INT(m.vocab, 32768);
        op_model_free(&m);
    }
}

TEST(hf_minimax_attn_type_list) {
    if (!load_hf("minimax_text_01", "E*#*#*#*#*#*#*#*#L")) return;
    for (int i = 0; i < 8; i++)
        CHECK_EQ_INT(L(1 + 2 * i)->attn, i == 3 || i == 7 ? OP_ATTN_FULL : OP_ATTN_LINEAR);
    CHECK_EQ_INT(L(1)->lin_k_heads, 8);
    CHECK_EQ_INT(L(1)->lin_k_dim, 32);
    CHECK_EQ_INT(L(2)->n_experts, 32);
    CHECK_EQ_INT(L(2)->n_shared, 0);
    op_model_free(&m);
}

TEST(hf_llama4_interleave_and_chunks) {
    if (!load_hf("llama4", "VVVVETTTTTTTTL")) return;
    CHECK_EQ_INT(L(0)->tokens, 576); /* (336 / 14)^2 */
    CHECK_EQ_INT(L(3)->tokens, 144); /* pixel shuffle 0.5 */
    for (int i = 0; i < 8; i++) {
        const op_layer *d = L(5 + i);
        CHECK_EQ_INT(d->ffn, i % 2 == 1 ? OP_FFN_MOE : OP_FFN_MLP); /* interleave step 2 */
        CHECK_EQ_INT(d->attn, (i + 1) % 4 == 0 ? OP_ATTN_FULL : OP_ATTN_CHUNKED);
    }
    CHECK_EQ_INT(L(5)->window, 8192);
    CHECK_EQ_INT(L(5)->ffn_dim, 1024);
    CHECK_EQ_INT(L(6)->n_experts, 128);
    CHECK_EQ_INT(L(6)->top_k, 1);
    CHECK_EQ_INT(L(6)->n_shared, 1);
    CHECK_EQ_INT(L(6)->expert_dim, 512);
    op_model_free(&m);
}

TEST(hf_gpt_oss_layer_types) {
    if (!load_hf("gpt_oss", "ETTTTL")) return;
    CHECK_EQ_INT(L(1)->attn, OP_ATTN_SLIDING);
    CHECK_EQ_INT(L(1)->window, 128);
    CHECK_EQ_INT(L(2)->attn, OP_ATTN_FULL);
    CHECK_EQ_INT(L(2)->ffn, OP_FFN_MOE);
    CHECK_EQ_INT(L(2)->n_experts, 32);
    CHECK_EQ_INT(L(2)->top_k, 4);
    op_model_free(&m);
}

TEST(presets_all_load) {
    struct {
        const char *name;
        int n;
    } want[] = {{"llama2-7b", 34},    {"nemotron-h-8b", 54},   {"jamba-v0.1", 66},
                {"deepseek-v2-lite", 29}, {"gemma2-9b", 44},   {"qwen2-vl-7b", 64},
                {"mixtral-8x7b", 34}, {"nemotron-h-8b-profile", 54}};
    int n_presets = 0;
    for (const char *const *p = op_model_preset_names(); *p; p++, n_presets++) {
        CHECK_MSG(op_model_preset(*p, &m, &e) == OP_OK, "%s: %s", *p, e.msg);
        CHECK(op_model_preset_desc(*p) && strlen(op_model_preset_desc(*p)) > 10);
        op_model_free(&m);
    }
    CHECK_EQ_INT(n_presets, 8);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        CHECK_MSG(op_model_load(want[i].name, &m, &e) == OP_OK, "%s: %s", want[i].name, e.msg);
        CHECK_EQ_INT(m.n_layers, want[i].n);
        CHECK(!strcmp(m.name, want[i].name));
        op_model_free(&m);
    }
    /* nemotron-h-8b: 52 mixer/FFN layers between E and L, 4 of them attention */
    CHECK(op_model_preset("nemotron-h-8b", &m, &e) == OP_OK);
    char hf_pattern[sizeof m.pattern];
    snprintf(hf_pattern, sizeof hf_pattern, "%s", m.pattern);
    int attn = 0;
    for (int i = 0; i < m.n_layers; i++) attn += m.layers[i].kind == OP_LAYER_ATTN;
    CHECK_EQ_INT(attn, 4);
    CHECK(m.pattern[0] == 'E' && m.pattern[53] == 'L');
    op_model_free(&m);
    CHECK(op_model_preset("nemotron-h-8b-profile", &m, &e) == OP_OK);
    CHECK(!strcmp(m.pattern, hf_pattern));
    CHECK_NEAR(m.layers[53].f_ms, 9.531, 1e-12);
    CHECK_NEAR(m.layers[1].i_ms, 2.152, 1e-12);
    CHECK(m.layers[1].has_measured);
    op_model_free(&m);
    CHECK(op_model_preset("gpt-5", &m, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "unknown preset 'gpt-5'");
    CHECK_STR_CONTAINS(e.msg, "jamba-v0.1");
}

/* The expert counts an EP degree must divide: MoE layers and MoE FFNs inside decoders alike;
 * none in a dense model or where a profile measured the layers. */
TEST(expert_gcd) {
    static const struct { const char *name; int g; } want[] = {
        {"mixtral-8x7b", 8}, {"jamba-v0.1", 16}, {"deepseek-v2-lite", 64},
        {"llama2-7b", 0},    {"nemotron-h-8b-profile", 0}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        CHECK(op_model_preset(want[i].name, &m, &e) == OP_OK);
        CHECK_MSG(op_model_expert_gcd(&m) == want[i].g, "%s: %d", want[i].name, op_model_expert_gcd(&m));
        op_model_free(&m);
    }
    CHECK(op_model_preset("mixtral-8x7b", &m, &e) == OP_OK);
    m.layers[5].n_experts = 12; /* gcd(8, 12) */
    CHECK_EQ_INT(op_model_expert_gcd(&m), 4);
    op_model_free(&m);
    CHECK_EQ_INT(op_model_expert_gcd(NULL), 0);
}

TEST(utf8_bom_accepted) {
    const char *txt = "\xEF\xBB\xBF{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 1,"
                      " \"num_attention_heads\": 4, \"intermediate_size\": 128}";
    int rc = op_model_from_hf_json(txt, "bom.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc == OP_OK) CHECK_EQ_INT(m.vocab, 32000); /* LlamaConfig default */
    op_model_free(&m);
}

TEST(infinity_nan_quirk) {
    const char *txt = "{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 1,\n"
                      " \"num_attention_heads\": 4, \"intermediate_size\": 128, \"vocab_size\": 100,\n"
                      " \"x\": [Infinity, -Infinity, NaN], \"note\": \"Infinity NaN stays text\"}";
    CHECK_MSG(op_model_from_hf_json(txt, "inf.json", &m, &e) == OP_OK, "%s", e.msg);
    CHECK(!strcmp(m.pattern, "ETL"));
    op_model_free(&m);
    /* the rewrite keeps columns: the error after Infinity is reported where it is */
    const char *bad = "{\"model_type\": \"llama\",\n \"a\": Infinity, \"b\": ]}";
    const char *same = "{\"model_type\": \"llama\",\n \"a\": 12345678, \"b\": ]}";
    op_err e2 = {0};
    CHECK(op_model_from_hf_json(bad, "c.json", &m, &e) == OP_EINVAL);
    CHECK(op_model_from_hf_json(same, "c.json", &m, &e2) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "c.json:2:");
    CHECK_MSG(!strcmp(e.msg, e2.msg), "%s vs %s", e.msg, e2.msg);
}

TEST(bad_unknown_type_lists_supported) {
    CHECK(op_model_from_hf_json("{\"model_type\": \"gpt2\", \"n_layer\": 12}", "gpt2.json", &m, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "gpt2.json: unsupported model_type 'gpt2'");
    CHECK_STR_CONTAINS(e.msg, "llama");
    CHECK_STR_CONTAINS(e.msg, "nemotron_h");
    CHECK_STR_CONTAINS(e.msg, "gpt_oss");
    CHECK(op_model_from_hf_json("{\"hidden_size\": 1}", "x.json", &m, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "missing required field 'model_type'");
}

TEST(bad_malformed_json_names_line) {
    CHECK(op_model_load(data("hf/bad_syntax.json"), &m, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "bad_syntax.json:3:");
    CHECK(op_model_from_hf_json("[1, 2]", "arr.json", &m, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "arr.json: expected a JSON object");
}

TEST(bad_missing_and_wrong_fields) {
    CHECK(op_model_from_hf_json("{\"model_type\": \"llama\", \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                                " \"intermediate_size\": 8, \"vocab_size\": 10}",
                                "cfg.json", &m, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "cfg.json: missing required field 'hidden_size'");
    CHECK(op_model_from_hf_json("{\"model_type\": \"gemma3\", \"text_config\": {\"hidden_size\": 64}}", "g.json", &m,
                                &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "missing required field 'text_config.num_hidden_layers'");
    /* the SSM families: the widths a default would silently change */
    static const struct { const char *json, *want; } req[] = {
        {"{\"model_type\": \"granitemoehybrid\", \"hidden_size\": 64, \"num_hidden_layers\": 2}",
         "r.json: missing required field 'shared_intermediate_size'"},
        {"{\"model_type\": \"granitemoehybrid\", \"hidden_size\": 64, \"num_hidden_layers\": 2,"
         " \"shared_intermediate_size\": 8}",
         "r.json: missing required field 'intermediate_size'"}, /* 8 experts by default */
        {"{\"model_type\": \"bamba\", \"hidden_size\": 64, \"num_hidden_layers\": 2}",
         "r.json: missing required field 'intermediate_size'"},
        {"{\"model_type\": \"mamba2\", \"num_hidden_layers\": 2}", "r.json: missing required field 'hidden_size'"},
        {"{\"model_type\": \"mamba\", \"hidden_size\": 64}", "r.json: missing required field 'num_hidden_layers'"},
        {"{\"model_type\": \"falcon_mamba\", \"hidden_size\": 64, \"num_hidden_layers\": 0}",
         "r.json: num_hidden_layers: 0 layers; expected 1..2000"},
    };
    for (size_t k = 0; k < sizeof req / sizeof req[0]; k++) {
        CHECK_MSG(op_model_from_hf_json(req[k].json, "r.json", &m, &e) == OP_EINVAL, "%s loaded", req[k].json);
        CHECK_STR_CONTAINS(e.msg, req[k].want);
    }
    CHECK(op_model_from_hf_json("{\"model_type\": \"mistral\", \"hidden_size\": \"big\"}", "w.json", &m, &e) ==
          OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "w.json: hidden_size: expected an integer, got a string");
    CHECK(op_model_from_hf_json("{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 0,"
                                " \"num_attention_heads\": 4, \"intermediate_size\": 8, \"vocab_size\": 10}",
                                "z.json", &m, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "z.json: num_hidden_layers: 0 layers; expected 1..2000");
    CHECK(op_model_from_hf_json("{\"model_type\": \"nemotron_h\", \"hidden_size\": 64, \"num_hidden_layers\": 3,"
                                " \"vocab_size\": 10, \"num_attention_heads\": 4, \"hybrid_override_pattern\": \"M-\"}",
                                "n.json", &m, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "hybrid_override_pattern: has 2 symbols but num_hidden_layers is 3");
    CHECK(op_model_from_hf_json("{\"model_type\": \"nemotron_h\", \"hidden_size\": 64, \"num_hidden_layers\": 3,"
                                " \"vocab_size\": 10, \"num_attention_heads\": 4, \"hybrid_override_pattern\": \"M-x\"}",
                                "n.json", &m, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "hybrid_override_pattern: [2]: unknown symbol 'x'");
    CHECK(op_model_from_hf_json("{\"model_type\": \"jamba\", \"hidden_size\": 64, \"num_hidden_layers\": 3,"
                                " \"vocab_size\": 10, \"num_attention_heads\": 4, \"intermediate_size\": 8,"
                                " \"attn_layer_period\": 4, \"attn_layer_offset\": 4}",
                                "j.json", &m, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "attn_layer_offset: 4 is outside");
    CHECK(op_model_from_hf_json("{\"model_type\": \"gpt_oss\", \"hidden_size\": 64, \"num_hidden_layers\": 2,"
                                " \"vocab_size\": 10, \"num_attention_heads\": 8, \"intermediate_size\": 8,"
                                " \"layer_types\": [\"sliding_attention\"]}",
                                "o.json", &m, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "layer_types: has 1 entries but the model has 2 layers");
    CHECK(op_model_from_hf_json("{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 1,"
                                " \"num_attention_heads\": 4, \"intermediate_size\": 8, \"vocab_size\": -10}",
                                "v.json", &m, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "v.json: vocab_size: -10 is out of range");
    /* a size given as 0 would load and cost nothing */
    const char *zero[] = {"attention_head_dim", "n_groups", "ssm_state_size", "num_key_value_heads"};
    for (int k = 0; k < 4; k++) {
        char js[512], want[96];
        snprintf(js, sizeof js,
                 "{\"model_type\": \"nemotron_h\", \"hidden_size\": 64, \"num_hidden_layers\": 2,"
                 " \"vocab_size\": 10, \"num_attention_heads\": 4, \"hybrid_override_pattern\": \"M*\","
                 " \"%s\": 0}", zero[k]);
        snprintf(want, sizeof want, "z0.json: %s: must be positive, got 0", zero[k]);
        CHECK(op_model_from_hf_json(js, "z0.json", &m, &e) == OP_EINVAL);
        CHECK_STR_CONTAINS(e.msg, want);
    }
    CHECK(op_model_from_hf_json("{\"model_type\": \"zamba2\", \"hidden_size\": 16000000, \"vocab_size\": 10,"
                                " \"mamba_expand\": 1000, \"layers_block_type\": [\"mamba\"], \"num_hidden_layers\": 1}",
                                "big.json", &m, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "big.json: mamba_expand: gives a size of");
    CHECK(op_model_load("/nonexistent/cfg.json", &m, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "neither a readable file");
    CHECK_STR_CONTAINS(e.msg, "nemotron-h-8b");
}

/* Every MoE family routes a token to at most as many experts as the layer has, and to at
 * least one: a config asking for more (or none) describes no model and must not load. */
TEST(bad_moe_top_k) {
    static const struct { const char *json, *want; } cases[] = {
        {"{\"model_type\": \"jamba\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"vocab_size\": 10,"
         " \"num_attention_heads\": 4, \"intermediate_size\": 8, \"num_experts\": 4,"
         " \"num_experts_per_tok\": 5}",
         "num_experts_per_tok: 5 is more than the 4 experts (num_experts)"},
        {"{\"model_type\": \"nemotron_h\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"vocab_size\": 10,"
         " \"num_attention_heads\": 4, \"hybrid_override_pattern\": \"ME\", \"n_routed_experts\": 8,"
         " \"num_experts_per_tok\": 9}",
         "num_experts_per_tok: 9 is more than the 8 experts (n_routed_experts)"},
        {"{\"model_type\": \"nemotron_h\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"vocab_size\": 10,"
         " \"num_attention_heads\": 4, \"hybrid_override_pattern\": \"ME\", \"n_routed_experts\": 0}",
         "n_routed_experts: must be positive, got 0"},
        {"{\"model_type\": \"qwen3_next\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"vocab_size\": 10,"
         " \"num_attention_heads\": 4, \"intermediate_size\": 8, \"num_experts\": 16,"
         " \"num_experts_per_tok\": 17}",
         "num_experts_per_tok: 17 is more than the 16 experts (num_experts)"},
        {"{\"model_type\": \"minimax\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"vocab_size\": 10,"
         " \"num_attention_heads\": 8, \"intermediate_size\": 8, \"num_local_experts\": 4,"
         " \"num_experts_per_tok\": 0}",
         "num_experts_per_tok: must be positive, got 0"},
        {"{\"model_type\": \"llama4_text\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"vocab_size\": 10,"
         " \"num_attention_heads\": 8, \"num_local_experts\": 16, \"num_experts_per_tok\": 32}",
         "num_experts_per_tok: 32 is more than the 16 experts (num_local_experts)"},
        {"{\"model_type\": \"granitemoehybrid\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"vocab_size\": 10,"
         " \"shared_intermediate_size\": 8, \"intermediate_size\": 8, \"num_local_experts\": 4,"
         " \"num_experts_per_tok\": 5}",
         "num_experts_per_tok: 5 is more than the 4 experts (num_local_experts)"},
        {"{\"model_type\": \"granitemoehybrid\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"vocab_size\": 10,"
         " \"shared_intermediate_size\": 8, \"intermediate_size\": 8, \"num_experts_per_tok\": 0}",
         "num_experts_per_tok: must be positive, got 0"},
        {"{\"model_type\": \"glm4_moe\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"vocab_size\": 10,"
         " \"num_attention_heads\": 8, \"intermediate_size\": 8, \"n_routed_experts\": 4,"
         " \"num_experts_per_tok\": 8}",
         "num_experts_per_tok: 8 is more than the 4 experts (n_routed_experts)"},
        {"{\"model_type\": \"glm4_moe\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"vocab_size\": 10,"
         " \"num_attention_heads\": 8, \"intermediate_size\": 8, \"n_routed_experts\": 0}",
         "n_routed_experts: must be positive, got 0"},
        {"{\"model_type\": \"glm4_moe\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"vocab_size\": 10,"
         " \"num_attention_heads\": 8, \"intermediate_size\": 8, \"moe_intermediate_size\": 0}",
         "moe_intermediate_size: must be positive, got 0"},
        {"{\"model_type\": \"olmoe\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"vocab_size\": 10,"
         " \"num_attention_heads\": 8, \"intermediate_size\": 8, \"num_experts_per_tok\": 65}",
         "num_experts_per_tok: 65 is more than the 64 experts (num_experts)"},
        {"{\"model_type\": \"olmoe\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"vocab_size\": 10,"
         " \"num_attention_heads\": 8, \"intermediate_size\": 8, \"num_experts\": 0}",
         "num_experts: must be positive, got 0"},
        {"{\"model_type\": \"phimoe\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"vocab_size\": 10,"
         " \"num_attention_heads\": 8, \"intermediate_size\": 8, \"num_local_experts\": 2,"
         " \"num_experts_per_tok\": 3}",
         "num_experts_per_tok: 3 is more than the 2 experts (num_local_experts)"},
        {"{\"model_type\": \"phimoe\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"vocab_size\": 10,"
         " \"num_attention_heads\": 8, \"intermediate_size\": 8, \"num_experts_per_tok\": 0}",
         "num_experts_per_tok: must be positive, got 0"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        memset(&e, 0, sizeof e);
        CHECK_MSG(op_model_from_hf_json(cases[k].json, "moe.json", &m, &e) == OP_EINVAL, "case %zu loaded", k);
        CHECK_STR_CONTAINS(e.msg, cases[k].want);
        CHECK_STR_CONTAINS(e.msg, "moe.json: ");
    }
    /* the expert fields of a layout without MoE layers are not read */
    CHECK_MSG(op_model_from_hf_json("{\"model_type\": \"nemotron_h\", \"hidden_size\": 64, \"num_hidden_layers\": 2,"
                                    " \"vocab_size\": 10, \"num_attention_heads\": 4,"
                                    " \"hybrid_override_pattern\": \"M-\", \"n_routed_experts\": 0}",
                                    "dense.json", &m, &e) == OP_OK, "%s", e.msg);
    op_model_free(&m);
}

/* A one-layer config of `type` with `heads` attention heads and `extra` (", key: value ...")
 * appended; the text lives until the next call. */
static const char *cfg1(const char *type, int heads, const char *extra) {
    static char js[512];
    snprintf(js, sizeof js,
             "{\"model_type\": \"%s\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"vocab_size\": 10,"
             " \"num_attention_heads\": %d, \"intermediate_size\": 8%s}",
             type, heads, extra);
    return js;
}

/* js, read as the HF config `file`, is refused naming the file and saying `want`. */
static void refused(const char *js, const char *file, const char *want) {
    memset(&e, 0, sizeof e);
    CHECK_MSG(op_model_from_hf_json(js, file, &m, &e) == OP_EINVAL, "%s loaded: %s", file, js);
    CHECK_STR_CONTAINS(e.msg, file);
    CHECK_STR_CONTAINS(e.msg, want);
}

/* A Mamba2 mixer's groups divide its heads; Jamba's state, convolution, dt rank and expert
 * count are at least 1 (a million groups was priced at 199000 GiB a device; 0 experts turned
 * every MoE layer into an MLP without a word). */
TEST(bad_mamba_shapes) {
    static const struct { const char *type, *extra, *want; } cases[] = {
        {"nemotron_h", ", \"hybrid_override_pattern\": \"M\", \"n_groups\": 3",
         "n_groups: 3 groups do not divide the 128 Mamba heads (mamba_num_heads)"},
        {"nemotron_h", ", \"hybrid_override_pattern\": \"M\", \"ssm_state_size\": 0",
         "ssm_state_size: must be positive, got 0"},
        {"falcon_h1", ", \"mamba_n_heads\": 6, \"mamba_n_groups\": 4",
         "mamba_n_groups: 4 groups do not divide the 6 Mamba heads (mamba_n_heads)"},
        {"zamba2", ", \"layers_block_type\": [\"mamba\"], \"mamba_ngroups\": 0",
         "mamba_ngroups: must be positive, got 0"},
        {"jamba", ", \"num_experts\": 0", "num_experts: must be positive, got 0"},
        {"jamba", ", \"mamba_dt_rank\": 0", "mamba_dt_rank: must be positive, got 0"},
        {"jamba", ", \"mamba_d_conv\": 0", "mamba_d_conv: must be positive, got 0"},
#define GRANITE ", \"shared_intermediate_size\": 16, \"num_local_experts\": 0"
        {"granitemoehybrid", GRANITE ", \"mamba_n_groups\": 3",
         "mamba_n_groups: 3 groups do not divide the 128 Mamba heads (mamba_n_heads)"},
        {"granitemoehybrid", GRANITE ", \"mamba_n_heads\": 3, \"mamba_n_groups\": 1",
         "mamba_n_heads: 3 heads do not divide mamba_expand x hidden_size 128"},
        {"granitemoehybrid", GRANITE ", \"mamba_n_heads\": 4, \"mamba_d_head\": 16",
         "mamba_d_head: 16 x 4 mamba_n_heads is not mamba_expand x hidden_size 128"},
        {"granitemoehybrid", GRANITE ", \"mamba_d_head\": \"half\"",
         "mamba_d_head: expected a whole number or \"auto\", got \"half\""},
        {"granitemoehybrid", GRANITE ", \"mamba_expand\": 0", "mamba_expand: must be positive, got 0"},
        {"granitemoehybrid", ", \"shared_intermediate_size\": 0", "shared_intermediate_size: must be positive, got 0"},
        {"granitemoehybrid", ", \"shared_intermediate_size\": 8, \"num_local_experts\": -1",
         "num_local_experts: -1 is out of range"},
#undef GRANITE
        {"bamba", ", \"mamba_d_state\": 0", "mamba_d_state: must be positive, got 0"},
        {"bamba", ", \"mamba_d_conv\": -4", "mamba_d_conv: -4 is out of range"},
        {"bamba", ", \"mamba_n_heads\": 0", "mamba_n_heads: must be positive, got 0"},
        {"mamba2", ", \"n_groups\": 3", "n_groups: 3 groups do not divide the 128 Mamba heads (num_heads)"},
        {"mamba2", "", "num_heads: 128 heads x head_dim 64 is not hidden_size x expand 128"},
        {"mamba2", ", \"num_heads\": 2, \"n_groups\": 1, \"head_dim\": 0", "head_dim: must be positive, got 0"},
        {"mamba2", ", \"state_size\": 0", "state_size: must be positive, got 0"},
        {"mamba", ", \"time_step_rank\": \"big\"", "time_step_rank: expected a whole number or \"auto\", got \"big\""},
        {"mamba", ", \"time_step_rank\": 0", "time_step_rank: must be positive, got 0"},
        {"mamba", ", \"intermediate_size\": 0", "intermediate_size: must be positive, got 0"},
        {"falcon_mamba", ", \"conv_kernel\": 0", "conv_kernel: must be positive, got 0"},
        {"falcon_mamba", ", \"expand\": -2", "expand: -2 is out of range"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        refused(cfg1(cases[k].type, 8, cases[k].extra), "ssm.json", cases[k].want);
    /* the same shapes that divide load */
    int rc = op_model_from_hf_json(cfg1("falcon_h1", 8, ", \"mamba_n_heads\": 6, \"mamba_n_groups\": 3"),
                                   "ssm.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc == OP_OK) op_model_free(&m);
}

/* Grouped-query attention shares each KV head among heads / kv query heads: a KV head count
 * above the heads or not dividing them is a typo, not a model. */
TEST(bad_kv_heads) {
    static const struct { const char *type, *kv, *want; } cases[] = {
        {"llama", "3", "num_key_value_heads: 3 does not divide the 8 attention heads"},
        {"mistral", "16", "num_key_value_heads: 16 is more than the 8 attention heads"},
        {"zamba2", "16", "num_key_value_heads: 16 is more than the 8 attention heads"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char x[128];
        snprintf(x, sizeof x, ", \"num_key_value_heads\": %s, \"layers_block_type\": [\"hybrid\"]", cases[k].kv);
        refused(cfg1(cases[k].type, 8, x), "kv.json", cases[k].want);
    }
    int rc = op_model_from_hf_json(cfg1("llama", 8, ", \"num_key_value_heads\": 2"), "kv.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc == OP_OK) { /* a failed load leaves no layers to read */
        CHECK_EQ_INT(m.layers[1].n_kv_heads, 2);
        op_model_free(&m);
    }
    /* num_key_value_heads absent: the model type's default must fit the heads given */
    static const struct { const char *type; int heads; const char *extra, *want; } defaults[] = {
        {"mistral", 4, "", "num_attention_heads: 4 is fewer than 8, the default num_key_value_heads"},
        {"gemma", 4, "", "num_attention_heads: 4 is fewer than 16, the default num_key_value_heads"},
        {"qwen3_next", 3, ", \"full_attention_interval\": 1",
         "num_attention_heads: 3 is not a multiple of 2, the default num_key_value_heads"},
        {"jamba", 4, ", \"attn_layer_period\": 1, \"attn_layer_offset\": 0", "num_attention_heads: 4 is fewer than 8"},
        {"nemotron_h", 4, ", \"hybrid_override_pattern\": \"*\"", "num_attention_heads: 4 is fewer than 8"},
        {"falcon_h1", 4, "", "num_attention_heads: 4 is fewer than 8"},
        {"minimax", 4, ", \"attn_type_list\": [1]", "num_attention_heads: 4 is fewer than 8"},
        {"llama4_text", 4, "", "num_attention_heads: 4 is fewer than 8"},
        {"gpt_oss", 4, "", "num_attention_heads: 4 is fewer than 8"},
        {"bamba", 4, ", \"attn_layer_indices\": [0]", "num_attention_heads: 4 is fewer than 8"},
    };
    for (size_t k = 0; k < sizeof defaults / sizeof defaults[0]; k++) {
        refused(cfg1(defaults[k].type, defaults[k].heads, defaults[k].extra), "kvd.json", defaults[k].want);
        CHECK_STR_CONTAINS(e.msg, "(num_key_value_heads is absent; give it)");
    }
    /* null: as many KV heads as heads (the config classes resolve None so), not the default */
    for (size_t k = 0; k < sizeof defaults / sizeof defaults[0]; k++) {
        char x[160];
        snprintf(x, sizeof x, "%s, \"num_key_value_heads\": null", defaults[k].extra);
        int rn = op_model_from_hf_json(cfg1(defaults[k].type, defaults[k].heads, x), "kvn.json", &m, &e);
        CHECK_MSG(rn == OP_OK, "%s: %s", defaults[k].type, e.msg);
        if (rn != OP_OK) continue;
        int found = 0;
        for (int i = 0; i < m.n_layers; i++)
            if (m.layers[i].n_heads > 0) {
                CHECK_MSG(m.layers[i].n_kv_heads == defaults[k].heads, "%s: layer %d has %d KV heads",
                          defaults[k].type, i, m.layers[i].n_kv_heads);
                found = 1;
            }
        CHECK_MSG(found, "%s: no attention layer", defaults[k].type);
        op_model_free(&m);
    }
    CHECK(op_model_from_hf_json("{\"model_type\": \"mistral\", \"hidden_size\": 96, \"num_hidden_layers\": 1,"
                                " \"vocab_size\": 10, \"num_attention_heads\": 12, \"intermediate_size\": 8}",
                                "kvd.json", &m, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "kvd.json: num_attention_heads: 12 is not a multiple of 8, the default "
                              "num_key_value_heads of this model type (num_key_value_heads is absent; give it)");
    if (op_model_from_hf_json("{\"model_type\": \"mistral\", \"hidden_size\": 64, \"num_hidden_layers\": 1,"
                              " \"vocab_size\": 10, \"num_attention_heads\": 16, \"intermediate_size\": 8}",
                              "kvd.json", &m, &e) == OP_OK) {
        CHECK_EQ_INT(m.layers[1].n_kv_heads, 8);
        op_model_free(&m);
    } else {
        CHECK_MSG(0, "mistral with 16 heads and the default 8 KV heads: %s", e.msg);
    }
    /* head_dim derived as 0: the head count is what is wrong, not a head_dim never given */
    CHECK(op_model_from_hf_json("{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 1,"
                                " \"vocab_size\": 10, \"num_attention_heads\": 128, \"intermediate_size\": 8}",
                                "h.json", &m, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "h.json: num_attention_heads: 128 heads are more than hidden_size 64");
}

/* Lists of layer indices (0-based, as transformers reads them) name layers of the model: an
 * entry past the last layer, below 0 or not a whole number is a typo, never "no layer". */
TEST(bad_layer_lists) {
#define DENSE6 "\"hidden_size\": 64, \"num_hidden_layers\": 6, \"vocab_size\": 10, \"num_attention_heads\": 8," \
               " \"intermediate_size\": 8"
    static const struct { const char *json, *want; } cases[] = {
        {"{\"model_type\": \"qwen2_moe\", " DENSE6 ", \"mlp_only_layers\": [6]}",
         "ll.json: mlp_only_layers: entry [0] is 6, outside 0..5 (num_hidden_layers is 6)"},
        {"{\"model_type\": \"qwen3_moe\", " DENSE6 ", \"mlp_only_layers\": [1, -1]}",
         "ll.json: mlp_only_layers: entry [1] is -1, outside 0..5"},
        {"{\"model_type\": \"qwen2_moe\", " DENSE6 ", \"mlp_only_layers\": [1.5]}",
         "ll.json: mlp_only_layers: entry [0] is 1.5, expected an integer"},
        {"{\"model_type\": \"qwen2_moe\", " DENSE6 ", \"mlp_only_layers\": [\"2\"]}",
         "ll.json: mlp_only_layers: entry [0] is a string, expected an integer"},
        /* a sparse step past the last layer reads no layer from the list: still checked */
        {"{\"model_type\": \"qwen2_moe\", " DENSE6 ", \"decoder_sparse_step\": 8, \"mlp_only_layers\": [9]}",
         "ll.json: mlp_only_layers: entry [0] is 9, outside 0..5"},
        {"{\"model_type\": \"qwen3_next\", " DENSE6 ", \"mlp_only_layers\": [0, 60]}",
         "ll.json: mlp_only_layers: entry [1] is 60, outside 0..5"},
        {"{\"model_type\": \"llama4_text\", " DENSE6 ", \"moe_layers\": [1, 6]}",
         "ll.json: moe_layers: entry [1] is 6, outside 0..5 (num_hidden_layers is 6)"},
        {"{\"model_type\": \"llama4\", \"text_config\": {" DENSE6 ", \"moe_layers\": [7]}}",
         "ll.json: text_config.moe_layers: entry [0] is 7, outside 0..5 (text_config.num_hidden_layers is 6)"},
        {"{\"model_type\": \"zamba2\", " DENSE6 ", \"hybrid_layer_ids\": [2, 6]}",
         "ll.json: hybrid_layer_ids: entry [1] is 6, outside 0..5"},
        {"{\"model_type\": \"bamba\", " DENSE6 ", \"attn_layer_indices\": [3, 6]}",
         "ll.json: attn_layer_indices: entry [1] is 6, outside 0..5 (num_hidden_layers is 6)"},
        {"{\"model_type\": \"bamba\", " DENSE6 ", \"attn_layer_indices\": [-1]}",
         "ll.json: attn_layer_indices: entry [0] is -1, outside 0..5"},
        {"{\"model_type\": \"bamba\", " DENSE6 ", \"attn_layer_indices\": [\"3\"]}",
         "ll.json: attn_layer_indices: entry [0] is a string, expected an integer"},
        {"{\"model_type\": \"granitemoehybrid\", " DENSE6 ", \"shared_intermediate_size\": 8,"
         " \"layer_types\": [\"mamba\", \"attention\"]}",
         "ll.json: layer_types: has 2 entries but the model has 6 layers"},
        {"{\"model_type\": \"granitemoehybrid\", " DENSE6 ", \"shared_intermediate_size\": 8,"
         " \"layer_types\": [\"mamba\", \"mamba\", \"sliding_attention\", \"mamba\", \"mamba\", \"mamba\"]}",
         "ll.json: layer_types: entry [2]: unknown layer type 'sliding_attention' (expected \"mamba\" or \"attention\")"},
        {"{\"model_type\": \"granitemoehybrid\", " DENSE6 ", \"shared_intermediate_size\": 8,"
         " \"layers_block_type\": [\"mamba\", \"mamba\", \"mamba\", \"mamba\", \"mamba\", 1]}",
         "ll.json: layers_block_type: entry [5] is an integer, expected a string"},
        /* per-layer flags: one entry per layer, each 0 or 1 */
        {"{\"model_type\": \"llama4_text\", " DENSE6 ", \"no_rope_layers\": [1, 1, 1, \"no\", 1, 1]}",
         "ll.json: no_rope_layers: entry [3]: expected 0 (NoPE) or 1 (RoPE)"},
        {"{\"model_type\": \"llama4_text\", " DENSE6 ", \"no_rope_layers\": [1, 1, 1, 2, 1, 1]}",
         "ll.json: no_rope_layers: entry [3]: expected 0 (NoPE) or 1 (RoPE)"},
        {"{\"model_type\": \"llama4_text\", " DENSE6 ", \"no_rope_layers\": [1, 1, 1, 0]}",
         "ll.json: no_rope_layers: has 4 entries but the model has 6 layers"},
        {"{\"model_type\": \"minimax\", " DENSE6 ", \"attn_type_list\": [0, 0, 0, 0, 0, 0.5]}",
         "ll.json: attn_type_list: entry [5]: expected 0 (linear) or 1 (softmax)"},
        /* a bare NaN (Python's json writes it) is no number: it once read as 0, layer 0 */
        {"{\"model_type\": \"qwen2_moe\", " DENSE6 ", \"mlp_only_layers\": [1, NaN]}",
         "ll.json: mlp_only_layers: entry [1] is NaN, expected an integer"},
        {"{\"model_type\": \"llama4_text\", " DENSE6 ", \"no_rope_layers\": [1, 1, NaN, 1, 1, 1]}",
         "ll.json: no_rope_layers: entry [2] is NaN: expected 0 (NoPE) or 1 (RoPE)"},
        {"{\"model_type\": \"qwen2_moe\", " DENSE6 ", \"shared_expert_intermediate_size\": NaN}",
         "ll.json: shared_expert_intermediate_size: expected an integer, got NaN"},
        {"{\"model_type\": NaN, " DENSE6 "}", "ll.json: model_type: expected a string"},
        /* ernie4_5_moe: the MoE layer range inside the layers, top-k within the experts */
        {"{\"model_type\": \"ernie4_5_moe\", " DENSE6 ", \"moe_layer_start_index\": 6}",
         "ll.json: moe_layer_start_index: 6 is past the last layer (num_hidden_layers 6)"},
        {"{\"model_type\": \"ernie4_5_moe\", " DENSE6 ", \"moe_layer_end_index\": 9}",
         "ll.json: moe_layer_end_index: 9 is past the last layer (num_hidden_layers 6)"},
        {"{\"model_type\": \"ernie4_5_moe\", " DENSE6 ", \"moe_layer_end_index\": -2}",
         "ll.json: moe_layer_end_index: -2: expected a layer index or -1 (the last layer)"},
        {"{\"model_type\": \"ernie4_5_moe\", " DENSE6 ", \"moe_layer_interval\": 0}",
         "ll.json: moe_layer_interval: must be positive, got 0"},
        {"{\"model_type\": \"ernie4_5_moe\", " DENSE6 ", \"moe_num_experts\": 4, \"moe_k\": 5}",
         "ll.json: moe_k: 5 is more than the 4 experts (moe_num_experts)"},
        {"{\"model_type\": \"ernie4_5_moe\", " DENSE6 ", \"moe_num_experts\": 0}",
         "ll.json: moe_num_experts: must be positive, got 0"},
        {"{\"model_type\": \"ernie4_5_moe\", " DENSE6 ", \"moe_intermediate_size\": 0}",
         "ll.json: moe_intermediate_size: must be positive, got 0"},
        {"{\"model_type\": \"ernie4_5_moe\", \"hidden_size\": 64, \"num_hidden_layers\": 2}",
         "ll.json: missing required field 'intermediate_size'"},
        /* hunyuan_v1_moe: moe_topk one value or one per layer, each within num_experts */
        {"{\"model_type\": \"hunyuan_v1_moe\", " DENSE6 ", \"num_experts\": 4, \"moe_topk\": 5}",
         "ll.json: moe_topk: 5 is more than the 4 experts (num_experts)"},
        {"{\"model_type\": \"hunyuan_v1_moe\", " DENSE6 ", \"num_experts\": 4, \"moe_topk\": [1, 1, 1, 1, 1, 9]}",
         "ll.json: moe_topk: entry [5]: 9; expected 1..4 (num_experts)"},
        {"{\"model_type\": \"hunyuan_v1_moe\", " DENSE6 ", \"num_experts\": 4, \"moe_topk\": [1, 1]}",
         "ll.json: moe_topk: has 2 entries but the model has 6 layers"},
        {"{\"model_type\": \"hunyuan_v1_moe\", " DENSE6 ", \"num_experts\": 4, \"moe_topk\": [1, 1, \"2\", 1, 1, 1]}",
         "ll.json: moe_topk: entry [2]: expected a positive integer"},
        {"{\"model_type\": \"hunyuan_v1_moe\", " DENSE6 ", \"num_experts\": 4, \"moe_topk\": [1, 1, 0, 1, 1, 1]}",
         "ll.json: moe_topk: entry [2]: 0; expected 1..4 (num_experts)"},
        {"{\"model_type\": \"hunyuan_v1_moe\", " DENSE6 ", \"num_experts\": 0}",
         "ll.json: num_experts: must be positive, got 0"},
        {"{\"model_type\": \"hunyuan_v1_moe\", " DENSE6 ", \"num_experts\": [4, 4, 4, 4, 4, 4]}",
         "ll.json: num_experts: expected an integer, got "},
        {"{\"model_type\": \"hunyuan_v1_moe\", \"hidden_size\": 64, \"intermediate_size\": 8}",
         "ll.json: missing required field 'num_hidden_layers'"},
        /* minimax_m2: experts and top-k */
        {"{\"model_type\": \"minimax_m2\", " DENSE6 ", \"num_local_experts\": 4, \"num_experts_per_tok\": 5}",
         "ll.json: num_experts_per_tok: 5 is more than the 4 experts (num_local_experts)"},
        {"{\"model_type\": \"minimax_m2\", " DENSE6 ", \"num_local_experts\": 0}",
         "ll.json: num_local_experts: must be positive, got 0"},
        {"{\"model_type\": \"minimax_m2\", " DENSE6 ", \"head_dim\": 0}",
         "ll.json: head_dim: must be positive, got 0"},
        /* olmo3: layer_types entries and their window */
        {"{\"model_type\": \"olmo3\", " DENSE6 ", \"layer_types\": [\"full_attention\", \"sliding_attention\","
         " \"full_attention\", \"full_attention\", \"global\", \"full_attention\"]}",
         "ll.json: layer_types: entry [4]: unknown layer type 'global'"},
        {"{\"model_type\": \"olmo3\", " DENSE6 ", \"sliding_window\": null, \"layer_types\": [\"full_attention\","
         " \"sliding_attention\", \"full_attention\", \"full_attention\", \"full_attention\", \"full_attention\"]}",
         "ll.json: layer_types: entry [1] is 'sliding_attention' but the config sets no window size"},
        {"{\"model_type\": \"olmo2\", " DENSE6 ", \"num_key_value_heads\": 3}",
         "ll.json: num_key_value_heads: 3 does not divide the 8 attention heads"},
        /* exaone4: sliding_window_pattern an integer or L / G letters */
        {"{\"model_type\": \"exaone4\", " DENSE6 ", \"sliding_window_pattern\": 0}",
         "ll.json: sliding_window_pattern: must be positive, got 0"},
        {"{\"model_type\": \"exaone4\", " DENSE6 ", \"sliding_window_pattern\": \"LLX\"}",
         "ll.json: sliding_window_pattern: 'LLX': expected 'L' (local) and 'G' (global) letters"},
        {"{\"model_type\": \"exaone4\", " DENSE6 ", \"layer_types\": \"LLLG\"}",
         "ll.json: layer_types: expected an array, got "},
        /* smollm3: no_rope_layers flags, one per layer; a positive interval */
        {"{\"model_type\": \"smollm3\", " DENSE6 ", \"no_rope_layers\": [1, 1, 2, 1, 1, 1]}",
         "ll.json: no_rope_layers: entry [2]: expected 0 (NoPE) or 1 (RoPE)"},
        {"{\"model_type\": \"smollm3\", " DENSE6 ", \"no_rope_layers\": [1, 1]}",
         "ll.json: no_rope_layers: has 2 entries but the model has 6 layers"},
        {"{\"model_type\": \"smollm3\", " DENSE6 ", \"no_rope_layer_interval\": 0}",
         "ll.json: no_rope_layer_interval: must be positive, got 0"},
        {"{\"model_type\": \"seed_oss\", " DENSE6 ", \"head_dim\": -4}",
         "ll.json: head_dim: -4 is out of range"},
        /* glm4_moe: no more dense layers than layers */
        {"{\"model_type\": \"glm4_moe\", " DENSE6 ", \"first_k_dense_replace\": 7}",
         "ll.json: first_k_dense_replace: 7 is more than the 6 layers (num_hidden_layers)"},
        {"{\"model_type\": \"glm4_moe\", " DENSE6 ", \"first_k_dense_replace\": -1}",
         "ll.json: first_k_dense_replace: -1 is out of range"},
        {"{\"model_type\": \"glm4_moe\", " DENSE6 ", \"num_nextn_predict_layers\": 65}",
         "ll.json: num_nextn_predict_layers: 65; expected 0..64"},
        {"{\"model_type\": \"glm4_moe\", " DENSE6 ", \"partial_rotary_factor\": 0}",
         "ll.json: partial_rotary_factor: must be in (0, 1], got 0"},
        {"{\"model_type\": \"glm4_moe\", " DENSE6 ", \"use_qk_norm\": \"yes\"}", "ll.json: use_qk_norm: "},
        {"{\"model_type\": \"glm4_moe\", \"num_hidden_layers\": 6, \"intermediate_size\": 8}",
         "ll.json: missing required field 'hidden_size'"},
        {"{\"model_type\": \"olmoe\", \"hidden_size\": 64, \"num_hidden_layers\": 2}",
         "ll.json: missing required field 'intermediate_size'"},
        {"{\"model_type\": \"phimoe\", \"hidden_size\": 0, \"num_hidden_layers\": 2, \"intermediate_size\": 8}",
         "ll.json: hidden_size: must be positive, got 0"},
        /* qwen2_5_vl's vision encoder */
        {"{\"model_type\": \"qwen2_5_vl\", " DENSE6 ", \"vision_config\": {\"depth\": 4, \"hidden_size\": 32,"
         " \"num_heads\": 2, \"intermediate_size\": 64, \"out_hidden_size\": 64, \"fullatt_block_indexes\": [1, 4]}}",
         "ll.json: vision_config.fullatt_block_indexes: entry [1] is 4, outside 0..3 (vision_config.depth is 4)"},
        {"{\"model_type\": \"qwen2_5_vl\", " DENSE6 ", \"vision_config\": {\"depth\": 4, \"hidden_size\": 32,"
         " \"num_heads\": 2, \"intermediate_size\": 64, \"out_hidden_size\": 64, \"fullatt_block_indexes\": [-1]}}",
         "ll.json: vision_config.fullatt_block_indexes: entry [0] is -1, outside 0..3"},
        {"{\"model_type\": \"qwen2_5_vl\", " DENSE6 ", \"vision_config\": {\"depth\": 4, \"hidden_size\": 32,"
         " \"num_heads\": 2, \"intermediate_size\": 64, \"out_hidden_size\": 64, \"fullatt_block_indexes\": 3}}",
         "ll.json: vision_config.fullatt_block_indexes: expected an array"},
        {"{\"model_type\": \"qwen2_5_vl\", " DENSE6 ", \"vision_config\": {\"depth\": 4, \"hidden_size\": 32,"
         " \"num_heads\": 2, \"intermediate_size\": 64, \"out_hidden_size\": 64, \"window_size\": 20}}",
         "ll.json: vision_config.window_size: 20 px is less than patch_size 14 x spatial_merge_size 2"},
        {"{\"model_type\": \"qwen2_5_vl\", " DENSE6 ", \"vision_config\": {\"depth\": 4, \"hidden_size\": 32,"
         " \"num_heads\": 2, \"intermediate_size\": 64, \"out_hidden_size\": 64, \"window_size\": 0}}", "ll.json: vision_config.window_size: must be positive, got 0"},
        {"{\"model_type\": \"qwen2_5_vl\", " DENSE6 ", \"vision_config\": {\"depth\": 4, \"hidden_size\": 32,"
         " \"num_heads\": 2, \"intermediate_size\": 64, \"out_hidden_size\": 64, \"intermediate_size\": 0}}",
         "ll.json: vision_config.intermediate_size: must be positive, got 0"},
        {"{\"model_type\": \"qwen2_5_vl\", " DENSE6 ", \"vision_config\": {\"depth\": 2, \"hidden_size\": 32,"
         " \"num_heads\": 2, \"intermediate_size\": 64, \"out_hidden_size\": 96}}",
         "ll.json: vision_config.out_hidden_size: 96 differs from the language model's hidden_size 64"},
        {"{\"model_type\": \"qwen2_5_vl\", " DENSE6 ", \"vision_config\": {\"depth\": 2, \"hidden_size\": 32,"
         " \"num_heads\": 2, \"intermediate_size\": 64}}",
         "out_hidden_size: 3584 differs from the language model's hidden_size 64 (the merger's output takes "
         "the place of image tokens); the default is 3584: give it"},
        {"{\"model_type\": \"qwen2_5_vl\", " DENSE6 ", \"vision_config\": {\"depth\": 2, \"hidden_size\": 30,"
         " \"num_heads\": 4, \"intermediate_size\": 64, \"out_hidden_size\": 64}}",
         "ll.json: vision_config.num_heads: 4 does not divide hidden_size 30"},
        {"{\"model_type\": \"qwen2_5_vl\", " DENSE6 ", \"vision_config\": {\"depth\": 0}}",
         "ll.json: vision_config.depth: 0 layers; expected 1..2000"},
        {"{\"model_type\": \"qwen2_5_vl\", " DENSE6 ", \"tie_word_embeddings\": 2}", "ll.json: tie_word_embeddings: "},
        /* qwen3_vl / qwen3_vl_moe: DeepStack blocks, the merger's width, the text model */
        {"{\"model_type\": \"qwen3_vl\", " DENSE6 ", \"vision_config\": {\"depth\": 4, \"hidden_size\": 32, \"num_heads\": 2, \"out_hidden_size\": 64, \"deepstack_visual_indexes\": [1, 4]}}",
         "ll.json: vision_config.deepstack_visual_indexes: entry [1] is 4, outside 0..3 (vision_config.depth is 4)"},
        {"{\"model_type\": \"qwen3_vl\", " DENSE6 ", \"vision_config\": {\"depth\": 4, \"hidden_size\": 32, \"num_heads\": 2, \"out_hidden_size\": 64, \"deepstack_visual_indexes\": [-1]}}",
         "ll.json: vision_config.deepstack_visual_indexes: entry [0] is -1, outside 0..3"},
        {"{\"model_type\": \"qwen3_vl\", " DENSE6 ", \"vision_config\": {\"depth\": 4, \"hidden_size\": 32, \"num_heads\": 2, \"out_hidden_size\": 64, \"deepstack_visual_indexes\": [2, 2]}}",
         "ll.json: vision_config.deepstack_visual_indexes: entry [1] is 2, listed before as entry [0]"},
        {"{\"model_type\": \"qwen3_vl\", " DENSE6 ", \"vision_config\": {\"depth\": 4, \"hidden_size\": 32, \"num_heads\": 2, \"out_hidden_size\": 64, \"deepstack_visual_indexes\": 1}}",
         "ll.json: vision_config.deepstack_visual_indexes: expected an array"},
        {"{\"model_type\": \"qwen3_vl\", " DENSE6 ", \"vision_config\": {\"depth\": 4, \"hidden_size\": 32, \"num_heads\": 2, \"out_hidden_size\": 64}}",
         "ll.json: vision_config.deepstack_visual_indexes: absent, and its default [8, 16, 24] names block 8, "
         "outside 0..3 (vision_config.depth is 4); give it"},
        {"{\"model_type\": \"qwen3_vl_moe\", " DENSE6 ", \"vision_config\": {\"depth\": 2, \"hidden_size\": 32,"
         " \"num_heads\": 2, \"out_hidden_size\": 96, \"deepstack_visual_indexes\": []}}",
         "ll.json: vision_config.out_hidden_size: 96 differs from the language model's hidden_size 64"},
        {"{\"model_type\": \"qwen3_vl\", " DENSE6 ", \"vision_config\": {\"depth\": 27}}",
         "out_hidden_size: 3584 differs from the language model's hidden_size 64 (the merger's output takes "
         "the place of image tokens); the default is 3584: give it"},
        {"{\"model_type\": \"qwen3_vl\", " DENSE6 ", \"vision_config\": {\"depth\": 4, \"hidden_size\": 32, \"num_heads\": 2, \"out_hidden_size\": 64, \"num_position_embeddings\": 0}}",
         "ll.json: vision_config.num_position_embeddings: must be positive, got 0"},
        {"{\"model_type\": \"qwen3_vl\", " DENSE6 ", \"vision_config\": {\"depth\": 4, \"hidden_size\": 32, \"num_heads\": 2, \"out_hidden_size\": 64, \"intermediate_size\": 0}}",
         "ll.json: vision_config.intermediate_size: must be positive, got 0"},
        {"{\"model_type\": \"qwen3_vl\", " DENSE6 ", \"vision_config\": {\"depth\": 4, \"hidden_size\": 32, \"num_heads\": 2, \"out_hidden_size\": 64, \"patch_size\": 300, \"deepstack_visual_indexes\": []}}",
         "ll.json: vision_config.patch_size: patch 300 x merge 2 does not fit a 448 px image"},
        {"{\"model_type\": \"qwen3_vl\", " DENSE6 ", \"vision_config\": {\"depth\": 2, \"hidden_size\": 30,"
         " \"num_heads\": 4, \"out_hidden_size\": 64, \"deepstack_visual_indexes\": []}}",
         "ll.json: vision_config.num_heads: 4 does not divide hidden_size 30"},
        {"{\"model_type\": \"qwen3_vl\", " DENSE6 ", \"vision_config\": {\"depth\": 0}}",
         "ll.json: vision_config.depth: 0 layers; expected 1..2000"},
        {"{\"model_type\": \"qwen3_vl\", " DENSE6 ", \"vision_config\": 3}",
         "ll.json: vision_config: expected an object"},
        {"{\"model_type\": \"qwen3_vl\", \"text_config\": {\"num_hidden_layers\": 2, \"intermediate_size\": 8}}",
         "ll.json: missing required field 'text_config.hidden_size'"},
        {"{\"model_type\": \"qwen3_vl\", \"text_config\": {\"hidden_size\": 64, \"num_hidden_layers\": 2,"
         " \"intermediate_size\": 0}, \"vision_config\": {\"depth\": 2, \"hidden_size\": 32, \"num_heads\": 2, \"out_hidden_size\": 64, \"deepstack_visual_indexes\": []}}",
         "ll.json: text_config.intermediate_size: must be positive, got 0"},
        {"{\"model_type\": \"qwen3_vl\", " DENSE6 ", \"tie_word_embeddings\": \"no\"}", "ll.json: tie_word_embeddings: "},
        {"{\"model_type\": \"qwen3_vl_moe\", " DENSE6 ", \"num_experts\": 4, \"num_experts_per_tok\": 5, \"vision_config\": {\"depth\": 2, \"hidden_size\": 32, \"num_heads\": 2, \"out_hidden_size\": 64, \"deepstack_visual_indexes\": []}}",
         "ll.json: num_experts_per_tok: 5 is more than the 4 experts"},
        {"{\"model_type\": \"qwen3_vl_moe\", " DENSE6 ", \"num_experts_per_tok\": 0, \"vision_config\": {\"depth\": 2, \"hidden_size\": 32, \"num_heads\": 2, \"out_hidden_size\": 64, \"deepstack_visual_indexes\": []}}",
         "ll.json: num_experts_per_tok: must be positive, got 0"},
        {"{\"model_type\": \"qwen3_vl_moe\", " DENSE6 ", \"moe_intermediate_size\": 0, \"vision_config\": {\"depth\": 2, \"hidden_size\": 32, \"num_heads\": 2, \"out_hidden_size\": 64, \"deepstack_visual_indexes\": []}}",
         "ll.json: moe_intermediate_size: must be positive"},
    };
#undef DENSE6
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) refused(cases[k].json, "ll.json", cases[k].want);
    /* NaN and Infinity where the model reads nothing still load (NVIDIA's configs write them) */
    op_model nm;
    op_err ne = {0};
    CHECK_EQ_INT(op_model_from_hf_json("{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 2,"
                                       " \"vocab_size\": 10, \"num_attention_heads\": 4, \"intermediate_size\": 8,"
                                       " \"rope_theta\": NaN, \"time_step_limit\": [0.0, Infinity]}",
                                       "nan.json", &nm, &ne),
                 OP_OK);
    if (ne.code == 0) op_model_free(&nm);
    /* a whole number written as a real names its layer, as Python's `in` reads it */
    int rc = op_model_from_hf_json("{\"model_type\": \"qwen2_moe\", \"hidden_size\": 64, \"num_hidden_layers\": 2,"
                                   " \"vocab_size\": 10, \"num_attention_heads\": 4, \"intermediate_size\": 8,"
                                   " \"mlp_only_layers\": [1.0]}",
                                   "ll.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc != OP_OK) return;
    CHECK_EQ_INT(m.layers[1].ffn, OP_FFN_MOE);
    CHECK_EQ_INT(m.layers[2].ffn, OP_FFN_MLP);
    op_model_free(&m);
}

/* falcon_h1's mamba_d_head is a number or "auto" (derived from the SSM width); transformers
 * takes no other text. */
TEST(falcon_mamba_d_head) {
    refused(cfg1("falcon_h1", 8, ", \"mamba_d_head\": \"automatic\""), "f.json",
            "f.json: mamba_d_head: expected a whole number or \"auto\", got \"automatic\"");
    int rc = op_model_from_hf_json(cfg1("falcon_h1", 8, ", \"mamba_d_head\": \"auto\""), "f.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc == OP_OK) op_model_free(&m);
}

/* Widths a config leaves derived (width / count) that come out 0 name the count: they loaded
 * as head widths of 0 (vision towers, zamba2's shared attention), Mamba heads of width 0
 * (falcon_h1) or no Mamba heads at all (zamba2). */
TEST(bad_derived_zero_widths) {
    static const struct { const char *json, *want; } cases[] = {
        {"{\"model_type\": \"qwen2_vl\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"vocab_size\": 10,"
         " \"num_attention_heads\": 8, \"intermediate_size\": 8, \"vision_config\": {\"depth\": 1,"
         " \"embed_dim\": 128, \"num_heads\": 10000}}",
         "dz.json: vision_config.num_heads: 10000 is more than embed_dim 128 (head_dim = embed_dim / "
         "num_heads would be 0)"},
        {"{\"model_type\": \"gemma3\", \"text_config\": {\"hidden_size\": 64, \"num_hidden_layers\": 1,"
         " \"num_attention_heads\": 8, \"intermediate_size\": 8}, \"vision_config\": {\"num_hidden_layers\": 1,"
         " \"hidden_size\": 2, \"num_attention_heads\": 16}}",
         "dz.json: vision_config.num_attention_heads: 16 is more than hidden_size 2"},
        {"{\"model_type\": \"llama4\", \"text_config\": {\"hidden_size\": 64, \"num_hidden_layers\": 1,"
         " \"num_attention_heads\": 8, \"num_key_value_heads\": 8}, \"vision_config\": {\"num_hidden_layers\": 1,"
         " \"hidden_size\": 8, \"num_attention_heads\": 16}}",
         "dz.json: vision_config.num_attention_heads: 16 is more than hidden_size 8"},
        {"{\"model_type\": \"zamba2\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"vocab_size\": 10,"
         " \"num_attention_heads\": 256, \"hybrid_layer_ids\": [0]}",
         "dz.json: num_attention_heads: 256 is more than attention_hidden_size 128 (attention_head_dim ="},
        {"{\"model_type\": \"zamba2\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"vocab_size\": 10,"
         " \"num_attention_heads\": 8, \"hybrid_layer_ids\": [0], \"mamba_headdim\": 1024}",
         "dz.json: mamba_headdim: 1024 is more than mamba_expand x hidden_size 128 (n_mamba_heads ="},
        {"{\"model_type\": \"falcon_h1\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"vocab_size\": 10,"
         " \"num_attention_heads\": 8, \"intermediate_size\": 8, \"mamba_d_ssm\": 4, \"mamba_n_heads\": 8}",
         "dz.json: mamba_n_heads: 8 is more than mamba_d_ssm 4 (mamba_d_head = mamba_d_ssm / mamba_n_heads"},
        {"{\"model_type\": \"falcon_h1\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"vocab_size\": 10,"
         " \"num_attention_heads\": 8, \"intermediate_size\": 8, \"mamba_d_ssm\": 4, \"mamba_n_heads\": 8,"
         " \"mamba_d_head\": \"auto\"}",
         "dz.json: mamba_n_heads: 8 is more than mamba_d_ssm 4"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) refused(cases[k].json, "dz.json", cases[k].want);
    /* a vision encoder's heads must divide its width (its loaders refuse the config): 3 heads on
     * 128 loaded as heads of width 42 */
    refused("{\"model_type\": \"qwen2_vl\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"vocab_size\": 10,"
            " \"num_attention_heads\": 8, \"intermediate_size\": 8, \"vision_config\": {\"depth\": 1,"
            " \"embed_dim\": 128, \"num_heads\": 3}}",
            "dz.json", "dz.json: vision_config.num_heads: 3 does not divide embed_dim 128");
    refused("{\"model_type\": \"gemma3\", \"text_config\": {\"hidden_size\": 64, \"num_hidden_layers\": 1,"
            " \"num_attention_heads\": 8, \"intermediate_size\": 8}, \"vision_config\": {\"num_hidden_layers\": 1,"
            " \"hidden_size\": 1152, \"num_attention_heads\": 5}}",
            "dz.json", "dz.json: vision_config.num_attention_heads: 5 does not divide hidden_size 1152");
    /* given explicitly, the widths stand as given */
    static const char *const ok[] = {
        "{\"model_type\": \"falcon_h1\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"vocab_size\": 10,"
        " \"num_attention_heads\": 8, \"intermediate_size\": 8, \"mamba_d_ssm\": 4, \"mamba_n_heads\": 8,"
        " \"mamba_d_head\": 2}",
        "{\"model_type\": \"falcon_h1\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"vocab_size\": 10,"
        " \"num_attention_heads\": 8, \"intermediate_size\": 8, \"mamba_n_heads\": 8, \"mamba_d_head\": null}",
        "{\"model_type\": \"zamba2\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"vocab_size\": 10,"
        " \"num_attention_heads\": 256, \"hybrid_layer_ids\": [0], \"attention_head_dim\": 4,"
        " \"mamba_headdim\": 1024, \"n_mamba_heads\": 1}",
    };
    for (size_t k = 0; k < sizeof ok / sizeof ok[0]; k++) {
        int rc = op_model_from_hf_json(ok[k], "dz.json", &m, &e);
        CHECK_MSG(rc == OP_OK, "%s", e.msg);
        if (rc != OP_OK) continue;
        for (int i = 0; i < m.n_layers; i++)
            if (m.layers[i].ssm_version) CHECK(m.layers[i].ssm_heads > 0 && m.layers[i].ssm_head_dim > 0);
        op_model_free(&m);
    }
}

/* text_config and vision_config are objects (or null / absent): anything else was read past,
 * dropping gemma3's encoder or reading the text model's fields from the top level; a
 * vision_config beside a text_config is named as the top-level key it is. */
TEST(bad_nested_configs) {
    static const struct { const char *json, *want; } cases[] = {
        {"{\"model_type\": \"gemma3\", \"text_config\": {\"hidden_size\": 64, \"num_hidden_layers\": 1,"
         " \"intermediate_size\": 8}, \"vision_config\": [1]}", "nc.json: vision_config: expected an object"},
        {"{\"model_type\": \"llama4\", \"text_config\": {\"hidden_size\": 64, \"num_hidden_layers\": 1,"
         " \"num_attention_heads\": 8, \"num_key_value_heads\": 8}, \"vision_config\": 5}",
         "nc.json: vision_config: expected an object"},
        {"{\"model_type\": \"gemma3\", \"text_config\": \"x\"}", "nc.json: text_config: expected an object"},
        {"{\"model_type\": \"qwen2_vl\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"vocab_size\": 10,"
         " \"num_attention_heads\": 8, \"intermediate_size\": 8, \"text_config\": 5}",
         "nc.json: text_config: expected an object"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        refused(cases[k].json, "nc.json", cases[k].want);
        CHECK_MSG(!strstr(e.msg, "text_config.vision_config"), "%s", e.msg);
    }
    /* null stands for absent */
    int rc = op_model_from_hf_json("{\"model_type\": \"gemma3\", \"text_config\": {\"hidden_size\": 64,"
                                   " \"num_hidden_layers\": 1, \"intermediate_size\": 8}, \"vision_config\": null}",
                                   "nc.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc == OP_OK) op_model_free(&m);
}

/* Booleans are JSON true / false; 0 and 1 (written by some converters) read as Python reads
 * them.  Any other number or a string is no answer to a yes-or-no field. */
TEST(bad_bool_fields) {
    static const struct { const char *type, *field, *want; } cases[] = {
        {"llama", ", \"tie_word_embeddings\": 5", "b.json: tie_word_embeddings: expected true or false, got 5"},
        {"qwen2", ", \"tie_word_embeddings\": -1", "b.json: tie_word_embeddings: expected true or false, got -1"},
        {"qwen2", ", \"use_sliding_window\": \"true\"", "b.json: use_sliding_window: expected true or false, got a string"},
        {"jamba", ", \"tie_word_embeddings\": 1.0", "b.json: tie_word_embeddings: expected true or false, got a number"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        refused(cfg1(cases[k].type, 8, cases[k].field), "b.json", cases[k].want);
    static const struct { const char *v; int tie; } ok[] = {{"true", 1}, {"false", 0}, {"1", 1}, {"0", 0}};
    for (size_t k = 0; k < sizeof ok / sizeof ok[0]; k++) {
        char x[64];
        snprintf(x, sizeof x, ", \"tie_word_embeddings\": %s", ok[k].v);
        int rc = op_model_from_hf_json(cfg1("llama", 8, x), "b.json", &m, &e);
        CHECK_MSG(rc == OP_OK, "%s: %s", ok[k].v, e.msg);
        if (rc != OP_OK) continue;
        CHECK_EQ_INT(m.tie_embeddings, ok[k].tie);
        op_model_free(&m);
    }
}

TEST(profile_octopipe_with_memory) {
    CHECK_MSG(op_model_load(data("profiles/tiny.json"), &m, &e) == OP_OK, "%s", e.msg);
    CHECK(!strcmp(m.pattern, "EM-M*-L")); /* E and L added */
    CHECK(!strcmp(m.model_type, "profile"));
    CHECK(!strcmp(m.name, "tiny"));
    for (int i = 0; i < m.n_layers; i++) CHECK(m.layers[i].has_measured);
    CHECK_NEAR(m.layers[0].f_ms, 0.5, 0);
    CHECK_NEAR(m.layers[0].w_ms, 0.25, 0);
    CHECK_NEAR(m.layers[4].f_ms, 1.25, 0);
    CHECK_NEAR(m.layers[6].i_ms, 2.5, 0);
    CHECK_EQ_INT(m.layers[4].act_bytes_measured, 2097152);
    CHECK_EQ_INT(m.layers[4].param_bytes_measured, 0);
    CHECK_EQ_INT(m.layers[1].param_bytes_measured, 4000000);
    CHECK_EQ_INT(m.layers[3].out_bytes_measured, 65536);
    CHECK_EQ_INT(m.layers[6].vocab, 4000);
    CHECK_EQ_INT(m.layers[2].hidden, 1024);
    CHECK_EQ_INT(m.layers[2].ffn, OP_FFN_MLP);
    op_model_free(&m);
}

TEST(profile_megatron_style) {
    CHECK_MSG(op_model_load(data("profiles/megatron.json"), &m, &e) == OP_OK, "%s", e.msg);
    CHECK_MSG(!strcmp(m.pattern, "EM-M#M*-L"), "%s", m.pattern); /* E = MoE, '|' ignored */
    CHECK_NEAR(m.layers[4].f_ms, 2.3, 1e-12);
    CHECK_NEAR(m.layers[4].w_ms, 0, 0); /* no weight_ms: 0 */
    CHECK_EQ_INT(m.layers[4].ffn, OP_FFN_MOE);
    op_model_free(&m);
}

/* "seq" and "mbs": the batch a profile's times were measured at, both or neither (a problem
 * from such a profile: test_inputs profile_batch_in_problem). */
TEST(profile_measured_batch) {
    const char *base = "{\"pattern\": \"M\", \"forward_ms\": {\"E\": 1, \"M\": 1, \"L\": 1},"
                       " \"backward_ms\": {\"E\": 1, \"M\": 1, \"L\": 1}";
    char js[512];
    snprintf(js, sizeof js, "%s, \"seq\": 2048, \"mbs\": 2}", base);
    int rc = op_model_from_profile_json(js, "p.json", &m, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc == OP_OK) {
        CHECK(m.measured_seq == 2048 && m.measured_mbs == 2);
        op_model_free(&m);
    }
    static const struct { const char *tail, *want; } bad[] = {
        {", \"seq\": 2048}", "p.json: \"seq\" without \"mbs\": give both"},
        {", \"mbs\": 2}", "p.json: \"mbs\" without \"seq\": give both"},
        {", \"seq\": 0, \"mbs\": 1}", "p.json: seq: expected a positive integer"},
        {", \"seq\": 4096, \"mbs\": 100000}", "p.json: seq 4096, mbs 100000: at most"}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        snprintf(js, sizeof js, "%s%s", base, bad[k].tail);
        CHECK_MSG(op_model_from_profile_json(js, "p.json", &m, &e) == OP_EINVAL, "%s", bad[k].tail);
        CHECK_STR_CONTAINS(e.msg, bad[k].want);
    }
    snprintf(js, sizeof js, "%s}", base); /* without them: not said */
    CHECK_EQ_INT(op_model_from_profile_json(js, "p.json", &m, &e), OP_OK);
    CHECK(m.measured_seq == 0 && m.measured_mbs == 0);
    op_model_free(&m);
}

TEST(profile_bad_inputs) {
    CHECK(op_model_load(data("profiles/bad_symbol.json"), &m, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "bad_symbol.json: pattern[6]: unknown symbol 'x'");
    const char *no_star = "{\"pattern\": \"EM*L\", \"forward_ms\": {\"E\": 1, \"M\": 1, \"L\": 1},"
                          " \"backward_ms\": {\"E\": 1, \"M\": 1, \"*\": 1, \"L\": 1}}";
    CHECK(op_model_from_profile_json(no_star, "profile.json", &m, &e) == OP_EINVAL);
    CHECK(!strcmp(e.msg, "profile.json: forward_ms has no time for symbol '*'"));
    const char *typo = "{\"pattern\": \"M\", \"foward_ms\": {}}";
    CHECK(op_model_from_profile_json(typo, "p.json", &m, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "p.json: unknown key 'foward_ms'");
    const char *neg = "{\"pattern\": \"M\", \"forward_ms\": {\"E\": 1, \"M\": -1, \"L\": 1},"
                      " \"backward_ms\": {\"E\": 1, \"M\": 1, \"L\": 1}}";
    CHECK(op_model_from_profile_json(neg, "p.json", &m, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "forward_ms['M']: expected a number >= 0");
    /* recompute_ms is the share of F selective re-runs: 100 ms beside an F of 1.25 was taken */
    const char *rec = "{\"pattern\": \"M*\", \"forward_ms\": {\"E\": 1, \"M\": 1, \"*\": 1.25, \"L\": 1},"
                      " \"backward_ms\": {\"E\": 1, \"M\": 1, \"*\": 1, \"L\": 1}, \"recompute_ms\": {\"*\": 100}}";
    CHECK(op_model_from_profile_json(rec, "p.json", &m, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "p.json: recompute_ms: 100 ms for symbol '*' is more than its forward_ms (1.25 ms)");
    /* a positive time below 1 ns is no measurement: all-denormal times made every makespan
     * 1e-323 ms and tokens/s infinite (compare printed inf, plan wrote no file) */
    const char *tiny = "{\"pattern\": \"M\", \"forward_ms\": {\"E\": 0, \"M\": 5e-324, \"L\": 0},"
                       " \"backward_ms\": {\"E\": 0, \"M\": 0, \"L\": 0}}";
    CHECK(op_model_from_profile_json(tiny, "p.json", &m, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "p.json: forward_ms['M']: 4.94066e-324 ms is below any measurement");
    const char *tiny_gpu = "{\"pattern\": \"M\", \"forward_ms\": {\"E\": 0, \"M\": 1, \"L\": 0},"
                           " \"backward_ms\": {\"E\": 0, \"M\": 0, \"L\": 0}, \"by_gpu\": {\"a100-80gb\":"
                           " {\"forward_ms\": {\"E\": 0, \"M\": 1e-300, \"L\": 0}, \"backward_ms\": {\"E\": 0,"
                           " \"M\": 0, \"L\": 0}}}}";
    CHECK(op_model_from_profile_json(tiny_gpu, "p.json", &m, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "p.json: by_gpu.a100-80gb.forward_ms['M']: 1e-300 ms is below any measurement");
    const char *ns = "{\"pattern\": \"M\", \"forward_ms\": {\"E\": 0, \"M\": 1e-6, \"L\": 0},"
                     " \"backward_ms\": {\"E\": 0, \"M\": 0, \"L\": 0}}";
    int ns_rc = op_model_from_profile_json(ns, "p.json", &m, &e);
    CHECK_MSG(ns_rc == OP_OK, "%s", e.msg);
    if (ns_rc == OP_OK) op_model_free(&m);
    const char *twol = "{\"pattern\": \"EMLM\", \"forward_ms\": {}, \"backward_ms\": {}}";
    CHECK(op_model_from_profile_json(twol, "p.json", &m, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "L once, last");
    const char *mtp = "{\"pattern\": \"M-/MM\", \"pattern_style\": \"megatron\", \"forward_ms\": {}, \"backward_ms\": {}}";
    CHECK(op_model_from_profile_json(mtp, "p.json", &m, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "pattern[2]: MTP patterns");
    const char *wsym = "{\"pattern\": \"M\", \"forward_ms\": {\"Q\": 1}, \"backward_ms\": {}}";
    CHECK(op_model_from_profile_json(wsym, "p.json", &m, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "forward_ms: unknown symbol 'Q'");
    /* a time given twice: which one was measured? (jansson would keep the last silently) */
    const char *twice = "{\"pattern\": \"M\",\n \"forward_ms\": {\"E\": 1, \"M\": 1, \"L\": 1, \"M\": 5},"
                        " \"backward_ms\": {\"E\": 1, \"M\": 1, \"L\": 1}}";
    CHECK(op_model_from_profile_json(twice, "p.json", &m, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "p.json:2:");
    CHECK_STR_CONTAINS(e.msg, "duplicate object key");
    const char *name_num = "{\"pattern\": \"M\", \"name\": 7, \"forward_ms\": {\"E\": 1, \"M\": 1, \"L\": 1},"
                           " \"backward_ms\": {\"E\": 1, \"M\": 1, \"L\": 1}}";
    CHECK(op_model_from_profile_json(name_num, "p.json", &m, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "p.json: name: expected a string");
    /* too many layers is refused from the pattern's length, before any layer is built */
    enum { N_BIG = 1 << 20 };
    char *big = op_xmalloc(N_BIG + 256);
    int at = snprintf(big, 256, "{\"pattern\": \"");
    memset(big + at, 'M', N_BIG);
    snprintf(big + at + N_BIG, 256, "\", \"forward_ms\": {\"E\": 1, \"M\": 1, \"L\": 1},"
             " \"backward_ms\": {\"E\": 1, \"M\": 1, \"L\": 1}}");
    CHECK(op_model_from_profile_json(big, "p.json", &m, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "p.json: pattern: 1048576 layers; at most 4095 are supported");
    free(big);
}

/* Runs the CLI (cmd) with output to a file; returns the exit code, output in out. */
static int run_cli(const char *args, char *out, size_t n) {
    char cli[600], cmd[1400];
    const char *env = getenv("OCTOPIPE");
    if (env) snprintf(cli, sizeof cli, "%s", env);
    else {
        snprintf(cli, sizeof cli, "%s", argv0);
        char *slash = strrchr(cli, '/');
        if (slash) *slash = 0;
        else snprintf(cli, sizeof cli, ".");
        strncat(cli, "/../octopipe", sizeof cli - strlen(cli) - 1);
    }
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", cli, args);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t len = fread(out, 1, n - 1, p);
    out[len] = 0;
    int st = pclose(p);
    return st == -1 ? -1 : WEXITSTATUS(st);
}

TEST(cli_models) {
    static char out[1 << 16];
    int rc = run_cli("models", out, sizeof out);
    if (rc == 127 || strstr(out, "unknown command")) {
        printf("cli_models: skipped (no octopipe binary with `models` next to the test)\n");
        return;
    }
    CHECK_EQ_INT(rc, 0);
    CHECK_STR_CONTAINS(out, "nemotron-h-8b ");
    CHECK_STR_CONTAINS(out, "E1 M24 -24 *4 L1");
    CHECK_STR_CONTAINS(out, "qwen2-vl-7b");
    CHECK_EQ_INT(run_cli("models nemotron-h-8b", out, sizeof out), 0);
    CHECK_STR_CONTAINS(out, "pattern EM-M-M-M*-M");
    CHECK_STR_CONTAINS(out, "layers.7.attn");
    CHECK_STR_CONTAINS(out, "ssm2 inner=8192 state=128 heads=128x64 groups=8 conv=4");
    CHECK_EQ_INT(run_cli("models jamba-v0.1 --json", out, sizeof out), 0);
    CHECK_STR_CONTAINS(out, "\"n_layers\": 66");
    CHECK_STR_CONTAINS(out, "\"n_experts\": 16");
    CHECK_STR_CONTAINS(out, "\"parameters\": 51570"); /* 51.57B, 12.11B active */
    CHECK_STR_CONTAINS(out, "\"parameters_active\": 12110");
    CHECK_STR_CONTAINS(out, "\"parameters_mtp\": 0");
    CHECK_EQ_INT(run_cli("models nemotron-h-8b-profile --json", out, sizeof out), 0);
    CHECK_STR_CONTAINS(out, "\"parameters\": null"); /* its MLP and attention layers have no size */
    CHECK_EQ_INT(run_cli("models --json", out, sizeof out), 0);
    CHECK_STR_CONTAINS(out, "\"supported_model_types\"");
    CHECK_EQ_INT(run_cli("models --help", out, sizeof out), 0);
    CHECK_STR_CONTAINS(out, "minimax_text_01");
    CHECK_STR_CONTAINS(out, "usage: octopipe models");
    CHECK_EQ_INT(run_cli("models --bogus", out, sizeof out), 2);
    CHECK_STR_CONTAINS(out, "unknown flag '--bogus'");
    CHECK_EQ_INT(run_cli("models no-such-model", out, sizeof out), 2);
    CHECK_STR_CONTAINS(out, "'no-such-model' is neither a readable file");
}

/* NULL text, file or model: OP_EINVAL with a message, the model left empty, never an abort. */
TEST(loaders_refuse_null_arguments) {
    op_model mo;
    op_err er = {0};
    CHECK_EQ_INT(op_model_load(NULL, &mo, &er), OP_EINVAL);
    CHECK_MSG(strstr(er.msg, "no file or preset name"), "%s", er.msg);
    op_model_free(&mo);
    CHECK_EQ_INT(op_model_load("llama-7b", NULL, &er), OP_EINVAL);
    CHECK_EQ_INT(op_model_from_hf_json(NULL, "cfg.json", &mo, &er), OP_EINVAL);
    CHECK_MSG(strstr(er.msg, "cfg.json: no text"), "%s", er.msg);
    CHECK(mo.n_layers == 0);
    op_model_free(&mo);
    CHECK_EQ_INT(op_model_from_hf_json("{}", NULL, NULL, &er), OP_EINVAL);
    CHECK_EQ_INT(op_model_from_profile_json(NULL, NULL, &mo, &er), OP_EINVAL);
    CHECK_MSG(strstr(er.msg, "profile.json: no text"), "%s", er.msg);
    op_model_free(&mo);
    CHECK_EQ_INT(op_model_from_profile_json("{}", "p.json", NULL, NULL), OP_EINVAL);
}

/* The name lists are filled on first use; the first uses here come from four threads at once
 * (first in main: before any other test fills them).  Each sees the whole list; under
 * `make SAN=thread` an unsynchronised fill is a race report. */
static void *names_main(void *a) {
    int *n = a;
    for (const char *const *p = op_model_preset_names(); *p; p++) n[0]++;
    for (const char *const *p = op_model_supported_types(); *p; p++) n[1]++;
    return NULL;
}

TEST(name_lists_filled_once_from_threads) {
    int n[4][2] = {{0}};
    pthread_t th[4];
    for (int k = 0; k < 4; k++) CHECK(pthread_create(&th[k], NULL, names_main, n[k]) == 0);
    for (int k = 0; k < 4; k++) pthread_join(th[k], NULL);
    int want[2] = {0, 0};
    for (const char *const *p = op_model_preset_names(); *p; p++) want[0]++;
    for (const char *const *p = op_model_supported_types(); *p; p++) want[1]++;
    CHECK(want[0] > 0 && want[1] > 0);
    for (int k = 0; k < 4; k++) CHECK(n[k][0] == want[0] && n[k][1] == want[1]);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    argv0 = argv[0];
    RUN(name_lists_filled_once_from_threads);
    RUN(kind_symbols_round_trip);
    RUN(loaders_refuse_null_arguments);
    RUN(hf_llama_defaults);
    RUN(hf_mistral_window_default);
    RUN(hf_mixtral_moe);
    RUN(hf_qwen2_max_window_layers_and_tie);
    RUN(hf_qwen2_moe_sparse_step);
    RUN(hf_qwen3_moe);
    RUN(hf_gemma2_alternating);
    RUN(hf_gemma3_text_config_and_vision);
    RUN(hf_gemma3_sparse_text_config_defaults);
    RUN(hf_deepseek_v2_first_k_dense);
    RUN(hf_deepseek_v3_defaults_and_mtp);
    RUN(hf_jamba_periods);
    RUN(hf_nemotron_h_pattern_moe_infinity);
    RUN(hf_qwen2_vl_vision_in_front);
    RUN(hf_glm4_moe_dense_then_moe_and_mtp);
    RUN(hf_ernie4_5_moe_layer_range);
    RUN(hf_hunyuan_v1_moe_per_layer_topk);
    RUN(hf_minimax_m2_every_layer_moe);
    RUN(hf_olmo2_dense);
    RUN(hf_olmo3_sliding_and_full);
    RUN(hf_exaone4_sliding_and_global);
    RUN(hf_smollm3_nope_layers);
    RUN(hf_seed_oss_dense);
    RUN(hf_olmoe_every_layer_moe);
    RUN(hf_phimoe_top2_and_window);
    RUN(hf_qwen2_5_vl_window_attention);
    RUN(hf_qwen3_vl_deepstack);
    RUN(hf_qwen3_vl_moe_experts);
    RUN(hf_qwen3_next_linear_and_full);
    RUN(hf_falcon_h1_hybrid);
    RUN(hf_zamba2_shared_blocks);
    RUN(hf_minimax_attn_type_list);
    RUN(hf_granitemoehybrid_layers);
    RUN(hf_bamba_layers);
    RUN(hf_mamba_models);
    RUN(hf_llama4_interleave_and_chunks);
    RUN(hf_gpt_oss_layer_types);
    RUN(presets_all_load);
    RUN(infinity_nan_quirk);
    RUN(utf8_bom_accepted);
    RUN(bad_unknown_type_lists_supported);
    RUN(bad_malformed_json_names_line);
    RUN(bad_missing_and_wrong_fields);
    RUN(bad_moe_top_k);
    RUN(bad_mamba_shapes);
    RUN(bad_kv_heads);
    RUN(bad_layer_lists);
    RUN(bad_bool_fields);
    RUN(falcon_mamba_d_head);
    RUN(bad_derived_zero_widths);
    RUN(bad_nested_configs);
    RUN(profile_octopipe_with_memory);
    RUN(profile_megatron_style);
    RUN(profile_bad_inputs);
    RUN(profile_measured_batch);
    RUN(cli_models);
    RUN(expert_gcd);
    return check_report("model");
}
