/* Models of every tensor type, end to end: each llama-quantize mix that
 * tools/mkmodel writes generates what its F32 original generates, on every
 * backend, and `model-generate --info` describes the files. (The kernels
 * themselves are tested in tests/common/test_backend.c.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_simd.h"
#include "harness.h"
#include "run.h"
#include "util.h"

#define VOCAB 1000 /* the kquant preset's */
#define STEPS 12

static const char *const MIXES[] = {"q4_0", "q5_0", "q2_k", "q3_k_m", "q4_k_s", "q4_k_m", "q5_k_m", "q6_k", "iq4_nl", "iq4_xs"};

static const char *model_path(const char *type) {
    static char path[4][512];
    static int slot;
    slot = (slot + 1) % 4;
    snprintf(path[slot], sizeof path[slot], "%s/kquant-%s.gguf", test_models_dir(), type);
    return path[slot];
}

/* Writes the prompt file; path is the caller's (test_tmp_path's buffer is reused). */
static const char *chat_prompt(char *path, size_t cap) {
    snprintf(path, cap, "%s", test_tmp_path("p-types.txt"));
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs("<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n", f);
        fclose(f);
    }
    return path;
}

/* The synthetic model continues what its context holds, with wide logit
 * margins on this prompt, so quantization error does not change its greedy
 * tokens: a kernel that decoded a block wrongly would. */
TEST(model_types_generate_what_f32_generates) {
    RunMode ii2 = {"II.2", "--kv basic"};
    char prompt[512];
    chat_prompt(prompt, sizeof prompt);
    RunResult ref;
    if (!run_generate(&ii2, "--ignore-eos --backend scalar", model_path("f32"), prompt, STEPS, VOCAB, &ref)) return;
    const char *backends[] = {"--backend scalar", "--backend simd", "--threads 2"};
    for (size_t m = 0; m < sizeof MIXES / sizeof MIXES[0]; m++)
        for (int b = 0; b < 3; b++) {
            char extra[128];
            snprintf(extra, sizeof extra, "--ignore-eos %s", backends[b]);
            RunResult r;
            if (!run_generate(&ii2, extra, model_path(MIXES[m]), prompt, STEPS, VOCAB, &r)) continue;
            CHECK_MSG(r.n_generated == ref.n_generated &&
                          memcmp(r.generated, ref.generated, sizeof(int32_t) * (size_t)ref.n_generated) == 0,
                      "kquant-%s (%s) generates other tokens than kquant-f32", MIXES[m], backends[b]);
            run_free(&r);
        }
    run_free(&ref);
}

static char *info(const char *model, int *rc) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s/II.2/model-generate --info '%s'", test_build_dir(), model);
    *rc = run_capture(cmd, &out);
    return out;
}

static void expect_line(const char *out, const char *want) {
    CHECK_MSG(strstr(out, want) != NULL, "--info printed:\n%s\nexpected a line with '%s'", out, want);
}

TEST(model_types_info) {
    int rc;
    char *out = info(model_path("q4_k_m"), &rc);
    CHECK_EQ_INT(rc, 0);
    expect_line(out, "architecture      qwen3\n");
    expect_line(out, "shape             8 layers, hidden 256, ffn 512, 4 query heads and 2 key/value heads of 64, "
                     "context 2048, vocab 1000 rows\n");
    expect_line(out, "rope              base 1000000, norm epsilon 9.99999997e-07\n");
    expect_line(out, "output            tied to token_embd.weight (no output.weight)\n");
    expect_line(out, "tokenizer         gpt2, pre-tokenizer qwen2, 1000 tokens, 739 merges\n");
    expect_line(out, "bos / eos         bos 995 '<|endoftext|>', eos 997 '<|im_end|>', add_bos_token false\n");
    expect_line(out, "special tokens    995 '<|endoftext|>', 996 '<|im_start|>', 997 '<|im_end|>', 998 '<think>',\n"
                     "                  999 '</think>'\n");
    expect_line(out, "end of generation 995 '<|endoftext|>', 997 '<|im_end|>'\n");
    expect_line(out, "file type         15 (MOSTLY_Q4_K_M)");
    /* 8 layers: 4 norms each + output_norm; Q6_K: the tied embedding and attn_v,
     * ffn_down in layers 0, 3, 6, 7; 256 x 1000 Q6_K is 1000 rows of 210 bytes */
    expect_line(out, "tensor types      F32       33 tensors");
    expect_line(out, "                  Q4_K      48 tensors");
    expect_line(out, "                  Q6_K       9 tensors");
    expect_line(out, "ignored keys      none that could change the result\n");
    expect_line(out, "runs here         yes");
    expect_line(out, "in memory         ");
    CHECK_MSG(!strstr(out, "16-row tiles"), "no Q8_0, Q4_0 or Q4_1 matrix, yet tiles:\n%s", out);
    free(out);
    out = info(model_path("q4_0"), &rc);
    expect_line(out, "Q4_1       1 tensor ");
    expect_line(out, "file type         2 (MOSTLY_Q4_0)");
    /* 7 matrices in each of 8 layers, all Q4_0 or Q4_1 */
    if (simd_reads_tiles()) expect_line(out, "                  56 of them (Q8_0, Q4_0, Q4_1) as 16-row tiles");
    else CHECK_MSG(!strstr(out, "16-row tiles"), "no kernel here reads tiles, yet:\n%s", out);
    free(out);
    out = info("/nonexistent.gguf", &rc);
    CHECK_EQ_INT(rc, 1);
    expect_line(out, "cannot open");
    free(out);
}

/* Keys the engine does not read and that would change llama.cpp's result are
 * listed with their values. */
TEST(model_types_info_lists_ignored_keys) {
    size_t len;
    char err[ERR_MAX];
    char *data = file_read_all(model_path("q6_k"), &len, err);
    if (!data) {
        test_fail(__FILE__, __LINE__, "%s", err);
        return;
    }
    /* rename two keys in place: an attention setting and a BOS request */
    char *k = memmem(data, len, "qwen3.attention.value_length", 28);
    char *b = memmem(data, len, "tokenizer.ggml.add_bos_token", 28);
    CHECK(k && b);
    if (!k || !b) {
        free(data);
        return;
    }
    memcpy(k, "qwen3.attention.sliding_wind", 28);
    b[28 + 4] = 1; /* the bool after its type: true */
    const char *path = test_tmp_path("ignored.gguf");
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, len, f);
        fclose(f);
    }
    free(data);
    int rc;
    char *out = info(path, &rc);
    CHECK_EQ_INT(rc, 0);
    expect_line(out, "ignored keys      2 not read by this engine, and they could change the result:\n");
    expect_line(out, "qwen3.attention.sliding_wind = 64\n");
    expect_line(out, "tokenizer.ggml.add_bos_token = true\n");
    free(out);
}
