/* batched.h: the batched-decode sweep of `make bench`: chapter III.7's
 * batched-bench (seq_decode_batch alone, like llama.cpp's llama-batched-bench
 * S_TG) for each batch size, against the two limits of a decode step: memory
 * bandwidth (each step reads every weight once, for all B rows) and the
 * machine's peak arithmetic (tools/flops). */
#ifndef BENCH_BATCHED_H
#define BENCH_BATCHED_H

#include <stdbool.h>
#include <stdio.h>

#include "command.h"

/* The machine's limits, measured once per bench run. */
typedef struct {
    int threads;            /* N of the "_n" figures */
    double gbps_1, gbps_n;  /* read bandwidth (tools/membw) */
    double f32_1, f32_n;    /* float multiply-adds, GFLOP/s (tools/flops) */
    double i8_1, i8_n;      /* 8-bit multiply-adds, G/s */
} Limits;

/* One batch size of one weight type and backend. */
typedef struct {
    char type[16], backend[16];
    int threads, batch, prompt, steps;
    double step_ms, best_step_ms, tps; /* tps: aggregate decode tokens/s of all B sequences */
    double base_tps;                   /* the same type and backend at the first batch size */
    double bw_limit, compute_limit;    /* tokens/s each limit allows at this batch size */
    bool ok;
} BatchRow;

/* The sweep's settings. */
typedef struct {
    const char *program;  /* the batched-bench to run */
    const char *batches;  /* "1 2 4 8" */
    int prompt, steps, runs;
} BatchPlan;

/* Runs tools/flops into lim (membw's figures are the caller's); false if it failed. */
bool batched_limits(const char *build, int threads, Limits *lim);
/* The sweep of one model (weight type name `type`) on one backend: appends one
 * row per batch size to rows (at most max), returns how many. */
int batched_sweep(const BatchPlan *p, const char *model, const char *type, const char *backend, int threads,
                  const Limits *lim, BatchRow *rows, int max);
/* The whole sweep: tools/flops into lim (whose bandwidth figures and threads
 * the caller has set), then batched_sweep for every type (its model at
 * models/qwen3-0.6b-TYPE.gguf) and backend (parallel with lim->threads, the
 * others with 1). *rows gets a new array; returns its length (0: nothing ran). */
int batched_run(const BatchPlan *p, const char *build, const char *models, char *const *types, int n_types,
                char *const *backends, int n_backends, Limits *lim, BatchRow **rows);
/* The table (markdown) and the JSON members "flops" and "batched" of the rows. */
void batched_print(FILE *f, const BatchPlan *p, const BatchRow *rows, int n, const Limits *lim);
void batched_json(FILE *f, const BatchRow *rows, int n, const Limits *lim);

#endif
