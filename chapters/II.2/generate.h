/* generate.h: chapter II.2's generation loop: greedy; with the KV cache (the
 * default), one prefill then one cheap decode step per token. */
#ifndef GENERATE_H
#define GENERATE_H

#include "session.h"

/* Generates from s->tokens[0..n_prompt) until a stop condition. */
void generate(Session *s);

#endif
