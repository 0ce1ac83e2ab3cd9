/* token_trie.h: a vocabulary as a byte trie, for constrained sampling (grammar.h).
 *
 * A grammar asks, at every step, which of the vocabulary's tokens may come
 * next. Asking it of 151,936 tokens one by one repeats the same work: "the",
 * "them", "theory" all begin with "the". So the tokens' bytes are sorted and
 * laid out as a trie: a node is a prefix, its children the bytes that extend
 * it. A walk that finds a prefix illegal skips every token below it at once.
 *
 * Sorting makes every node's tokens one run of the sorted list: the node for
 * "the" owns order[lo..hi), the tokens ending exactly there come first
 * (order[lo..end)), then its children's runs in byte order. A walk that finds
 * a whole subtree legal marks that run without visiting it; the byte classes
 * each node records (TRIE_*) of the bytes below it are how it knows.
 *
 * Tokens with no bytes (CONTROL ones such as <|im_end|>, unused fillers) are
 * not in the trie: a grammar decides on them by id (eog[] lists the
 * end-of-generation ones). */
#ifndef TOKEN_TRIE_H
#define TOKEN_TRIE_H

#include <stdint.h>

struct Tokenizer;

/* Byte classes found in the tokens' bytes from a node's byte to their end. */
enum {
    TRIE_QUOTE = 1,      /* '"' */
    TRIE_BACKSLASH = 2,  /* '\\' */
    TRIE_CONTROL = 4,    /* a byte below 0x20 or 0x7f */
    TRIE_NOT_UTF8 = 8,   /* those bytes are not a whole, valid UTF-8 text by themselves */
};

typedef struct {
    int32_t child, sibling;   /* first child (lowest byte) and next sibling, -1 for none */
    int32_t lo, end, hi;      /* its tokens are order[lo..hi); order[lo..end) end at this node */
    uint16_t max_len;         /* the longest token below, in bytes from the root */
    uint8_t byte;             /* the byte from the parent to this node */
    uint8_t classes;          /* TRIE_* bits of the bytes from this node's byte on, in every token below */
} TrieNode;

typedef struct TokenTrie {
    int n_vocab;
    char *bytes;              /* every token's bytes, back to back */
    int32_t *start;           /* [n_vocab + 1] token id's bytes are bytes[start[id] .. start[id + 1]) */
    int32_t *order;           /* [n_order] the ids with bytes, sorted by bytes (then id) */
    int n_order;
    TrieNode *nodes;          /* [n_nodes]; nodes[0] is the root, the empty prefix */
    int n_nodes;
    int32_t *eog;             /* [n_eog] end-of-generation ids (tokenizer_is_eog) */
    int n_eog;
} TokenTrie;

/* Builds the trie of tok's vocabulary: each token's bytes as
 * tokenizer_token_bytes(tok, id, false) gives them, the text a reply shows. */
TokenTrie *token_trie_build(const struct Tokenizer *tok);
void token_trie_free(TokenTrie *t);

static inline int token_trie_len(const TokenTrie *t, int32_t id) { return t->start[id + 1] - t->start[id]; }
static inline const char *token_trie_bytes(const TokenTrie *t, int32_t id) { return t->bytes + t->start[id]; }

#endif
