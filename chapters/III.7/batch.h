/* batch.h: one decode step for many sequences at once, the book's last
 * lesson. B requests decoding side by side, one forward each, would each
 * stream every weight from memory to multiply it by one row; stacked into one
 * [B, dim] matrix, they stream each weight once for all B rows, and a decode
 * step costs about what one costs alone until arithmetic, not memory, is the
 * limit. Attention stays per sequence, over its own cache. The scheduler
 * calls this once per tick with the slots that are decoding. */
#ifndef BATCH_H
#define BATCH_H

#include <stdint.h>

#include "sequence.h"

/* One decode step for B distinct sequences of one model and backend: toks[i]
 * runs at position seqs[i]->n_tokens of sequence i and joins its tokens, and
 * seqs[i]->logits gets its prediction, bit for bit what
 * seq_extend(seqs[i], &toks[i], 1, err) gives alone. B == 1 is exactly that
 * call. Everything is checked and room reserved in every cache first: -1 with
 * err naming the sequence at fault ("sequence 3 of 8: ..."), and then no
 * sequence has changed. */
int seq_decode_batch(Sequence *const *seqs, const int32_t *toks, int B, char *err);

#endif
