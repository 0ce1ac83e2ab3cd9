/* Chapter III.4: the generation loop in process with each cache kind, and the
 * cache flags shared by the programs. */
#include <stdlib.h>
#include <string.h>

#include "generate.h"
#include "harness.h"
#include "kv_cache.h"
#include "test_util.h"

/* A session of model-generate's command line: the flags, then the model,
 * prompt and token count. The flags and their CliExtra must outlive it. */
typedef struct {
    Session s;
    KvFlags kv;
    CliExtra extra;
    char words[256]; /* the flags' words: the options point into them */
    char path[512];
} Gen;

static bool gen_open(Gen *g, const char *model, const char *prompt, const char *n, const char *flags) {
    char err[ERR_MAX], *path = g->path, *words = g->words;
    snprintf(path, sizeof g->path, "%s/%s.gguf", test_models_dir(), model);
    snprintf(words, sizeof g->words, "%s", flags);
    char *argv[24] = {"model-generate", "--quiet", "--ignore-eos", "--backend", "scalar"};
    int argc = 5;
    for (char *w = strtok(words, " "); w && argc < 20; w = strtok(NULL, " ")) argv[argc++] = w;
    argv[argc++] = path;
    argv[argc++] = (char *)prompt;
    argv[argc++] = (char *)n;
    memset(&g->kv, 0, sizeof g->kv);
    g->extra = kv_flags_cli(&g->kv);
    if (session_open_extra(&g->s, argc, argv, KV_KINDS, &g->extra, err) != 0) {
        test_fail(__FILE__, __LINE__, "%s", err);
        return false;
    }
    return true;
}

TEST(III4_generate_paged_by_default_same_tokens_as_basic_and_none) {
    Gen none, basic, paged, small_blocks;
    const char *prompt = "Once upon a time, in a land far away, there lived";
    if (!gen_open(&none, "small-q8_0", prompt, "12", "--kv none") ||
        !gen_open(&basic, "small-q8_0", prompt, "12", "--kv basic") ||
        !gen_open(&paged, "small-q8_0", prompt, "12", "") ||
        !gen_open(&small_blocks, "small-q8_0", prompt, "12", "--kv=paged --kv-block-size 3 --kv-blocks 9"))
        return;
    CHECK(none.s.opt.kv == NULL);
    CHECK_STR(paged.s.opt.kv, "paged"); /* the chapter's lesson is its default */
    CHECK_EQ_INT(small_blocks.kv.block_size, 3);
    Gen *all[] = {&none, &basic, &paged, &small_blocks};
    for (int i = 0; i < 4; i++) generate(&all[i]->s);
    for (int i = 1; i < 4; i++) {
        CHECK_EQ_INT(all[i]->s.metrics.n_steps, 12);
        if (all[i]->s.metrics.n_steps != 12) continue;
        CHECK_MSG(all[i]->s.n_tokens == none.s.n_tokens &&
                      memcmp(all[i]->s.tokens, none.s.tokens, sizeof(int32_t) * (size_t)none.s.n_tokens) == 0,
                  "--kv %s generates other tokens than --kv none", all[i]->s.opt.kv);
        CHECK_EQ_INT(all[i]->s.metrics.steps[0].n_rows, all[i]->s.n_prompt); /* the prefill reads the prompt */
        CHECK_EQ_INT(all[i]->s.metrics.steps[5].n_rows, 1);                  /* a decode step one token */
    }
    CHECK_EQ_INT(none.s.metrics.steps[5].n_rows, none.s.n_prompt + 5);
    for (int i = 0; i < 4; i++) session_close(&all[i]->s);
}

TEST(III4_generate_out_of_blocks_stops_with_an_error) {
    Gen g;
    /* 2 blocks of 4 positions: the prompt fits, the generation does not. */
    if (!gen_open(&g, "tiny-f32", "Once upon a time", "20", "--kv-block-size 4 --kv-blocks 2")) return;
    generate(&g.s);
    CHECK_STR(g.s.stop_reason, "error");
    CHECK_EQ_INT(g.s.n_tokens, 9); /* it ran 8 positions, the last predicting a 9th token */
    session_close(&g.s);
}

TEST(III4_generate_unknown_cache_kind_stops_with_an_error) {
    Gen g;
    if (!gen_open(&g, "tiny-f32", "Once upon a time", "3", "")) return;
    g.s.opt.kv = "fancy"; /* the command line refuses it; the loop must too */
    generate(&g.s);
    CHECK_STR(g.s.stop_reason, "error");
    CHECK_EQ_INT(g.s.metrics.n_steps, 0);
    session_close(&g.s);
}

TEST(III4_generate_zero_tokens_and_trace) {
    Gen g;
    if (!gen_open(&g, "tiny-f32", "Once upon a time", "0", "--kv-trace")) return;
    CHECK(g.kv.trace);
    generate(&g.s);
    CHECK_EQ_INT(g.s.metrics.n_steps, 0);
    session_close(&g.s);
}

/* kv_flags_parse on one argv: its return value, and where it left i. */
static int parse_one(KvFlags *f, char *err, int *i, int argc, char **argv) {
    *i = 1;
    return kv_flags_parse(f, argc, argv, i, err);
}

TEST(III4_kv_flags_parse) {
    KvFlags f = {0};
    char err[ERR_MAX] = "";
    int i;
    CHECK_EQ_INT(parse_one(&f, err, &i, 3, (char *[]){"x", "--kv", "basic"}), 1);
    CHECK_STR(f.kind, "basic");
    CHECK_EQ_INT(i, 2);
    CHECK_EQ_INT(parse_one(&f, err, &i, 2, (char *[]){"x", "--kv=paged"}), 1);
    CHECK_STR(f.kind, "paged");
    CHECK_EQ_INT(i, 1);
    CHECK_EQ_INT(parse_one(&f, err, &i, 3, (char *[]){"x", "--kv-block-size", "32"}), 1);
    CHECK_EQ_INT(f.block_size, 32);
    CHECK_EQ_INT(parse_one(&f, err, &i, 2, (char *[]){"x", "--kv-blocks=100"}), 1);
    CHECK_EQ_INT(f.n_blocks, 100);
    CHECK_EQ_INT(parse_one(&f, err, &i, 3, (char *[]){"x", "--kv-mem", "64"}), 1);
    CHECK_EQ_INT(f.mem_mib, 64);
    CHECK_EQ_INT(parse_one(&f, err, &i, 2, (char *[]){"x", "--kv-trace"}), 1);
    CHECK(f.trace);
    CHECK_EQ_INT(parse_one(&f, err, &i, 2, (char *[]){"x", "--kvx"}), 0); /* not ours */
    CHECK_EQ_INT(parse_one(&f, err, &i, 2, (char *[]){"x", "model.gguf"}), 0);
    CHECK_EQ_INT(parse_one(&f, err, &i, 3, (char *[]){"x", "--kv", "none"}), -1);
    CHECK_STR(err, "unknown KV cache kind 'none' for --kv (kinds: paged, basic)");
    CHECK_EQ_INT(parse_one(&f, err, &i, 2, (char *[]){"x", "--kv"}), -1);
    CHECK_STR(err, "option --kv needs a value");
    CHECK_EQ_INT(parse_one(&f, err, &i, 3, (char *[]){"x", "--kv-block-size", "0"}), -1);
    CHECK_STR(err, "--kv-block-size needs an integer from 1 to 4096, got '0'");
    CHECK_EQ_INT(parse_one(&f, err, &i, 3, (char *[]){"x", "--kv-blocks", "12x"}), -1);
    CHECK(strstr(err, "--kv-blocks needs an integer") != NULL);
    CHECK_EQ_INT(parse_one(&f, err, &i, 2, (char *[]){"x", "--kv-trace=yes"}), -1);
    CHECK_STR(err, "--kv-trace takes no value");
}

TEST(III4_kv_flags_make_pool_sizes) {
    Qwen3Config c = {.n_layers = 2, .kv_dim = 32, .ctx_len = 2048};
    char err[ERR_MAX];
    size_t block = kv_pool_block_bytes(&c, 16); /* 8 KiB */
    KvFlags f = {0};
    KvPool *p = kv_flags_make_pool(&f, &c, 100, err); /* the default: enough for the context */
    CHECK(p && p->n_blocks == 7 && p->block_size == 16);
    kv_pool_free(p);
    f.block_size = 10;
    p = kv_flags_make_pool(&f, &c, 100, err);
    CHECK(p && p->n_blocks == 10);
    kv_pool_free(p);
    f = (KvFlags){.mem_mib = 1};
    p = kv_flags_make_pool(&f, &c, 100, err);
    CHECK(p && (size_t)p->n_blocks == 1024 * 1024 / block);
    kv_pool_free(p);
    f = (KvFlags){.n_blocks = 3};
    p = kv_flags_make_pool(&f, &c, 100, err);
    CHECK(p && p->n_blocks == 3);
    kv_pool_free(p);
    Qwen3Config big = {.n_layers = 28, .kv_dim = 1024}; /* Qwen3-0.6B: 3.5 MiB a block */
    f = (KvFlags){0};
    p = kv_flags_make_pool(&f, &big, 40960, err); /* the budget caps it */
    CHECK(p && (size_t)p->n_blocks == (size_t)KV_DEFAULT_MEM_MIB * 1024 * 1024 / kv_pool_block_bytes(&big, 16));
    kv_pool_free(p);
    f = (KvFlags){.mem_mib = 1};
    CHECK(kv_flags_make_pool(&f, &big, 100, err) == NULL);
    CHECK_STR(err, "--kv-mem 1 MiB holds no block: one block of 16 positions takes 3.50 MiB");
    f = (KvFlags){.mem_mib = 1, .n_blocks = 3};
    CHECK(kv_flags_make_pool(&f, &c, 100, err) == NULL);
    CHECK_STR(err, "give --kv-blocks or --kv-mem, not both");
    f = (KvFlags){.kind = "basic", .n_blocks = 3};
    CHECK(kv_flags_make_pool(&f, &c, 100, err) == NULL);
    CHECK_STR(err, ""); /* no pool, and no error */
}

TEST(III4_kv_flags_usage_names_every_flag) {
    FILE *f = fopen(test_tmp_path("kv-usage.txt"), "w+");
    if (!f) return;
    kv_flags_usage(f);
    rewind(f);
    char text[2048];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    const char *flags[] = {"--kv KIND",     "paged (default) or basic", "--kv-block-size N",
                           "--kv-blocks N", "--kv-mem MiB",              "--kv-trace"};
    for (int i = 0; i < 6; i++) CHECK_MSG(strstr(text, flags[i]) != NULL, "no '%s' in:\n%s", flags[i], text);
}
