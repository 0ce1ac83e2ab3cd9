/* The model-generate command line shared by every chapter. */
#include <string.h>

#include "cli.h"
#include "harness.h"
#include "util.h"

static const char *const KINDS[] = {"basic", "paged", NULL};

static int parse(GenOptions *o, const char *const *kv, char *err, int argc, ...) {
    char *argv[16] = {"model-generate"};
    __builtin_va_list ap;
    __builtin_va_start(ap, argc);
    for (int i = 1; i <= argc && i < 16; i++) argv[i] = __builtin_va_arg(ap, char *);
    __builtin_va_end(ap);
    return cli_parse(o, argc + 1, argv, kv, err);
}

TEST(cli_positional_arguments) {
    GenOptions o;
    char err[ERR_MAX];
    CHECK_EQ_INT(parse(&o, NULL, err, 3, "m.gguf", "Hello there", "12"), 0);
    CHECK_STR(o.model_path, "m.gguf");
    CHECK_STR(o.prompt, "Hello there");
    CHECK_EQ_INT(o.max_new_tokens, 12);
    CHECK(o.kv == NULL);
    CHECK_EQ_INT(parse(&o, NULL, err, 1, "m.gguf"), 0);
    CHECK_STR(o.prompt, "Once upon a time"); /* the default prompt */
}

TEST(cli_prompt_file_takes_the_prompt_slot) {
    GenOptions o;
    char err[ERR_MAX];
    CHECK_EQ_INT(parse(&o, NULL, err, 4, "--prompt-file", "p.txt", "m.gguf", "7"), 0);
    CHECK_STR(o.prompt_file, "p.txt");
    CHECK(o.prompt == NULL);
    CHECK_EQ_INT(o.max_new_tokens, 7);
    CHECK_EQ_INT(parse(&o, NULL, err, 5, "--prompt-file", "p.txt", "m.gguf", "hi", "7"), -1);
    CHECK(strstr(err, "not both") != NULL);
}

TEST(cli_kv_modes) {
    GenOptions o;
    char err[ERR_MAX];
    CHECK_EQ_INT(parse(&o, KINDS, err, 1, "m.gguf"), 0);
    CHECK_STR(o.kv, "basic"); /* a chapter with a cache runs its first kind by default */
    CHECK_EQ_INT(parse(&o, KINDS, err, 3, "--kv", "paged", "m.gguf"), 0);
    CHECK_STR(o.kv, "paged");
    CHECK_STR(o.model_path, "m.gguf");
    CHECK_EQ_INT(parse(&o, KINDS, err, 2, "--kv=basic", "m.gguf"), 0);
    CHECK_STR(o.kv, "basic");
    CHECK_EQ_INT(parse(&o, KINDS, err, 3, "--kv", "none", "m.gguf"), 0);
    CHECK(o.kv == NULL); /* none: full recompute */
    CHECK_EQ_INT(parse(&o, KINDS, err, 2, "--kv=none", "m.gguf"), 0);
    CHECK(o.kv == NULL);
    CHECK_EQ_INT(parse(&o, NULL, err, 1, "m.gguf"), 0);
    CHECK(o.kv == NULL); /* II.1 has no cache */
}

TEST(cli_kv_takes_a_value) {
    GenOptions o;
    char err[ERR_MAX];
    /* The value is never optional, so the next word is always the kind. */
    CHECK_EQ_INT(parse(&o, KINDS, err, 3, "--kv", "foo", "m.gguf"), -1);
    CHECK_STR(err, "unknown KV cache kind 'foo' for --kv (kinds: basic, paged, none)");
    CHECK_EQ_INT(parse(&o, KINDS, err, 3, "--kv", "m.gguf", "Hello"), -1);
    CHECK(strstr(err, "unknown KV cache kind 'm.gguf'") != NULL);
    CHECK_EQ_INT(parse(&o, KINDS, err, 2, "--kv=fancy", "m.gguf"), -1);
    CHECK(strstr(err, "'fancy'") && strstr(err, "basic, paged, none"));
    CHECK_EQ_INT(parse(&o, KINDS, err, 2, "m.gguf", "--kv"), -1);
    CHECK_STR(err, "option --kv needs a cache kind (kinds: basic, paged, none)");
    CHECK_EQ_INT(parse(&o, NULL, err, 3, "--kv", "basic", "m.gguf"), -1); /* II.1 has no --kv */
    CHECK(strstr(err, "unknown option '--kv'") != NULL);
}

/* A chapter's own options: III.4's pool flags. */
static int parse_size(void *flags, int argc, char **argv, int *i, char *err) {
    if (strcmp(argv[*i], "--size") != 0) return 0;
    if (*i + 1 >= argc || strcmp(argv[*i + 1], "big") != 0) {
        err_set(err, "--size must be big");
        return -1;
    }
    *(int *)flags = 1;
    ++*i;
    return 1;
}

static void usage_size(FILE *f) { fprintf(f, "  --size big         a chapter's own option\n"); }

TEST(cli_chapter_options) {
    GenOptions o;
    char err[ERR_MAX];
    int size = 0;
    CliExtra extra = {parse_size, usage_size, &size};
    char *argv[] = {"model-generate", "--size", "big", "m.gguf", "hi"};
    CHECK_EQ_INT(cli_parse_extra(&o, 5, argv, KINDS, &extra, err), 0);
    CHECK_EQ_INT(size, 1);
    CHECK(o.extra == &extra);
    CHECK_STR(o.prompt, "hi");
    char *bad[] = {"model-generate", "--size", "small", "m.gguf"};
    CHECK_EQ_INT(cli_parse_extra(&o, 4, bad, KINDS, &extra, err), -1);
    CHECK_STR(err, "--size must be big");
    CHECK_EQ_INT(cli_parse(&o, 5, argv, KINDS, err), -1); /* not an option without the chapter's */
    CHECK(strstr(err, "unknown option '--size'") != NULL);
    FILE *f = fopen(test_tmp_path("usage.txt"), "w+");
    if (!f) return;
    cli_usage_extra(f, "model-generate", KINDS, &extra);
    rewind(f);
    char text[4096];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    CHECK(strstr(text, "modes: basic (default) paged none\n") != NULL);
    CHECK(strstr(text, "--size big") != NULL);
}

TEST(cli_bad_command_lines) {
    GenOptions o;
    char err[ERR_MAX];
    CHECK_EQ_INT(parse(&o, NULL, err, 0), -1);
    CHECK(strstr(err, "missing the model") != NULL);
    CHECK_EQ_INT(parse(&o, NULL, err, 2, "--bogus", "m.gguf"), -1);
    CHECK(strstr(err, "--bogus") != NULL);
    CHECK_EQ_INT(parse(&o, NULL, err, 3, "--threads", "0", "m.gguf"), -1);
    CHECK_EQ_INT(parse(&o, NULL, err, 3, "--threads", "100000", "m.gguf"), -1);
    CHECK(strstr(err, "--threads must be an integer from 1 to 1024, got '100000'") != NULL);
    CHECK_EQ_INT(parse(&o, NULL, err, 3, "m.gguf", "p", "2147483648"), -1); /* the range is named */
    CHECK(strstr(err, "max_new_tokens must be an integer from 0 to 2147483647, got '2147483648'") != NULL);
    CHECK_EQ_INT(parse(&o, NULL, err, 3, "m.gguf", "p", "-5"), -1);
    CHECK_EQ_INT(parse(&o, NULL, err, 3, "m.gguf", "p", "12x"), -1);
    CHECK_EQ_INT(parse(&o, NULL, err, 1, "--ctx"), -1);
    CHECK(strstr(err, "needs a value") != NULL);
    CHECK_EQ_INT(parse(&o, NULL, err, 4, "m.gguf", "p", "3", "extra"), -1);
    CHECK_EQ_INT(parse(&o, NULL, err, 1, "--help"), 1);
}

TEST(cli_flags) {
    GenOptions o;
    char err[ERR_MAX];
    CHECK_EQ_INT(parse(&o, NULL, err, 10, "--json", "--no-special", "--ignore-eos", "--ctx", "99", "--backend",
                       "scalar", "--logits", "l.f32", "m.gguf"),
                 0);
    CHECK(o.json && o.quiet && o.no_special && o.ignore_eos);
    CHECK_EQ_INT(o.ctx, 99);
    CHECK_STR(o.backend, "scalar");
    CHECK_STR(o.logits_path, "l.f32");
}
