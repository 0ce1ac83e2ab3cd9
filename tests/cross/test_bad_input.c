/* Bad input to model-generate, end to end: each gets one clear line naming
 * the problem and a non-zero exit, never a crash. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "gguf.h"
#include "harness.h"
#include "run.h"
#include "util.h"

static char *model_named(const char *name, size_t *len) {
    char path[512], err[ERR_MAX];
    snprintf(path, sizeof path, "%s/%s.gguf", test_models_dir(), name);
    char *data = file_read_all(path, len, err);
    if (!data) test_fail(__FILE__, __LINE__, "%s", err);
    return data;
}

static char *model_bytes(size_t *len) { return model_named("tiny-f32", len); }

static const char *write_file(const char *name, const char *data, size_t len) {
    const char *path = test_tmp_path(name);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, len, f);
        fclose(f);
    }
    return path;
}

/* Runs II.2's model-generate with args; expects failure mentioning want. */
static void expect_error(const char *args, const char *want) {
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s/II.2/model-generate %s", test_build_dir(), args);
    int rc = run_capture(cmd, &out);
    CHECK_MSG(rc == 1, "`%s` exited %d (expected 1):\n%s", cmd, rc, out);
    CHECK_MSG(strstr(out, want) != NULL, "`%s` printed:\n%s\nexpected a message containing '%s'", cmd, out, want);
    free(out);
}

/* Writes data as a model file and expects model-generate to reject it with want. */
static void expect_file_error(const char *name, const char *data, size_t len, const char *want) {
    char args[600];
    snprintf(args, sizeof args, "'%s'", write_file(name, data, len));
    expect_error(args, want);
}

/* The offset of the type field of a tensor's info record, found by its name. */
static size_t tensor_type_offset(const char *data, size_t len, const char *name) {
    size_t n = strlen(name);
    for (size_t i = 8; i + n + 4 < len; i++)
        if (memcmp(data + i, name, n) == 0) {
            uint64_t slen;
            memcpy(&slen, data + i - 8, 8);
            if (slen != n) continue;
            uint32_t dims;
            memcpy(&dims, data + i + n, 4);
            return i + n + 4 + 8 * (size_t)dims;
        }
    return 0;
}

TEST(bad_input_missing_and_truncated_files) {
    expect_error("/nonexistent/model.gguf", "cannot open");
    size_t len;
    char *data = model_bytes(&len);
    if (!data) return;
    expect_file_error("trunc.gguf", data, len / 2, "past the end");
    expect_file_error("header.gguf", data, 100, "truncated");
    expect_file_error("notgguf.gguf", "hello world, not a model", 24, "bad magic");
    free(data);
}

/* A tensor of a type the engine does not run (IQ2, IQ1, TQ, MXFP4...): the
 * error names the tensor, its type and the supported types; --info still
 * describes the file and says why it does not run. */
TEST(bad_input_unsupported_tensor_type) {
    size_t len;
    char *data = model_named("kquant-q6_k", &len); /* rows of 256: every block size divides them */
    if (!data) return;
    size_t off = tensor_type_offset(data, len, "blk.0.attn_q.weight");
    CHECK(off > 0);
    uint32_t iq2 = 16;
    memcpy(data + off, &iq2, 4);
    char want[256];
    snprintf(want, sizeof want, "tensor 'blk.0.attn_q.weight': type IQ2_XXS is not supported (supported types: %s)",
             dtype_supported_names());
    expect_file_error("iq2.gguf", data, len, want);
    uint32_t mxfp4 = 39;
    memcpy(data + off, &mxfp4, 4);
    expect_file_error("mxfp4.gguf", data, len, "type MXFP4 is not supported");
    char args[600];
    snprintf(args, sizeof args, "--info '%s'", test_tmp_path("mxfp4.gguf"));
    expect_error(args, "runs here         no: ");
    uint32_t unknown = 77;
    memcpy(data + off, &unknown, 4);
    expect_file_error("type77.gguf", data, len, "unknown tensor type 77");
    free(data);
}

TEST(bad_input_wrong_architecture) {
    size_t len;
    char *data = model_bytes(&len);
    if (!data) return;
    char *p = memmem(data, len, "qwen3", 5); /* the value of general.architecture comes first */
    CHECK(p != NULL);
    if (p) memcpy(p, "llama", 5);
    expect_file_error("llama.gguf", data, len, "architecture");
    free(data);
}

TEST(bad_input_command_line_and_prompt) {
    char model[512], args[1200];
    snprintf(model, sizeof model, "%s/tiny-f32.gguf", test_models_dir());
    snprintf(args, sizeof args, "--frobnicate '%s'", model);
    expect_error(args, "unknown option '--frobnicate'");
    snprintf(args, sizeof args, "--kv=sideways '%s'", model);
    expect_error(args, "unknown KV cache kind 'sideways' for --kv (kinds: basic, none)");
    snprintf(args, sizeof args, "--kv foo '%s'", model); /* the value is never optional: foo is the kind */
    expect_error(args, "unknown KV cache kind 'foo' for --kv (kinds: basic, none)");
    snprintf(args, sizeof args, "'%s' --kv", model);
    expect_error(args, "option --kv needs a cache kind (kinds: basic, none)");
    snprintf(args, sizeof args, "--ctx 4 '%s' 'one two three four five six seven'", model);
    expect_error(args, "context holds 4");
    snprintf(args, sizeof args, "--ctx 999999 '%s'", model); /* above the model's limit: refused, with it */
    expect_error(args, "--ctx 999999 is more than the model's context length, 2048 tokens");
    snprintf(args, sizeof args, "--backend scalar --threads 4 '%s'", model);
    expect_error(args, "--threads 4 needs --backend parallel");
    snprintf(args, sizeof args, "'%s' ''", model);
    expect_error(args, "prompt is empty");
    snprintf(args, sizeof args, "--prompt-file /nonexistent/prompt.txt '%s'", model);
    expect_error(args, "cannot open");
    snprintf(args, sizeof args, "--backend quantum '%s'", model);
    expect_error(args, "unknown backend 'quantum'");
}

TEST(bad_input_invalid_utf8_prompt_still_generates) {
    char model[512], cmd[1200], *out = NULL;
    snprintf(model, sizeof model, "%s/tiny-f32.gguf", test_models_dir());
    const char *prompt = write_file("bad-utf8.txt", "caf\xC3 \xFF\xFE ok \xE2\x82", 13);
    snprintf(cmd, sizeof cmd, "%s/II.2/model-generate --json --prompt-file '%s' '%s' 4", test_build_dir(), prompt,
             model);
    int rc = run_capture(cmd, &out);
    CHECK_MSG(rc == 0 && strstr(out, "\"generated\""), "`%s` exited %d:\n%s", cmd, rc, out);
    free(out);
}

TEST(bad_input_context_fills_up_cleanly) {
    char model[512], cmd[1200], *out = NULL;
    snprintf(model, sizeof model, "%s/tiny-f32.gguf", test_models_dir());
    snprintf(cmd, sizeof cmd, "%s/II.2/model-generate --ignore-eos --ctx 10 '%s' 'a b c' 50", test_build_dir(),
             model);
    int rc = run_capture(cmd, &out);
    CHECK_MSG(rc == 0 && strstr(out, "context full (--ctx 10; the model's context length is 2048)"),
              "`%s` exited %d:\n%s", cmd, rc, out);
    free(out);
}

/* --quiet prints the metrics block only: no text, no step table. */
TEST(quiet_prints_only_the_metrics_block) {
    char model[512], cmd[1200], *out = NULL;
    snprintf(model, sizeof model, "%s/tiny-f32.gguf", test_models_dir());
    snprintf(cmd, sizeof cmd, "%s/II.2/model-generate --quiet '%s' 'Once upon a time' 4", test_build_dir(), model);
    int rc = run_capture(cmd, &out);
    CHECK_MSG(rc == 0 && strncmp(out, "prompt tokens ", 14) == 0 && strstr(out, "decode ") && !strstr(out, "phase") &&
                  !strstr(out, "Once upon"),
              "`%s` exited %d:\n%s", cmd, rc, out);
    free(out);
}

/* A model whose weights hold a NaN (a broken file; a kernel bug does the same
 * to activations): every chapter and cache mode stops at step 0 with an
 * error naming the step, and --check-finite names where it started. */
TEST(bad_input_non_finite_weights_are_caught) {
    char path[512], err[ERR_MAX];
    snprintf(path, sizeof path, "%s/tiny-f32.gguf", test_models_dir());
    size_t len;
    char *data = model_bytes(&len);
    GgufFile g;
    if (!data || gguf_open(&g, path, err) != 0) {
        free(data);
        CHECK_MSG(false, "%s", err);
        return;
    }
    const GgufTensor *t = gguf_find_tensor(&g, "blk.1.ffn_up.weight");
    CHECK(t != NULL && t->type == DT_F32);
    if (t) {
        float nan = NAN; /* row 0, column 5: the up projection's output 0 becomes NaN */
        memcpy(data + ((const char *)t->data - (const char *)g.map) + 5 * sizeof(float), &nan, sizeof nan);
    }
    gguf_close(&g);
    const char *model = write_file("nan-weight.gguf", data, len);
    free(data);
    RunMode modes[16];
    int n = run_modes(modes, 16);
    CHECK(n >= 2);
    for (int i = 0; i < n; i++) {
        char cmd[4096], *out = NULL;
        snprintf(cmd, sizeof cmd, "%s/%s/model-generate %s '%s' 'Hello' 4", test_build_dir(), modes[i].chapter,
                 modes[i].flags, model);
        int rc = run_capture(cmd, &out);
        CHECK_MSG(rc == 1 && strstr(out, "step 0: the logits are not finite (NaN at token") &&
                      strstr(out, "--check-finite names"),
                  "`%s` exited %d:\n%s", cmd, rc, out);
        free(out);
        snprintf(cmd, sizeof cmd, "%s/%s/model-generate --check-finite %s '%s' 'Hello' 4", test_build_dir(),
                 modes[i].chapter, modes[i].flags, model);
        rc = run_capture(cmd, &out);
        CHECK_MSG(rc == 1 && strstr(out, "step 0: the logits are not finite") &&
                      strstr(out, "it started in layer 1: the output of blk.1.ffn_up.weight (the MLP's up "
                                  "projection) has NaN at [0, 0]"),
                  "`%s` exited %d:\n%s", cmd, rc, out);
        free(out);
    }
}
