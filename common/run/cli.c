/* cli.c: see cli.h. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "util.h"

#define DEFAULT_PROMPT "Once upon a time"
#define DEFAULT_MAX_NEW 32

void cli_usage_extra(FILE *f, const char *prog, const char *const *kv_modes, const CliExtra *extra) {
    fprintf(f, "usage: %s [options] <model.gguf> [prompt] [max_new_tokens]\n", prog);
    fprintf(f, "       %s [options] --prompt-file F <model.gguf> [max_new_tokens]\n\n", prog);
    fprintf(f, "Greedy generation with timing: per-step events and the metrics block.\n\n");
    fprintf(f, "options:\n");
    if (kv_modes) {
        fprintf(f, "  --kv MODE          (or --kv=MODE) the KV cache: prefill once, then decode one\n");
        fprintf(f, "                     token per forward;\n");
        fprintf(f, "                     modes:");
        for (int i = 0; kv_modes[i]; i++) fprintf(f, " %s%s", kv_modes[i], i == 0 ? " (default)" : "");
        fprintf(f, " %s\n", KV_NONE);
        fprintf(f, "                     --kv %s: no cache, every step recomputes the whole sequence\n", KV_NONE);
    }
    if (extra) extra->usage(f);
    fprintf(f, "  --backend NAME     %s (default: the fastest available)\n", backend_names());
    fprintf(f, "  --threads N        threads of the parallel backend (default: one per core;\n");
    fprintf(f, "                     scalar and simd run on one)\n");
    fprintf(f, "  --prompt-file F    read the prompt from F, exact bytes\n");
    fprintf(f, "  --no-special       special-token text in the prompt stays plain text\n");
    fprintf(f, "  --ignore-eos       keep going past end-of-generation tokens\n");
    fprintf(f, "  --ctx N            cap the sequence length (prompt + generated) at N tokens,\n");
    fprintf(f, "                     at most the model's context length (the default)\n");
    fprintf(f, "  --json             print one JSON object with the text and metrics at the end\n");
    fprintf(f, "  --quiet            print only the metrics block (no text, no step table)\n");
    fprintf(f, "  --logits F         write every step's logits to F (float32 rows, little-endian)\n");
    fprintf(f, "  --info             describe the model file (shapes, tokenizer, tensor types, ignored\n");
    fprintf(f, "                     keys, whether it runs here) and generate nothing\n");
    fprintf(f, "  --check-finite     check every matmul and attention for NaN/Inf; on non-finite\n");
    fprintf(f, "                     logits, name the first layer and buffer that went bad (slower)\n");
    fprintf(f, "  --help             this text\n");
    fprintf(f, "\ndefaults: prompt \"%s\", max_new_tokens %d\n", DEFAULT_PROMPT, DEFAULT_MAX_NEW);
}

void cli_usage(FILE *f, const char *prog, const char *const *kv_modes) {
    cli_usage_extra(f, prog, kv_modes, NULL);
}

int cli_parse_int(const char *s, const char *what, int min, int max, int *out, char *err) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) {
        err_set(err, "%s must be an integer from %d to %d, got '%s'", what, min, max, s);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static bool is_mode(const char *s, const char *const *modes) {
    for (int i = 0; modes && modes[i]; i++)
        if (strcmp(s, modes[i]) == 0) return true;
    return false;
}

/* --kv MODE or --kv=MODE: the value is never optional, so it cannot be
 * confused with the model or the prompt. */
static int take_kv(GenOptions *o, int argc, char **argv, int *i, const char *const *modes, char *err) {
    const char *a = argv[*i], *v = NULL;
    if (strncmp(a, "--kv=", 5) == 0) v = a + 5;
    else if (*i + 1 < argc) v = argv[++*i];
    if (v && strcmp(v, KV_NONE) == 0) {
        o->kv = NULL;
        return 0;
    }
    if (v && is_mode(v, modes)) {
        o->kv = v;
        return 0;
    }
    Buf b = {0};
    for (int k = 0; modes[k]; k++) buf_printf(&b, "%s, ", modes[k]);
    buf_puts(&b, KV_NONE);
    if (v) err_set(err, "unknown KV cache kind '%s' for --kv (kinds: %s)", v, b.data);
    else err_set(err, "option --kv needs a cache kind (kinds: %s)", b.data);
    buf_free(&b);
    return -1;
}

/* The value of an option that takes one. */
static const char *need_value(int argc, char **argv, int *i, char *err) {
    if (*i + 1 >= argc) {
        err_set(err, "option %s needs a value", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

int cli_parse_extra(GenOptions *o, int argc, char **argv, const char *const *kv_modes, const CliExtra *extra,
                    char *err) {
    memset(o, 0, sizeof *o);
    o->max_new_tokens = DEFAULT_MAX_NEW;
    o->kv = kv_modes ? kv_modes[0] : NULL; /* a chapter with a cache runs it by default */
    o->extra = extra;
    const char *pos[3];
    int n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int took;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return 1;
        else if (kv_modes && (strcmp(a, "--kv") == 0 || strncmp(a, "--kv=", 5) == 0)) {
            if (take_kv(o, argc, argv, &i, kv_modes, err)) return -1;
        } else if (strcmp(a, "--backend") == 0) {
            if (!(o->backend = need_value(argc, argv, &i, err))) return -1;
        } else if (strcmp(a, "--threads") == 0) {
            if (!(v = need_value(argc, argv, &i, err)) || cli_parse_int(v, "--threads", 1, 1024, &o->threads, err))
                return -1;
        } else if (strcmp(a, "--ctx") == 0) {
            if (!(v = need_value(argc, argv, &i, err)) || cli_parse_int(v, "--ctx", 1, INT_MAX, &o->ctx, err)) return -1;
        } else if (strcmp(a, "--prompt-file") == 0) {
            if (!(o->prompt_file = need_value(argc, argv, &i, err))) return -1;
        } else if (strcmp(a, "--logits") == 0) {
            if (!(o->logits_path = need_value(argc, argv, &i, err))) return -1;
        } else if (strcmp(a, "--no-special") == 0) o->no_special = true;
        else if (strcmp(a, "--ignore-eos") == 0) o->ignore_eos = true;
        else if (strcmp(a, "--json") == 0) o->json = o->quiet = true;
        else if (strcmp(a, "--quiet") == 0) o->quiet = true;
        else if (strcmp(a, "--info") == 0) o->info = true;
        else if (strcmp(a, "--check-finite") == 0) o->check_finite = true;
        else if (extra && (took = extra->parse(extra->flags, argc, argv, &i, err)) != 0) {
            if (took < 0) return -1;
        } else if (a[0] == '-' && a[1] != '\0') {
            err_set(err, "unknown option '%s' (see --help)", a);
            return -1;
        } else if (n_pos < 3) pos[n_pos++] = a;
        else {
            err_set(err, "too many arguments: '%s' (see --help)", a);
            return -1;
        }
    }
    if (n_pos == 0) {
        err_set(err, "missing the model file (see --help)");
        return -1;
    }
    o->model_path = pos[0];
    /* With --prompt-file the prompt argument is absent: <gguf> [max_new_tokens]. */
    int n_prompt_args = o->prompt_file ? 0 : 1;
    if (n_pos > 2 + n_prompt_args) {
        err_set(err, "give the prompt either as an argument or with --prompt-file, not both");
        return -1;
    }
    if (n_pos >= 2 && n_prompt_args) o->prompt = pos[1];
    if (n_pos == 2 + n_prompt_args &&
        cli_parse_int(pos[1 + n_prompt_args], "max_new_tokens", 0, INT_MAX, &o->max_new_tokens, err))
        return -1;
    if (!o->prompt && !o->prompt_file) o->prompt = DEFAULT_PROMPT;
    return 0;
}

int cli_parse(GenOptions *o, int argc, char **argv, const char *const *kv_modes, char *err) {
    return cli_parse_extra(o, argc, argv, kv_modes, NULL, err);
}
