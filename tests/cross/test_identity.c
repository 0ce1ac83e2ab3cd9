/* The book's invariant: for one backend, every chapter and every cache kind
 * produce bitwise-identical logits at every step, and so the same tokens. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "backend.h"
#include "qwen3.h"
#include "run.h"
#include "util.h"

static const char *write_prompt(const char *name, const char *text) {
    const char *path = test_tmp_path(name);
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return path;
}

static int model_vocab(const char *path) {
    Qwen3Model m;
    char err[ERR_MAX];
    if (qwen3_load(&m, path, err) != 0) {
        test_fail(__FILE__, __LINE__, "%s", err);
        return 0;
    }
    int v = m.cfg.vocab_size;
    qwen3_free(&m);
    return v;
}

/* Runs each mode on one model and prompt with the given backend flags and
 * checks they all agree with the first mode bit for bit. */
static void compare_modes(const RunMode *modes, int nm, const char *model, const char *prompt_path, int n,
                          const char *backend_flags) {
    char prompt_file[512]; /* test_tmp_path's buffers are reused by the runs */
    snprintf(prompt_file, sizeof prompt_file, "%s", prompt_path);
    int vocab = model_vocab(model);
    if (!vocab) return;
    RunResult first;
    if (nm == 0 || !run_generate(&modes[0], backend_flags, model, prompt_file, n, vocab, &first)) return;
    CHECK_EQ_INT(first.n_generated, n);
    for (int i = 1; i < nm; i++) {
        RunResult r;
        if (!run_generate(&modes[i], backend_flags, model, prompt_file, n, vocab, &r)) continue;
        CHECK_MSG(r.n_generated == first.n_generated &&
                      memcmp(r.generated, first.generated, sizeof(int32_t) * (size_t)r.n_generated) == 0,
                  "%s: %s %s generates other tokens than %s %s", model, modes[i].chapter, modes[i].flags,
                  modes[0].chapter, modes[0].flags);
        long rows = r.n_logit_rows < first.n_logit_rows ? r.n_logit_rows : first.n_logit_rows;
        CHECK_EQ_INT(r.n_logit_rows, first.n_logit_rows);
        for (long row = 0; row < rows; row++)
            if (!CHECK_SAME_FLOATS(r.logits + row * vocab, first.logits + row * vocab, (size_t)vocab,
                                   "%s %s: %s %s: logits of step %ld differ from %s %s", model, backend_flags,
                                   modes[i].chapter, modes[i].flags, row, modes[0].chapter, modes[0].flags))
                break;
        run_free(&r);
    }
    run_free(&first);
}

/* Every chapter and cache mode. */
static void check_identity(const char *model, const char *prompt_file, int n, const char *backend_flags) {
    RunMode modes[16];
    int nm = run_modes(modes, 16);
    CHECK_MSG(nm >= 3, "expected at least II.1, II.2 and II.2 --kv none, found %d modes", nm);
    compare_modes(modes, nm, model, prompt_file, n, backend_flags);
}

static const char *test_model(const char *name) {
    static char path[8][512];
    static int slot;
    slot = (slot + 1) % 8;
    snprintf(path[slot], sizeof path[slot], "%s/%s.gguf", test_models_dir(), name);
    return path[slot];
}

TEST(identity_chapters_tiny_f32) {
    const char *p = write_prompt("p-story.txt", "Once upon a time, there was a");
    check_identity(test_model("tiny-f32"), p, 24, "--ignore-eos --backend scalar");
}

TEST(identity_chapters_small_q8_0_chat) {
    const char *p = write_prompt("p-chat.txt", "<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n");
    check_identity(test_model("small-q8_0"), p, 20, "--ignore-eos --backend scalar");
}

TEST(identity_chapters_small_untied_stops_at_eos) {
    const char *p = write_prompt("p-short.txt", "The");
    check_identity(test_model("small-untied"), p, 16, "--backend scalar");
}

/* Every llama-quantize mix mkmodel writes (Q4_0 with its Q4_1 tensors, Q5_0
 * with Q5_1, the K-quant mixes, IQ4_NL, IQ4_XS), on the default backend (the
 * simd kernels on threads): bitwise the same logits in every chapter and
 * cache mode. */
TEST(identity_chapters_every_quantization_mix) {
    char p[512]; /* a copy: test_tmp_path's buffer is reused by every run */
    snprintf(p, sizeof p, "%s", write_prompt("p-chat.txt", "<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n"));
    static const char *const mixes[] = {"q4_0", "q5_0", "q2_k", "q3_k_m", "q4_k_s", "q4_k_m", "q5_k_m", "q6_k", "iq4_nl", "iq4_xs"};
    for (size_t i = 0; i < sizeof mixes / sizeof mixes[0] && !test_failed_now(); i++) {
        char name[64];
        snprintf(name, sizeof name, "kquant-%s", mixes[i]);
        check_identity(test_model(name), p, 8, "--ignore-eos --threads 2");
    }
}

TEST(identity_chapters_shared_reference_models) {
    const char *shared = test_shared_dir();
    if (!shared) SKIP("../shared absent: identity on the reference models not checked");
    const char *names[] = {"tiny-a", "tiny-b", "tiny-b-q8_0"};
    for (int i = 0; i < 3; i++) {
        char model[512], prompt[512];
        snprintf(model, sizeof model, "%s/reference/models/%s.gguf", shared, names[i]);
        snprintf(prompt, sizeof prompt, "%s/reference/golden/prompts/p2_chatml.txt", shared);
        check_identity(model, prompt, 16, "--ignore-eos --backend scalar");
    }
}

/* The paged cache at block sizes that divide nothing, one position a block
 * and more than the whole sequence, against the full recompute of its chapter,
 * and on the parallel backend with one and two threads. */
TEST(identity_paged_block_sizes_and_threads) {
    RunMode all[16], modes[8];
    int na = run_modes(all, 16), nm = 0;
    const char *chapter = NULL;
    for (int i = 0; i < na; i++)
        if (strcmp(all[i].flags, "--kv paged") == 0) chapter = all[i].chapter;
    if (!chapter) SKIP("no chapter has a paged cache");
    const char *flags[] = {"--kv none", "--kv paged --kv-block-size 1", "--kv paged --kv-block-size 5",
                           "--kv paged --kv-block-size 16", "--kv paged --kv-block-size 64", "--kv basic"};
    for (int i = 0; i < 6; i++) {
        modes[nm] = (RunMode){0};
        snprintf(modes[nm].chapter, sizeof modes[nm].chapter, "%.31s", chapter);
        snprintf(modes[nm].flags, sizeof modes[nm].flags, "%s", flags[i]);
        nm++;
    }
    const char *p =
        write_prompt("p-blocks.txt", "<|im_start|>user\nTell me a story<|im_end|>\n<|im_start|>assistant\n");
    compare_modes(modes, nm, test_model("small-q8_0"), p, 24, "--ignore-eos --backend scalar");
    RunMode threads[3] = {{"", "--kv none --threads 1"}, {"", "--kv paged --kv-block-size 3 --threads 2"},
                          {"", "--kv paged --threads 1"}};
    for (int i = 0; i < 3; i++) snprintf(threads[i].chapter, sizeof threads[i].chapter, "%.31s", chapter);
    compare_modes(threads, 3, test_model("small-q8_0"), p, 12, "--ignore-eos --backend parallel");
}
