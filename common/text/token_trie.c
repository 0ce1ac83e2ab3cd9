/* token_trie.c: see token_trie.h. */
#include "token_trie.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"
#include "util.h"

/* The length of the UTF-8 character at s[0..n), 0 if it is not a whole, valid one
 * (no overlong or surrogate forms). */
static int utf8_char(const uint8_t *s, int n) {
    int k = s[0] < 0x80 ? 1 : s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3
          : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
    if (k == 0 || k > n) return 0;
    for (int j = 1; j < k; j++)
        if ((s[j] & 0xc0) != 0x80) return 0;
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f) || (s[0] == 0xf0 && s[1] < 0x90) ||
        (s[0] == 0xf4 && s[1] > 0x8f))
        return 0;
    return k;
}

/* tail[i] = the TRIE_* classes of s[i..n), for every i. */
static void tail_classes(const uint8_t *s, int n, uint8_t *tail) {
    for (int i = n - 1; i >= 0; i--) {
        uint8_t c = i + 1 < n ? tail[i + 1] & (uint8_t)~TRIE_NOT_UTF8 : 0;
        if (s[i] == '"') c |= TRIE_QUOTE;
        else if (s[i] == '\\') c |= TRIE_BACKSLASH;
        else if (s[i] < 0x20 || s[i] == 0x7f) c |= TRIE_CONTROL;
        int k = utf8_char(s + i, n - i);   /* whole UTF-8 from here: a character, then whole UTF-8 */
        if (k == 0 || (i + k < n && (tail[i + k] & TRIE_NOT_UTF8))) c |= TRIE_NOT_UTF8;
        tail[i] = c;
    }
}

typedef struct {
    const char *s;
    int32_t n, id;
} SortKey;

static int cmp_keys(const void *a, const void *b) {
    const SortKey *x = a, *y = b;
    int c = memcmp(x->s, y->s, (size_t)(x->n < y->n ? x->n : y->n));
    if (c) return c;
    if (x->n != y->n) return x->n < y->n ? -1 : 1;   /* a prefix sorts first: it ends at the node */
    return x->id < y->id ? -1 : x->id > y->id;
}

/* order[0..n) sorted by the tokens' bytes. */
static void sort_order(TokenTrie *t) {
    SortKey *k = xmalloc(sizeof *k * (size_t)(t->n_order ? t->n_order : 1));
    for (int i = 0; i < t->n_order; i++)
        k[i] = (SortKey){token_trie_bytes(t, t->order[i]), token_trie_len(t, t->order[i]), t->order[i]};
    qsort(k, (size_t)t->n_order, sizeof *k, cmp_keys);
    for (int i = 0; i < t->n_order; i++) t->order[i] = k[i].id;
    free(k);
}

static int32_t new_node(TokenTrie *t, int *cap) {
    if (t->n_nodes == *cap) {
        *cap = *cap ? 2 * *cap : 1024;
        t->nodes = xrealloc(t->nodes, sizeof *t->nodes * (size_t)*cap);
    }
    return t->n_nodes++;
}

/* The node for the prefix order[lo..hi) share, depth bytes long, reached by byte. */
static int32_t build(TokenTrie *t, int *cap, const uint8_t *tails, int lo, int hi, int depth, uint8_t byte) {
    int32_t me = new_node(t, cap);
    uint8_t cls = 0;   /* the classes of the tokens' bytes from this node's byte on */
    for (int k = lo; depth > 0 && k < hi; k++) cls |= tails[t->start[t->order[k]] + depth - 1];
    int i = lo;
    while (i < hi && token_trie_len(t, t->order[i]) == depth) i++;
    t->nodes[me] = (TrieNode){.child = -1, .sibling = -1, .lo = lo, .end = i, .hi = hi,
                              .max_len = (uint16_t)depth, .byte = byte};
    int32_t prev = -1;
    while (i < hi) {   /* the children: runs of one byte at this depth */
        uint8_t b = (uint8_t)token_trie_bytes(t, t->order[i])[depth];
        int j = i;
        while (j < hi && (uint8_t)token_trie_bytes(t, t->order[j])[depth] == b) j++;
        int32_t c = build(t, cap, tails, i, j, depth + 1, b);
        if (prev < 0) t->nodes[me].child = c;
        else t->nodes[prev].sibling = c;
        prev = c;
        if (t->nodes[c].max_len > t->nodes[me].max_len) t->nodes[me].max_len = t->nodes[c].max_len;
        i = j;
    }
    t->nodes[me].classes = cls;
    return me;
}

TokenTrie *token_trie_build(const Tokenizer *tok) {
    TokenTrie *t = xcalloc(1, sizeof *t);
    int V = tokenizer_vocab_size(tok), max = tokenizer_max_token_bytes(tok) + 1;
    t->n_vocab = V;
    t->start = xmalloc(sizeof *t->start * ((size_t)V + 1));
    Buf all = {0};
    char *piece = xmalloc((size_t)max);
    t->start[0] = 0;
    for (int id = 0; id < V; id++) {
        int n = tokenizer_token_bytes(tok, id, false, piece, max);
        if (n > 0xffff) n = 0;   /* longer than a node can say: never in a constrained reply */
        if (n > 0) buf_append(&all, piece, (size_t)n);
        t->start[id + 1] = (int32_t)all.len;
    }
    free(piece);
    t->bytes = all.data ? all.data : xcalloc(1, 1);
    uint8_t *tails = xmalloc((size_t)t->start[V] + 1);
    t->order = xmalloc(sizeof *t->order * (size_t)V);
    t->eog = xmalloc(sizeof *t->eog * (size_t)V);
    for (int id = 0; id < V; id++) {
        int n = token_trie_len(t, id);
        tail_classes((const uint8_t *)token_trie_bytes(t, id), n, tails + t->start[id]);
        if (n > 0) t->order[t->n_order++] = id;
        if (tokenizer_is_eog(tok, id)) t->eog[t->n_eog++] = id;
    }
    sort_order(t);
    int cap = 0;
    build(t, &cap, tails, 0, t->n_order, 0, 0);
    free(tails);
    return t;
}

void token_trie_free(TokenTrie *t) {
    if (!t) return;
    free(t->bytes), free(t->start), free(t->order), free(t->nodes), free(t->eog);
    free(t);
}
