/* session.c: see session.h. */
#include "session.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "finite.h"
#include "json.h"
#include "model_info.h"

static int read_prompt(Session *s, char **text, size_t *len, char *err) {
    if (s->opt.prompt_file) {
        *text = file_read_all(s->opt.prompt_file, len, err);
        return *text ? 0 : -1;
    }
    *len = strlen(s->opt.prompt);
    *text = xstrdup(s->opt.prompt);
    return 0;
}

static int tokenize_prompt(Session *s, char *err) {
    char *text;
    size_t len;
    if (read_prompt(s, &text, &len, err) != 0) return -1;
    int32_t *ids = NULL;
    int n = 0;
    int rc = tokenizer_encode(s->tok, text, len, !s->opt.no_special, &ids, &n, err);
    if (rc == 0 && n <= 0) err_set(err, "the prompt is empty: there is nothing to generate from");
    if (rc == 0 && n >= s->ctx)
        err_set(err, "the prompt has %d tokens but the context holds %d: no room to generate", n, s->ctx);
    if (rc != 0 || n <= 0 || n >= s->ctx) {
        free(text);
        free(ids);
        return -1;
    }
    if (!s->opt.quiet) fwrite(text, 1, len, stdout); /* the continuation follows it */
    free(text);
    s->tokens = xmalloc(sizeof(int32_t) * (size_t)s->ctx);
    memcpy(s->tokens, ids, sizeof(int32_t) * (size_t)n);
    free(ids);
    s->n_prompt = s->n_tokens = n;
    return 0;
}

static int open_outputs(Session *s, char *err) {
    if (!s->opt.logits_path) return 0;
    s->logits_file = fopen(s->opt.logits_path, "wb");
    if (!s->logits_file) {
        err_set(err, "cannot write '%s': %s", s->opt.logits_path, strerror(errno));
        return -1;
    }
    return 0;
}

int session_open_extra(Session *s, int argc, char **argv, const char *const *kv_modes, const CliExtra *extra,
                       char *err) {
    memset(s, 0, sizeof *s);
    int rc = cli_parse_extra(&s->opt, argc, argv, kv_modes, extra, err);
    if (rc != 0) return rc;
    if (s->opt.info) return 2;
    if (!(s->be = backend_create(s->opt.backend, s->opt.threads, err))) return -1;
    if (s->opt.check_finite) s->be = finite_backend(s->be);
    if (qwen3_load(&s->model, s->opt.model_path, err) != 0) goto fail;
    char inner[ERR_MAX];
    if (!(s->tok = tokenizer_load(&s->model.file, inner))) {
        err_set(err, "%s: %s", s->opt.model_path, inner);
        goto fail;
    }
    if (tokenizer_vocab_size(s->tok) > s->model.cfg.vocab_size) {
        err_set(err, "%s: the tokenizer has %d tokens but token_embd.weight only %d rows",
                s->opt.model_path, tokenizer_vocab_size(s->tok), s->model.cfg.vocab_size);
        goto fail;
    }
    s->ctx = s->model.cfg.ctx_len;
    if (s->opt.ctx > s->ctx) {
        err_set(err, "--ctx %d is more than the model's context length, %d tokens", s->opt.ctx, s->ctx);
        goto fail;
    }
    if (s->opt.ctx > 0) s->ctx = s->opt.ctx;
    if (tokenize_prompt(s, err) != 0 || open_outputs(s, err) != 0) goto fail;
    metrics_begin(&s->metrics, s->n_prompt);
    return 0;
fail:
    session_close(s);
    return -1;
}

int session_open(Session *s, int argc, char **argv, const char *const *kv_modes, char *err) {
    return session_open_extra(s, argc, argv, kv_modes, NULL, err);
}

void session_close(Session *s) {
    if (s->logits_file) fclose(s->logits_file);
    tokenizer_free(s->tok);
    qwen3_free(&s->model);
    backend_free(s->be);
    free(s->tokens);
    metrics_free(&s->metrics);
    buf_free(&s->text);
    memset(s, 0, sizeof *s);
}

static void emit_text(Session *s, const char *bytes, int n) {
    char *out = xmalloc(UTF8_STREAM_OUT_MAX(n));
    size_t m = utf8_stream_push(&s->stream, bytes, (size_t)n, out);
    buf_append(&s->text, out, m);
    if (!s->opt.quiet && m) {
        fwrite(out, 1, m, stdout);
        fflush(stdout);
    }
    free(out);
}

bool session_has_room(Session *s) {
    if (s->n_tokens < s->ctx) return true;
    if (s->ctx < s->model.cfg.ctx_len)
        snprintf(s->stop_text, sizeof s->stop_text, "context full (--ctx %d; the model's context length is %d)",
                 s->ctx, s->model.cfg.ctx_len);
    else
        snprintf(s->stop_text, sizeof s->stop_text, "context full (the model's context length, %d tokens)", s->ctx);
    s->stop_reason = s->stop_text;
    return false;
}

/* Non-finite logits (a kernel bug, broken weights) would print garbage: stop
 * with an error naming the step, and with --check-finite where it started. */
static bool logits_are_finite(Session *s, const float *logits) {
    long bad = finite_first(logits, (size_t)s->model.cfg.vocab_size);
    if (bad < 0) return true;
    const char *first = finite_report(s->be);
    fprintf(stderr, "model-generate: step %d: the logits are not finite (%s at token %ld); %s%s\n",
            s->metrics.n_steps, isnan(logits[bad]) ? "NaN" : "Inf", bad,
            first ? "it started in " : "--check-finite names the first layer and buffer that went non-finite",
            first ? first : "");
    s->stop_reason = "error";
    return false;
}

bool session_push(Session *s, int32_t token, float prob, Phase phase, int rows, double forward_ms,
                  const float *logits) {
    if (!logits_are_finite(s, logits)) return true;
    int cap = tokenizer_max_token_bytes(s->tok) + 1;
    char *piece = xmalloc((size_t)cap);
    int n = tokenizer_token_bytes(s->tok, token, false, piece, cap);
    if (n < 0) n = 0; /* cannot happen: cap is the longest piece */
    metrics_step(&s->metrics, token, prob, phase, rows, forward_ms, piece, n);
    if (s->logits_file)
        fwrite(logits, sizeof(float), (size_t)s->model.cfg.vocab_size, s->logits_file);
    if (!s->opt.ignore_eos && tokenizer_is_eog(s->tok, token)) {
        s->stop_reason = "end of generation token";
        free(piece);
        return true;
    }
    s->tokens[s->n_tokens++] = token;
    emit_text(s, piece, n);
    free(piece);
    if (s->metrics.n_steps >= s->opt.max_new_tokens) {
        s->stop_reason = "max_new_tokens reached";
        return true;
    }
    return !session_has_room(s);
}

static void print_json(Session *s) {
    Buf b = {0};
    buf_printf(&b, "{\"model\":");
    json_append_string(&b, s->opt.model_path, strlen(s->opt.model_path));
    buf_printf(&b, ",\"backend\":\"%s\",\"threads\":%d,\"kv\":", s->be->name, s->be->n_threads);
    if (s->opt.kv) json_append_string(&b, s->opt.kv, strlen(s->opt.kv));
    else buf_puts(&b, "null");
    buf_puts(&b, ",\"prompt_tokens\":[");
    for (int i = 0; i < s->n_prompt; i++) buf_printf(&b, "%s%d", i ? "," : "", s->tokens[i]);
    buf_puts(&b, "],\"generated\":[");
    for (int i = 0; i < s->metrics.n_steps; i++) buf_printf(&b, "%s%d", i ? "," : "", s->metrics.steps[i].token);
    buf_puts(&b, "],\"text\":");
    json_append_string(&b, s->text.data ? s->text.data : "", s->text.len);
    buf_puts(&b, ",\"stop_reason\":");
    const char *r = s->stop_reason ? s->stop_reason : "none";
    json_append_string(&b, r, strlen(r));
    buf_puts(&b, ",");
    metrics_json(&s->metrics, &b);
    buf_puts(&b, "}\n");
    fwrite(b.data, 1, b.len, stdout);
    buf_free(&b);
}

void session_finish(Session *s) {
    char out[UTF8_STREAM_OUT_MAX(0)];
    size_t m = utf8_stream_flush(&s->stream, out);
    buf_append(&s->text, out, m);
    if (!s->opt.quiet && m) fwrite(out, 1, m, stdout);
    if (s->opt.json) {
        print_json(s);
        return;
    }
    if (s->opt.quiet) {
        metrics_print_summary(&s->metrics, stdout);
    } else {
        printf("\n");
        metrics_print(&s->metrics, stdout);
    }
    printf("stopped             %s\n", s->stop_reason ? s->stop_reason : "-");
    printf("model               %s (%d layers, dim %d, vocab %d, weights %.1f MB)\n", s->opt.model_path,
           s->model.cfg.n_layers, s->model.cfg.dim, s->model.cfg.vocab_size, s->model.weight_bytes / 1e6);
    printf("backend             %s, %d thread%s\n", s->be->name, s->be->n_threads, s->be->n_threads == 1 ? "" : "s");
}

int session_main_extra(int argc, char **argv, const char *const *kv_modes, const CliExtra *extra,
                       void (*generate)(Session *s)) {
    Session s;
    char err[ERR_MAX];
    int rc = session_open_extra(&s, argc, argv, kv_modes, extra, err);
    if (rc == 1) {
        cli_usage_extra(stdout, "model-generate", kv_modes, extra);
        return 0;
    }
    if (rc == 2) { /* --info: the summary, and whether this engine runs the file */
        rc = model_info_print(s.opt.model_path, stdout, err);
        if (rc != 0) fprintf(stderr, "model-generate: %s\n", err);
        return rc == 0 ? 0 : 1;
    }
    if (rc != 0) {
        fprintf(stderr, "model-generate: %s\n", err);
        return 1;
    }
    generate(&s);
    session_finish(&s);
    bool failed = s.stop_reason && strcmp(s.stop_reason, "error") == 0;
    session_close(&s);
    return failed ? 1 : 0;
}

int session_main(int argc, char **argv, const char *const *kv_modes, void (*generate)(Session *s)) {
    return session_main_extra(argc, argv, kv_modes, NULL, generate);
}
