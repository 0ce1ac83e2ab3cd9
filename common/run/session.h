/* session.h: everything model-generate needs around a chapter's generation
 * loop: the command line, the model, tokenizer and backend, the prompt's
 * tokens, and the output (streamed text, per-step events, --logits file,
 * metrics or --json). The loop itself, with its forward passes, is the
 * chapter's own. */
#ifndef SESSION_H
#define SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "backend.h"
#include "cli.h"
#include "metrics.h"
#include "qwen3.h"
#include "tokenizer.h"
#include "unicode.h"

typedef struct {
    GenOptions opt;
    Qwen3Model model;
    Tokenizer *tok;
    Backend *be;
    int32_t *tokens;      /* [ctx]: prompt then generated tokens */
    int n_prompt;
    int n_tokens;
    int ctx;              /* the longest sequence allowed: --ctx or the model's */
    Metrics metrics;
    Utf8Stream stream;
    Buf text;             /* the generated text (complete characters) */
    FILE *logits_file;
    const char *stop_reason;
    char stop_text[128];  /* a stop_reason with numbers in it */
} Session;

/* Parses the command line, loads everything, tokenizes the prompt.
 * Returns 0 to go on, 1 when --help was asked for, 2 for --info (nothing
 * loaded), -1 with err on failure. */
int session_open(Session *s, int argc, char **argv, const char *const *kv_modes, char *err);
/* The same with the chapter's own options (cli.h). */
int session_open_extra(Session *s, int argc, char **argv, const char *const *kv_modes, const CliExtra *extra,
                       char *err);
void session_close(Session *s);

/* Records the token chosen after a forward: appends it, writes its logits row,
 * streams its text. Returns true when generation must stop (end-of-generation
 * token, max_new_tokens reached or context full), with s->stop_reason set. */
bool session_push(Session *s, int32_t token, float prob, Phase phase, int rows, double forward_ms,
                  const float *logits);
/* Checks there is room for one more token; false with stop_reason if not. */
bool session_has_room(Session *s);
/* Flushes the text and prints the table and metrics (or the JSON object). */
void session_finish(Session *s);

/* The whole of a chapter's model-generate: open the session (or print --help,
 * or the model summary for --info), run the chapter's generation loop, print
 * the results. Returns the exit code. */
int session_main(int argc, char **argv, const char *const *kv_modes, void (*generate)(Session *s));
int session_main_extra(int argc, char **argv, const char *const *kv_modes, const CliExtra *extra,
                       void (*generate)(Session *s));

#endif
