/* tokenizer.h: Qwen's byte-level BPE tokenizer (GGUF tokenizer.ggml.model "gpt2",
 * pre-tokenizer "qwen2"), giving the same token ids as llama.cpp.
 *
 * Encoding text takes three steps:
 *  1. special tokens: the texts of CONTROL / USER_DEFINED / UNKNOWN tokens are
 *     cut out of the input first, longest first (so "<|im_start|>" becomes one id
 *     instead of eight pieces of punctuation and letters);
 *  2. pre-tokenization: the rest is split into pieces (words with their leading
 *     space, single digits, punctuation runs, white space) by the qwen2 rules,
 *     written as plain code instead of a regular expression;
 *  3. BPE: each piece's bytes, written in the vocabulary's byte-level alphabet,
 *     are merged pair by pair, always the pair of lowest merge rank first.
 * Decoding maps each token's text back to bytes. */
#ifndef TOKENIZER_H
#define TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

/* Token types, as stored in tokenizer.ggml.token_type. */
enum {
    TOKEN_NORMAL = 1,       /* ordinary text in byte-level form */
    TOKEN_UNKNOWN = 2,
    TOKEN_CONTROL = 3,      /* <|im_start|>, <|im_end|>, ...: markup, not text */
    TOKEN_USER_DEFINED = 4, /* added tokens such as <think>: literal text */
    TOKEN_UNUSED = 5,       /* [PAD...] fillers */
    TOKEN_BYTE = 6,
};

typedef struct Tokenizer Tokenizer;

/* Reads the vocabulary of a GGUF file: tokenizer.ggml.model (must be "gpt2"),
 * .pre (absent or a qwen2 variant), .tokens, .token_type (optional, default
 * NORMAL), .merges, .eos_token_id and .bos_token_id (optional). Returns NULL and
 * writes err, naming the key, on failure. The tokenizer copies what it needs,
 * so g may be closed afterwards. */
Tokenizer *tokenizer_load(const GgufFile *g, char *err);

/* Builds a tokenizer from memory (tests, tools). tokens[i] is the text of id i
 * in byte-level form (added tokens in literal form); types may be NULL (all
 * NORMAL); merges[r] is "left right", rank r. Everything is copied. */
Tokenizer *tokenizer_build(const char *const *tokens, const int32_t *types, int n_tokens,
                           const char *const *merges, int n_merges, char *err);
void tokenizer_free(Tokenizer *t);

int tokenizer_vocab_size(const Tokenizer *t);
/* The longest byte string tokenizer_token_bytes can produce. */
int tokenizer_max_token_bytes(const Tokenizer *t);

/* Encodes text[0..len) into *ids (malloc'ed, caller frees; no BOS added) and
 * *n_ids. parse_special: CONTROL tokens written in the text become their ids
 * (use it for rendered chat templates); when false they are tokenized as plain
 * text, while USER_DEFINED tokens are still split out, as llama.cpp does.
 * Invalid UTF-8 is tokenized as U+FFFD, one per bad byte. Returns 0 (err is
 * kept for interface symmetry and future limits). */
int tokenizer_encode(const Tokenizer *t, const char *text, size_t len, bool parse_special,
                     int32_t **ids, int *n_ids, char *err);

/* The bytes token id stands for, written to buf: NORMAL tokens decoded from the
 * byte-level form, USER_DEFINED ones literally, CONTROL/UNKNOWN ones as "" unless
 * render_special (then literally), UNUSED/BYTE/out-of-range ones as "". Returns
 * the length, or -(length needed) if cap is too small (nothing written).
 * No NUL is added. A token may end inside a UTF-8 character: see Utf8Stream. */
int tokenizer_token_bytes(const Tokenizer *t, int32_t id, bool render_special, char *buf, int cap);

/* Decodes a whole id sequence into a malloc'ed NUL-terminated string (*len
 * bytes, may be NULL). Invalid UTF-8 is kept as is (use Utf8Stream to print). */
char *tokenizer_decode(const Tokenizer *t, const int32_t *ids, int n_ids, bool render_special,
                       size_t *len);

/* The stored text of a token (byte-level form, e.g. "Ġthe"), or NULL if out of range. */
const char *tokenizer_token_text(const Tokenizer *t, int32_t id);
int tokenizer_token_type(const Tokenizer *t, int32_t id); /* TOKEN_*, or 0 if out of range */
/* The id of a token whose stored text is exactly text, or -1. */
int tokenizer_find(const Tokenizer *t, const char *text);

/* End of generation: the eos id, and the tokens named <|im_end|>, <|endoftext|>,
 * <|fim_pad|>, <|repo_name|>, <|file_sep|> when the vocabulary has them (the set
 * llama.cpp stops on). */
bool tokenizer_is_eog(const Tokenizer *t, int32_t id);
int32_t tokenizer_eos(const Tokenizer *t); /* tokenizer.ggml.eos_token_id, or -1 */
int32_t tokenizer_bos(const Tokenizer *t); /* tokenizer.ggml.bos_token_id, or -1 (Qwen never adds it) */

/* The vocabulary as a byte trie (token_trie.h), for constrained sampling:
 * built on the first call (about 0.1 s for Qwen3's 151,936 tokens), kept
 * until tokenizer_free; safe to call from many threads. */
const struct TokenTrie *tokenizer_trie(const Tokenizer *t);

/* The qwen2 pre-tokenizer alone (step 2), for tests and for showing how text is
 * cut: returns the number of pieces and sets *ends (malloc'ed) to the byte
 * offset where each piece ends; piece i spans [ends[i-1], ends[i]). */
int tokenizer_pretokenize(const char *text, size_t len, size_t **ends);

#endif
