/* generate.h: chapter III.4's generation loop: greedy; with a KV cache (paged
 * by default), one prefill then one cheap decode step per token. */
#ifndef GENERATE_H
#define GENERATE_H

#include "session.h"

/* Generates from s->tokens[0..n_prompt) until a stop condition. */
void generate(Session *s);

#endif
