/* metrics.h: what the harness measures while generating: one event per
 * generated token (which forward produced it, how long it took) and the
 * summary block: time to first token, decode tokens/s, per-forward ms. */
#ifndef METRICS_H
#define METRICS_H

#include <stdint.h>
#include <stdio.h>

#include "util.h"

typedef enum { PHASE_PREFILL, PHASE_DECODE } Phase;

typedef struct {
    int step;          /* 0-based generated-token index */
    int32_t token;
    float prob;        /* softmax probability of the chosen token */
    Phase phase;       /* prefill: the forward that read the prompt */
    int n_rows;        /* rows the forward processed (prompt length, 1, or all so far) */
    double forward_ms;
    char text[48];     /* the token's bytes, shown escaped; truncated for display */
} StepEvent;

typedef struct {
    double t_start;    /* before the first forward */
    double t_first;    /* when the first token was chosen */
    double t_last;     /* when the last token was chosen */
    int prompt_tokens;
    StepEvent *steps;
    int n_steps, cap;
} Metrics;

void metrics_begin(Metrics *m, int prompt_tokens);
void metrics_step(Metrics *m, int32_t token, float prob, Phase phase, int n_rows, double forward_ms,
                  const char *bytes, int n_bytes);
void metrics_free(Metrics *m);

double metrics_ttft_ms(const Metrics *m);
double metrics_decode_tps(const Metrics *m); /* tokens after the first / time after the first */

/* The human-readable table of steps and the summary block. */
void metrics_print(const Metrics *m, FILE *f);
/* The summary block alone (--quiet). */
void metrics_print_summary(const Metrics *m, FILE *f);
/* The same as a JSON object's members (no braces): "ttft_ms":..., "steps":[...]. */
void metrics_json(const Metrics *m, Buf *b);

const char *phase_name(Phase p);

#endif
