/* cli.h: the command line of model-generate, shared by every chapter. A
 * chapter says which KV cache modes it knows; II.1 knows none, so --kv is an
 * unknown flag there. */
#ifndef CLI_H
#define CLI_H

#include <stdbool.h>
#include <stdio.h>

typedef struct {
    const char *model_path;
    const char *prompt;       /* from the command line, or NULL */
    const char *prompt_file;  /* --prompt-file: exact bytes */
    int max_new_tokens;
    const char *backend;      /* NULL: the fastest available */
    int threads;              /* 0: one per core */
    bool no_special;          /* special-token text stays plain text */
    bool ignore_eos;          /* do not stop at end-of-generation tokens */
    bool json;                /* one JSON object on stdout at the end */
    bool quiet;               /* no streamed text, no table (with --json implied) */
    const char *logits_path;  /* --logits: every step's logits as float32 rows */
    const char *kv;           /* --kv mode, NULL when not given */
    int ctx;                  /* --ctx cap on the sequence length, 0 = the model's */
    bool check_finite;        /* --check-finite: find the first NaN/Inf activation */
} GenOptions;

/* kv_modes: NULL-terminated list of the chapter's cache kinds (the first is
 * what a bare --kv means), or NULL when the chapter has no --kv.
 * Returns 0 on success, 1 after printing --help, -1 with err on a bad command line. */
int cli_parse(GenOptions *o, int argc, char **argv, const char *const *kv_modes, char *err);
void cli_usage(FILE *f, const char *prog, const char *const *kv_modes);

#endif
