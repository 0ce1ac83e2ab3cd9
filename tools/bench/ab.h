/* ab.h: III.7's A/B in `make bench`: for each weight type, tools/bench/ab.sh
 * runs the same streaming load (tools/loadgen) against chat-server with
 * --max-concurrent 1 and with --max-concurrent C, and reports both aggregate
 * output tokens/s, their ratio and the median time to first token and
 * inter-token latency of each. */
#ifndef BENCH_AB_H
#define BENCH_AB_H

#include <stdbool.h>
#include <stdio.h>

/* One weight type's A/B (the fields of ab.sh's ab.json). */
typedef struct {
    char type[16];
    int requests, concurrency, prompt_tokens, output_tokens;
    double tps_1, tps_n, ratio;
    double ttft_p50_ms_1, ttft_p50_ms_n, itl_p50_ms_1, itl_p50_ms_n;
    bool ok;
} AbRow;

/* What to run: load is "N C PROMPT OUTPUT" (ab.sh's arguments). */
typedef struct {
    const char *script, *server, *loadgen, *load, *out;
    int threads;
} AbPlan;

/* The A/B of models/qwen3-0.6b-TYPE.gguf for each of types[0..n_types), each
 * in OUT/ab-TYPE/; *rows gets a new array of n_types rows (a failed one has ok
 * false). Returns n_types, or 0 when the plan has no load. */
int ab_run(const AbPlan *p, const char *models, char *const *types, int n_types, AbRow **rows);
/* The table (markdown), and the JSON member "ab":[...]. */
void ab_print(FILE *f, const AbPlan *p, const AbRow *rows, int n);
void ab_json(FILE *f, const AbRow *rows, int n);

#endif
