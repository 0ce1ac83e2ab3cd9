/* run.h: running the chapters' model-generate programs from tests. */
#ifndef RUN_H
#define RUN_H

#include <stdbool.h>
#include <stdint.h>

/* One way to run: a chapter and its extra flags ("" or "--kv basic"). */
typedef struct {
    char chapter[32];
    char flags[64];
} RunMode;

typedef struct {
    int32_t prompt[4096];
    int n_prompt;
    int32_t generated[4096];
    int n_generated;
    float *logits;     /* [n_logit_rows, vocab] from --logits */
    long n_logit_rows;
    char *text;
    char *stdout_text; /* everything the program printed */
    int exit_code;
} RunResult;

/* Every chapter built under build/, and for each, the plain run plus one run
 * per --kv mode its --help lists. Returns the number of modes written. */
int run_modes(RunMode *modes, int max);

/* Runs build/<chapter>/model-generate <flags> <extra> --json --logits TMP
 * --prompt-file prompt_file model n. Returns false (with a test failure) if
 * the program failed or its output did not parse. */
bool run_generate(const RunMode *mode, const char *extra, const char *model, const char *prompt_file, int n,
                  int vocab, RunResult *r);
/* Runs a shell command line, capturing stdout+stderr; returns the exit code. */
int run_capture(const char *cmd, char **output);
void run_free(RunResult *r);
/* Reads every integer of a text file (token ids); -1 with a test failure if unreadable. */
int read_id_file(const char *path, int32_t *ids, int max);

#endif
