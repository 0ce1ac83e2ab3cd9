/* cli.h: the command line of model-generate, shared by every chapter. A
 * chapter says which KV cache modes it knows; II.1 knows none, so --kv is an
 * unknown flag there. A chapter with a cache runs it by default, and
 * `--kv none` gives back the full recompute of II.1 for comparison. A chapter
 * may add options of its own (III.4's KV pool flags) through a CliExtra. */
#ifndef CLI_H
#define CLI_H

#include <stdbool.h>
#include <stdio.h>

/* The --kv value that turns the cache off. */
#define KV_NONE "none"

/* A chapter's own options, parsed together with the common ones. */
typedef struct {
    /* Takes argv[*i] if it is one of the chapter's options: returns 1 (with *i
     * moved past its value), 0 if it is not one, -1 with err if it is wrong. */
    int (*parse)(void *flags, int argc, char **argv, int *i, char *err);
    void (*usage)(FILE *f);  /* their lines in --help */
    void *flags;             /* what parse fills in; the chapter's loop reads it */
} CliExtra;

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
    const char *kv;           /* --kv mode (the chapter's first by default), NULL for none */
    int ctx;                  /* --ctx cap on the sequence length, 0 = the model's */
    const CliExtra *extra;    /* the chapter's own options, or NULL */
    bool info;                /* --info: print the model file's summary, generate nothing */
    bool check_finite;        /* --check-finite: find the first NaN/Inf activation */
} GenOptions;

/* kv_modes: NULL-terminated list of the chapter's cache kinds (the first is
 * the default), or NULL when the chapter has no --kv.
 * Returns 0 on success, 1 after printing --help, -1 with err on a bad command line. */
int cli_parse(GenOptions *o, int argc, char **argv, const char *const *kv_modes, char *err);
void cli_usage(FILE *f, const char *prog, const char *const *kv_modes);
/* The same with the chapter's own options (extra may be NULL). */
int cli_parse_extra(GenOptions *o, int argc, char **argv, const char *const *kv_modes, const CliExtra *extra,
                    char *err);
void cli_usage_extra(FILE *f, const char *prog, const char *const *kv_modes, const CliExtra *extra);

/* An integer option's value s in [min, max]: 0, or -1 with err naming the
 * option (what) and the range. Shared by every program's flags. */
int cli_parse_int(const char *s, const char *what, int min, int max, int *out, char *err);

#endif
