/* generate.h: chapter II.1's generation loop: greedy, one full forward per token. */
#ifndef GENERATE_H
#define GENERATE_H

#include "session.h"

/* Generates from s->tokens[0..n_prompt) until a stop condition. */
void generate(Session *s);

#endif
