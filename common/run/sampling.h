/* sampling.h: choosing the next token from the logits.
 *
 * Greedy decoding takes the largest logit. Sampling instead draws from the
 * distribution the logits define, reshaped by a few knobs, in this order:
 *
 *   penalties (repetition, presence, frequency) on the logits of tokens already
 *   generated -> temperature (logit / T) -> softmax -> top-k -> top-p -> min-p
 *   -> renormalize -> draw with our own seeded generator.
 *
 * (HF transformers and vLLM apply temperature before the filters, as here;
 * llama.cpp's default chain filters first.) Every step that decides a token
 * uses integers or IEEE float/double + - * / and a hand-written exp, never the
 * C library's exp, so the same logits and seed give the same tokens on every
 * machine and libc (built as the project builds, without fused multiply-adds).
 * Numbers that are only reported (a greedy token's probability, logprobs) may
 * use libm. */
#ifndef SAMPLING_H
#define SAMPLING_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    float temperature;        /* <= 0: greedy (argmax, bitwise what argmax() gives) */
    int   top_k;              /* <= 0: off */
    float top_p;              /* >= 1: off */
    float min_p;              /* <= 0: off */
    float presence_penalty;   /* OpenAI's, 0: off */
    float frequency_penalty;  /* OpenAI's, 0: off */
    float repetition_penalty; /* llama.cpp/HF style, 1: off */
    uint64_t seed;
} SamplerParams;

SamplerParams sampler_params_default(void);              /* greedy, no penalties */

/* 0 when p is usable, else -1 and one line in err (ERR_MAX bytes) naming the
 * field: NaN anywhere, top_p or min_p outside [0, 1], repetition_penalty <= 0,
 * presence/frequency penalty outside [-2, 2] (OpenAI's range). */
int sampler_params_check(const SamplerParams *p, char *err);

typedef struct Sampler Sampler;
/* NULL if vocab_size < 1 or sampler_params_check fails. */
Sampler *sampler_create(const SamplerParams *p, int vocab_size);
void     sampler_free(Sampler *s);
/* The next token from logits[vocab] (left unchanged); *prob = its probability
 * under the final distribution (may be NULL). Ties go to the lowest id. */
int32_t  sampler_sample(Sampler *s, const float *logits, float *prob);
/* Records a generated token (for the penalties). */
void     sampler_accept(Sampler *s, int32_t token);
/* Forgets the recorded tokens (a new reply starts); the generator goes on. */
void     sampler_reset_history(Sampler *s);
/* log-softmax of the raw logits for the top k tokens, best first (for logprobs).
 * Returns how many were written: min(k, vocab), 0 when k <= 0. */
int      sampler_top_logprobs(const float *logits, int vocab, int k, int32_t *ids, float *logprobs);

/* The random generator: SplitMix64 (a 64-bit counter passed through a mixing
 * function), integers only, so a seed means the same stream everywhere. */
typedef struct {
    uint64_t state;
} Rng;
void     rng_seed(Rng *r, uint64_t seed);
uint64_t rng_next(Rng *r);
double   rng_uniform(Rng *r);   /* in [0, 1), a multiple of 2^-53 */

/* w[0] + w[1] + ... + w[n - 1] added in this order from 0, each w >= 0 (or
 * NaN): the bits of the plain loop, found a block at a time instead of one
 * addition after another (sampling.c says how). ends (NULL: not kept) gets
 * the running sum after each whole block of SAMPLING_SUM_BLOCK. The vector
 * code is the widest this machine has, or the one SIMD_ISA names (the
 * variable the kernels read: any avx512 name, any avx2 name; anything else: none);
 * a Sampler makes the same choice once, when it is created, and every choice
 * gives the same bits. */
#define SAMPLING_SUM_BLOCK 64
double sampling_sum_in_order(const double *w, int n, double *ends);

/* e^x with + - * / only (error < 1e-15 relative): the same bits on every machine.
 * e^-inf = 0. */
double sampling_exp(double x);

#endif
