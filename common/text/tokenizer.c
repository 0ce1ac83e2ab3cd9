/* tokenizer.c: see tokenizer.h.
 *
 * Symbols. BPE works on "symbols": strings of byte-level characters. Every
 * symbol that can ever appear is known in advance (the 256 byte characters and
 * the result of each merge), so we number them once at load time and the merge
 * loop only compares integers. In a real vocabulary each symbol is a token and
 * its number is the token id; a symbol that is not a token (possible in
 * hand-made vocabularies) gets a number >= n_vocab and, as in llama.cpp, is
 * emitted at the end as the tokens of its single characters. */
#include "tokenizer.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "token_trie.h"
#include "unicode.h"
#include "util.h"

typedef struct {
    uint64_t key;   /* (left symbol + 1) << 32 | (right symbol + 1); 0 = empty slot */
    int32_t rank;   /* index in tokenizer.ggml.merges: lower merges first */
    int32_t result; /* the symbol left+right */
} MergeSlot;

typedef struct {
    int32_t id;
    uint32_t len;
} Special;

#define MAX_EOG 8

struct Tokenizer {
    int n_vocab;          /* tokens */
    int n_syms;           /* tokens, then extra symbols that are not tokens */
    int cap_syms;
    uint32_t *text_off;   /* [cap_syms] symbol text: arena.data + text_off[i] */
    uint32_t *text_len;
    Buf arena;            /* all texts, each NUL-terminated */
    int32_t *type;        /* [n_vocab] TOKEN_* */

    int32_t *text_index;  /* open addressing: symbol text -> symbol id, -1 = empty */
    uint32_t text_mask;
    MergeSlot *merge_index; /* open addressing: (left, right) -> rank, result */
    uint32_t merge_mask;

    int32_t byte_sym[256];  /* the symbol of each byte's byte-level character */
    Special *specials;      /* CONTROL / USER_DEFINED / UNKNOWN tokens, longest first */
    int n_specials;
    int32_t eos, bos;
    int32_t eog[MAX_EOG];
    int n_eog;
    int max_token_bytes;
    pthread_mutex_t trie_mu;  /* guards trie: built on first use (tokenizer_trie) */
    TokenTrie *trie;
};

/* ---- Hash tables ---------------------------------------------------------------- */

static uint32_t hash_bytes(const char *s, size_t n) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static uint32_t hash_pair(uint64_t key) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return (uint32_t)key;
}

static uint32_t pow2_at_least(uint64_t n) {
    uint32_t c = 16;
    while (c < n) c *= 2;
    return c;
}

static const char *sym_text(const Tokenizer *t, int32_t id) { return t->arena.data + t->text_off[id]; }

/* The slot of text in text_index: where it is, or the empty slot where it would go. */
static uint32_t text_slot(const Tokenizer *t, const char *s, size_t n) {
    uint32_t i = hash_bytes(s, n) & t->text_mask;
    for (;;) {
        int32_t id = t->text_index[i];
        if (id < 0 || (t->text_len[id] == n && memcmp(sym_text(t, id), s, n) == 0)) return i;
        i = (i + 1) & t->text_mask;
    }
}

static int32_t sym_lookup(const Tokenizer *t, const char *s, size_t n) {
    return t->text_index[text_slot(t, s, n)];
}

/* Appends a symbol (its text copied to the arena) and indexes it; a later
 * symbol with the same text replaces an earlier one in the index (llama.cpp
 * keeps the last duplicate too). */
static int32_t sym_add(Tokenizer *t, const char *s, size_t n) {
    int32_t id = t->n_syms++;
    t->text_off[id] = (uint32_t)t->arena.len;
    t->text_len[id] = (uint32_t)n;
    buf_append(&t->arena, s, n);
    buf_append(&t->arena, "", 1);
    t->text_index[text_slot(t, s, n)] = id;
    return id;
}

/* The symbol of a text, created as an extra (non-token) symbol if new. */
static int32_t sym_intern(Tokenizer *t, const char *s, size_t n) {
    int32_t id = sym_lookup(t, s, n);
    return id >= 0 ? id : sym_add(t, s, n);
}

static uint64_t pair_key(int32_t left, int32_t right) {
    return (uint64_t)(uint32_t)(left + 1) << 32 | (uint32_t)(right + 1);
}

static const MergeSlot *merge_find(const Tokenizer *t, int32_t left, int32_t right) {
    uint64_t key = pair_key(left, right);
    uint32_t i = hash_pair(key) & t->merge_mask;
    while (t->merge_index[i].key != 0) {
        if (t->merge_index[i].key == key) return &t->merge_index[i];
        i = (i + 1) & t->merge_mask;
    }
    return NULL;
}

/* Records a merge unless the pair already has one (the lower rank wins). */
static void merge_add(Tokenizer *t, int32_t left, int32_t right, int32_t rank, int32_t result) {
    uint64_t key = pair_key(left, right);
    uint32_t i = hash_pair(key) & t->merge_mask;
    while (t->merge_index[i].key != 0) {
        if (t->merge_index[i].key == key) return;
        i = (i + 1) & t->merge_mask;
    }
    t->merge_index[i] = (MergeSlot){key, rank, result};
}

/* ---- Building ---------------------------------------------------------------------- */

/* A merge "left right": split at the first space after the first byte (a left
 * part cannot be empty). Returns false if there is no such space. */
static bool merge_split(GgufStr m, size_t *left_len) {
    for (size_t i = 1; i < m.len; i++)
        if (m.ptr[i] == ' ') {
            *left_len = i;
            return true;
        }
    return false;
}

/* Pass 1 over the merges: give every merge result a symbol, so that pass 2 can
 * tell a part that some merge produces from one that can never occur. */
static int intern_merge_results(Tokenizer *t, const GgufStr *merges, int n_merges, char *err) {
    Buf cat = {0};
    for (int r = 0; r < n_merges; r++) {
        size_t ll;
        if (!merge_split(merges[r], &ll)) {
            err_set(err, "tokenizer.ggml.merges[%d] = '%.*s' has no space between its two parts", r,
                    (int)(merges[r].len > 80 ? 80 : merges[r].len), merges[r].ptr);
            buf_free(&cat);
            return -1;
        }
        cat.len = 0;
        buf_append(&cat, merges[r].ptr, ll);
        buf_append(&cat, merges[r].ptr + ll + 1, merges[r].len - ll - 1);
        sym_intern(t, cat.data, cat.len);
    }
    buf_free(&cat);
    return 0;
}

/* Pass 2: index each merge by its pair of symbols. */
static void index_merges(Tokenizer *t, const GgufStr *merges, int n_merges) {
    Buf cat = {0};
    for (int r = 0; r < n_merges; r++) {
        size_t ll = 0;
        if (!merge_split(merges[r], &ll)) continue; /* rejected in pass 1 */
        const char *right = merges[r].ptr + ll + 1;
        size_t rl = merges[r].len - ll - 1;
        int32_t a = sym_lookup(t, merges[r].ptr, ll), b = sym_lookup(t, right, rl);
        if (a < 0 || b < 0) continue; /* a part that never occurs: the merge can never apply */
        cat.len = 0;
        buf_append(&cat, merges[r].ptr, ll);
        buf_append(&cat, right, rl);
        merge_add(t, a, b, r, sym_lookup(t, cat.data, cat.len));
    }
    buf_free(&cat);
}

static bool is_special_type(int32_t type) {
    return type == TOKEN_CONTROL || type == TOKEN_USER_DEFINED || type == TOKEN_UNKNOWN;
}

static int special_cmp(const void *pa, const void *pb) {
    const Special *a = pa, *b = pb;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* The tokens cut out of the text before BPE, longest first, so that a token
 * that contains another (or overlaps it) wins. */
static void collect_specials(Tokenizer *t) {
    t->specials = xmalloc((size_t)t->n_vocab * sizeof *t->specials);
    for (int32_t id = 0; id < t->n_vocab; id++)
        if (is_special_type(t->type[id]) && t->text_len[id] > 0)
            t->specials[t->n_specials++] = (Special){id, t->text_len[id]};
    qsort(t->specials, (size_t)t->n_specials, sizeof *t->specials, special_cmp);
}

static void add_eog(Tokenizer *t, int32_t id) {
    if (id < 0 || id >= t->n_vocab || t->n_eog == MAX_EOG) return;
    for (int i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) return;
    t->eog[t->n_eog++] = id;
}

/* The end-of-generation set: eos, plus these tokens found by their text. */
static void collect_eog(Tokenizer *t) {
    static const char *const names[] = {"<|im_end|>", "<|endoftext|>", "<|fim_pad|>",
                                        "<|repo_name|>", "<|file_sep|>"};
    t->n_eog = 0;
    add_eog(t, t->eos);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) add_eog(t, tokenizer_find(t, names[i]));
}

static Tokenizer *build(const GgufStr *tokens, const int32_t *types, int n_tokens,
                        const GgufStr *merges, int n_merges, char *err) {
    if (n_tokens <= 0 || n_merges < 0 || (int64_t)n_tokens + 256 + n_merges > INT32_MAX / 4) {
        err_set(err, "tokenizer: bad vocabulary size (%d tokens, %d merges)", n_tokens, n_merges);
        return NULL;
    }
    Tokenizer *t = xcalloc(1, sizeof *t);
    pthread_mutex_init(&t->trie_mu, NULL);
    t->n_vocab = n_tokens;
    t->cap_syms = n_tokens + 256 + n_merges; /* tokens, byte characters, merge results */
    t->text_off = xmalloc((size_t)t->cap_syms * sizeof *t->text_off);
    t->text_len = xmalloc((size_t)t->cap_syms * sizeof *t->text_len);
    t->type = xmalloc((size_t)n_tokens * sizeof *t->type);
    t->text_mask = pow2_at_least(2 * (uint64_t)t->cap_syms) - 1;
    t->text_index = xmalloc(((size_t)t->text_mask + 1) * sizeof *t->text_index);
    memset(t->text_index, 0xff, ((size_t)t->text_mask + 1) * sizeof *t->text_index);
    t->merge_mask = pow2_at_least(2 * (uint64_t)n_merges) - 1;
    t->merge_index = xcalloc((size_t)t->merge_mask + 1, sizeof *t->merge_index);
    t->eos = t->bos = -1;

    for (int i = 0; i < n_tokens; i++) {
        if (tokens[i].len > UINT32_MAX / 2 || t->arena.len > UINT32_MAX / 2) {
            err_set(err, "tokenizer: token texts too long (token %d)", i);
            tokenizer_free(t);
            return NULL;
        }
        sym_add(t, tokens[i].ptr, tokens[i].len);
        t->type[i] = types ? types[i] : TOKEN_NORMAL;
        if ((int)tokens[i].len > t->max_token_bytes) t->max_token_bytes = (int)tokens[i].len;
    }
    for (int b = 0; b < 256; b++) {
        char c[4];
        int n = utf8_encode(unicode_byte_to_cp((uint8_t)b), c);
        t->byte_sym[b] = sym_intern(t, c, (size_t)n);
    }
    if (intern_merge_results(t, merges, n_merges, err)) {
        tokenizer_free(t);
        return NULL;
    }
    index_merges(t, merges, n_merges);
    collect_specials(t);
    collect_eog(t);
    return t;
}

Tokenizer *tokenizer_build(const char *const *tokens, const int32_t *types, int n_tokens,
                           const char *const *merges, int n_merges, char *err) {
    if (n_tokens <= 0 || n_merges < 0) {
        err_set(err, "tokenizer: bad vocabulary size (%d tokens, %d merges)", n_tokens, n_merges);
        return NULL;
    }
    GgufStr *tv = xmalloc((size_t)n_tokens * sizeof *tv);
    GgufStr *mv = xmalloc((size_t)(n_merges ? n_merges : 1) * sizeof *mv);
    for (int i = 0; i < n_tokens; i++) tv[i] = (GgufStr){tokens[i], strlen(tokens[i])};
    for (int i = 0; i < n_merges; i++) mv[i] = (GgufStr){merges[i], strlen(merges[i])};
    Tokenizer *t = build(tv, types, n_tokens, mv, n_merges, err);
    free(tv);
    free(mv);
    return t;
}

void tokenizer_free(Tokenizer *t) {
    if (!t) return;
    free(t->text_off);
    free(t->text_len);
    buf_free(&t->arena);
    free(t->type);
    free(t->text_index);
    free(t->merge_index);
    free(t->specials);
    token_trie_free(t->trie);
    pthread_mutex_destroy(&t->trie_mu);
    free(t);
}

const TokenTrie *tokenizer_trie(const Tokenizer *t) {
    Tokenizer *w = (Tokenizer *)t; /* a cache: built once, then only read */
    pthread_mutex_lock(&w->trie_mu);
    if (!w->trie) w->trie = token_trie_build(t);
    pthread_mutex_unlock(&w->trie_mu);
    return w->trie;
}

/* ---- Loading from GGUF ---------------------------------------------------------------- */

/* Pre-tokenizer names that llama.cpp maps to its qwen2 rules. */
static bool pre_is_qwen2(GgufStr pre) {
    static const char *const names[] = {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (gguf_str_eq(pre, names[i])) return true;
    return false;
}

static int check_model_keys(const GgufFile *g, char *err) {
    GgufStr s;
    if (gguf_get_str(g, "tokenizer.ggml.model", &s, err)) return -1;
    if (!gguf_str_eq(s, "gpt2")) {
        err_set(err, "tokenizer.ggml.model is '%.*s': only 'gpt2' (byte-level BPE) is supported",
                (int)(s.len > 64 ? 64 : s.len), s.ptr);
        return -1;
    }
    if (gguf_find(g, "tokenizer.ggml.pre")) {
        if (gguf_get_str(g, "tokenizer.ggml.pre", &s, err)) return -1;
        if (!pre_is_qwen2(s)) {
            err_set(err, "tokenizer.ggml.pre is '%.*s': only the 'qwen2' pre-tokenizer is implemented",
                    (int)(s.len > 64 ? 64 : s.len), s.ptr);
            return -1;
        }
    }
    return 0;
}

/* tokenizer.ggml.token_type as int32s (NULL if the key is absent: all NORMAL). */
static int read_types(const GgufFile *g, uint64_t n_tokens, int32_t **types, char *err) {
    *types = NULL;
    if (!gguf_find(g, "tokenizer.ggml.token_type")) return 0;
    const GgufKv *kv;
    if (gguf_get_arr(g, "tokenizer.ggml.token_type", GGUF_INT32, &kv, err)) return -1;
    if (kv->arr_len != n_tokens) {
        err_set(err, "tokenizer.ggml.token_type has %llu entries but tokenizer.ggml.tokens has %llu",
                (unsigned long long)kv->arr_len, (unsigned long long)n_tokens);
        return -1;
    }
    *types = xmalloc((size_t)n_tokens * sizeof **types);
    for (uint64_t i = 0; i < n_tokens; i++) (*types)[i] = (int32_t)gguf_arr_int(kv, i);
    return 0;
}

/* An optional token id key; must name a token when present. */
static int read_token_id(const GgufFile *g, const char *key, int n_vocab, int32_t *id, char *err) {
    *id = -1;
    if (!gguf_find(g, key)) return 0;
    uint32_t v;
    if (gguf_get_u32(g, key, &v, err)) return -1;
    if (v >= (uint32_t)n_vocab) {
        err_set(err, "%s = %u is not a token id (vocabulary has %d tokens)", key, v, n_vocab);
        return -1;
    }
    *id = (int32_t)v;
    return 0;
}

Tokenizer *tokenizer_load(const GgufFile *g, char *err) {
    GgufStr *tokens = NULL, *merges = NULL;
    uint64_t n_tokens = 0, n_merges = 0;
    int32_t *types = NULL;
    Tokenizer *t = NULL;
    if (check_model_keys(g, err)) goto done;
    if (gguf_get_str_arr(g, "tokenizer.ggml.tokens", &tokens, &n_tokens, err)) goto done;
    if (n_tokens == 0 || n_tokens > INT32_MAX / 8) {
        err_set(err, "tokenizer.ggml.tokens has %llu entries", (unsigned long long)n_tokens);
        goto done;
    }
    if (read_types(g, n_tokens, &types, err)) goto done;
    if (gguf_get_str_arr(g, "tokenizer.ggml.merges", &merges, &n_merges, err)) goto done;
    if (n_merges > INT32_MAX / 8) {
        err_set(err, "tokenizer.ggml.merges has %llu entries", (unsigned long long)n_merges);
        goto done;
    }
    t = build(tokens, types, (int)n_tokens, merges, (int)n_merges, err);
    if (!t) goto done;
    if (read_token_id(g, "tokenizer.ggml.eos_token_id", t->n_vocab, &t->eos, err) ||
        read_token_id(g, "tokenizer.ggml.bos_token_id", t->n_vocab, &t->bos, err)) {
        tokenizer_free(t);
        t = NULL;
        goto done;
    }
    collect_eog(t);
done:
    free(tokens);
    free(merges);
    free(types);
    return t;
}

/* ---- Queries ----------------------------------------------------------------------------- */

int tokenizer_vocab_size(const Tokenizer *t) { return t->n_vocab; }
int tokenizer_max_token_bytes(const Tokenizer *t) { return t->max_token_bytes; }
int32_t tokenizer_eos(const Tokenizer *t) { return t->eos; }
int32_t tokenizer_bos(const Tokenizer *t) { return t->bos; }

const char *tokenizer_token_text(const Tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab ? sym_text(t, id) : NULL;
}

int tokenizer_token_type(const Tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab ? t->type[id] : 0;
}

int tokenizer_find(const Tokenizer *t, const char *text) {
    int32_t id = sym_lookup(t, text, strlen(text));
    return id < t->n_vocab ? id : -1; /* extra symbols are not tokens */
}

bool tokenizer_is_eog(const Tokenizer *t, int32_t id) {
    for (int i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) return true;
    return false;
}

/* ---- Pre-tokenizer (qwen2) ----------------------------------------------------------------
 *
 * The regular expression llama.cpp and Hugging Face use,
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}
 *   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * written as code: at each position the first rule that applies gives the piece. */

enum { C_LETTER = 1, C_NUMBER = 2, C_SPACE = 4, C_NEWLINE = 8 };

static uint8_t char_class(uint32_t c) {
    if (c == '\r' || c == '\n') return C_SPACE | C_NEWLINE;
    if (unicode_is_letter(c)) return C_LETTER;
    if (unicode_is_number(c)) return C_NUMBER;
    if (unicode_is_whitespace(c)) return C_SPACE;
    return 0;
}

static bool is_other(uint8_t cls) { return cls == 0; } /* not white space, letter or number */

static uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* Rule 1: 's 't 're 've 'm 'll 'd in any ASCII case; returns the length or 0. */
static size_t contraction_len(const uint32_t *cp, size_t n, size_t i) {
    if (cp[i] != '\'' || i + 1 >= n) return 0;
    uint32_t a = ascii_lower(cp[i + 1]);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (i + 2 >= n) return 0;
    uint32_t b = ascii_lower(cp[i + 2]);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

static size_t run_of(const uint8_t *cls, size_t n, size_t i, uint8_t mask) {
    while (i < n && (cls[i] & mask)) i++;
    return i;
}

/* Rules 5-7 on the white space run starting at i. */
static size_t space_piece_end(const uint8_t *cls, size_t n, size_t i) {
    size_t end = i, after_newline = 0;
    while (end < n && (cls[end] & C_SPACE)) {
        if (cls[end] & C_NEWLINE) after_newline = end + 1;
        end++;
    }
    if (after_newline) return after_newline;      /* 5: up to the last \r or \n */
    if (end - i >= 2 && end < n) return end - 1;  /* 6: leave the last space to the next word */
    return end;                                   /* 7 */
}

/* The end of the piece that starts at i. */
static size_t piece_end(const uint32_t *cp, const uint8_t *cls, size_t n, size_t i) {
    size_t k = contraction_len(cp, n, i);
    if (k) return i + k;
    if (cls[i] & C_LETTER) return run_of(cls, n, i, C_LETTER); /* 2: a word... */
    if (!(cls[i] & (C_NEWLINE | C_NUMBER)) && i + 1 < n && (cls[i + 1] & C_LETTER))
        return run_of(cls, n, i + 1, C_LETTER);                 /* ...with one char before it */
    if (cls[i] & C_NUMBER) return i + 1;                        /* 3: one digit */
    size_t j = cp[i] == ' ' && i + 1 < n && is_other(cls[i + 1]) ? i + 1 : i;
    if (is_other(cls[j])) {                                     /* 4: punctuation */
        while (j < n && is_other(cls[j])) j++;
        return run_of(cls, n, j, C_NEWLINE);
    }
    if (cls[i] & C_SPACE) return space_piece_end(cls, n, i);
    return i + 1;
}

/* Splits code points into pieces; returns the count, ends[] in code points. */
static size_t split_pieces(const uint32_t *cp, size_t n, uint8_t *cls, size_t *ends) {
    for (size_t i = 0; i < n; i++) cls[i] = char_class(cp[i]);
    size_t n_pieces = 0;
    for (size_t i = 0; i < n; i = ends[n_pieces++]) ends[n_pieces] = piece_end(cp, cls, n, i);
    return n_pieces;
}

int tokenizer_pretokenize(const char *text, size_t len, size_t **ends) {
    size_t n;
    uint32_t *cp = utf8_decode_all(text, len, &n);
    uint8_t *cls = xmalloc(n + 1);
    size_t *e = xmalloc((n + 1) * sizeof *e);
    size_t n_pieces = split_pieces(cp, n, cls, e);
    /* code point offsets -> byte offsets (an invalid byte is one code point) */
    size_t byte = 0, c = 0;
    for (size_t p = 0; p < n_pieces; p++) {
        while (c < e[p]) {
            uint32_t dummy;
            byte += (size_t)utf8_decode(text + byte, len - byte, &dummy);
            c++;
        }
        e[p] = byte;
    }
    free(cp);
    free(cls);
    *ends = e;
    return (int)n_pieces;
}

/* ---- BPE --------------------------------------------------------------------------------- */

typedef struct {
    int32_t *data;
    size_t len, cap;
} IdVec;

static void ids_push(IdVec *v, int32_t id) {
    if (v->len == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 64;
        v->data = xrealloc(v->data, v->cap * sizeof *v->data);
    }
    v->data[v->len++] = id;
}

/* A candidate merge of the adjacent symbols at positions left and right. */
typedef struct {
    int32_t rank, left, right;
    int32_t left_sym, right_sym, result;
} Bigram;

/* Scratch space for one piece: a linked list of symbols and a min-heap of
 * candidate merges. Kept across pieces of one encode call. */
typedef struct {
    int32_t *sym, *prev, *next; /* sym = -1: merged into its left neighbour */
    Bigram *heap;
    size_t n_heap, cap;         /* cap: positions; the heap holds up to 3 * cap */
    char *bytes;                /* the piece as UTF-8 */
} BpeWork;

static void work_reserve(BpeWork *w, size_t n) {
    if (n <= w->cap) return;
    w->cap = n;
    w->sym = xrealloc(w->sym, n * sizeof *w->sym);
    w->prev = xrealloc(w->prev, n * sizeof *w->prev);
    w->next = xrealloc(w->next, n * sizeof *w->next);
    w->heap = xrealloc(w->heap, 3 * n * sizeof *w->heap);
    w->bytes = xrealloc(w->bytes, n);
}

static void work_free(BpeWork *w) {
    free(w->sym);
    free(w->prev);
    free(w->next);
    free(w->heap);
    free(w->bytes);
}

/* Heap order: lower rank first; on equal rank the leftmost pair first. */
static bool bigram_before(const Bigram *a, const Bigram *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->left < b->left;
}

static void heap_push(BpeWork *w, Bigram b) {
    size_t i = w->n_heap++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!bigram_before(&b, &w->heap[parent])) break;
        w->heap[i] = w->heap[parent];
        i = parent;
    }
    w->heap[i] = b;
}

static Bigram heap_pop(BpeWork *w) {
    Bigram top = w->heap[0], last = w->heap[--w->n_heap];
    size_t i = 0, n = w->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bigram_before(&w->heap[c + 1], &w->heap[c])) c++;
        if (!bigram_before(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n > 0) w->heap[i] = last;
    return top;
}

static void try_pair(const Tokenizer *t, BpeWork *w, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const MergeSlot *m = merge_find(t, w->sym[left], w->sym[right]);
    if (m) heap_push(w, (Bigram){m->rank, left, right, w->sym[left], w->sym[right], m->result});
}

/* A heap entry is stale once either side has been merged into something else. */
static bool bigram_current(const BpeWork *w, const Bigram *b) {
    return w->sym[b->left] == b->left_sym && w->sym[b->right] == b->right_sym &&
           w->next[b->left] == b->right;
}

/* Emits a final symbol: its token id, or for an extra symbol the tokens of its
 * characters (those that are tokens). */
static void emit_symbol(const Tokenizer *t, int32_t sym, IdVec *out) {
    if (sym < t->n_vocab) {
        ids_push(out, sym);
        return;
    }
    const char *s = sym_text(t, sym);
    size_t n = t->text_len[sym], i = 0;
    while (i < n) {
        uint32_t c;
        int k = utf8_decode(s + i, n - i, &c);
        int32_t id = sym_lookup(t, s + i, (size_t)k);
        if (id >= 0 && id < t->n_vocab) ids_push(out, id);
        i += (size_t)k;
    }
}

/* BPE on one piece of n bytes (in w->bytes): one symbol per byte, then merge
 * the best adjacent pair until no pair has a merge. */
static void bpe_piece(const Tokenizer *t, BpeWork *w, size_t n, IdVec *out) {
    for (size_t i = 0; i < n; i++) {
        w->sym[i] = t->byte_sym[(uint8_t)w->bytes[i]];
        w->prev[i] = (int32_t)i - 1;
        w->next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    w->n_heap = 0;
    for (size_t i = 0; i + 1 < n; i++) try_pair(t, w, (int32_t)i, (int32_t)i + 1);
    while (w->n_heap > 0) {
        Bigram b = heap_pop(w);
        if (!bigram_current(w, &b)) continue;
        int32_t after = w->next[b.right];
        w->sym[b.left] = b.result;
        w->sym[b.right] = -1;
        w->next[b.left] = after;
        if (after >= 0) w->prev[after] = b.left;
        try_pair(t, w, w->prev[b.left], b.left);
        try_pair(t, w, b.left, after);
    }
    for (int32_t i = n ? 0 : -1; i >= 0; i = w->next[i]) emit_symbol(t, w->sym[i], out);
}

/* Pre-tokenizes and BPE-encodes text that contains no special tokens. */
static void encode_plain(const Tokenizer *t, const char *text, size_t len, BpeWork *w, IdVec *out) {
    size_t n;
    uint32_t *cp = utf8_decode_all(text, len, &n);
    uint8_t *cls = xmalloc(n + 1);
    size_t *ends = xmalloc((n + 1) * sizeof *ends);
    size_t n_pieces = split_pieces(cp, n, cls, ends);
    for (size_t p = 0, start = 0; p < n_pieces; start = ends[p++]) {
        size_t nb = 0;
        work_reserve(w, 4 * (ends[p] - start)); /* U+FFFD for one bad byte takes three */
        for (size_t i = start; i < ends[p]; i++) nb += (size_t)utf8_encode(cp[i], w->bytes + nb);
        bpe_piece(t, w, nb, out);
    }
    free(cp);
    free(cls);
    free(ends);
}

/* ---- Special tokens ------------------------------------------------------------------------ */

/* A stretch of the input: plain text (id = -1) or one special token. */
typedef struct {
    size_t start, len;
    int32_t id;
} Fragment;

typedef struct {
    Fragment *data;
    size_t len, cap;
} FragVec;

static void frags_push(FragVec *v, size_t start, size_t len, int32_t id) {
    if (v->len == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 16;
        v->data = xrealloc(v->data, v->cap * sizeof *v->data);
    }
    v->data[v->len++] = (Fragment){start, len, id};
}

static const char *find_bytes(const char *hay, size_t n, const char *needle, size_t m) {
    if (m == 0 || m > n) return NULL;
    const char *end = hay + n - m + 1;
    for (const char *p = hay; p < end; p++) {
        p = memchr(p, needle[0], (size_t)(end - p));
        if (!p) return NULL;
        if (memcmp(p, needle, m) == 0) return p;
    }
    return NULL;
}

/* Cuts every occurrence of special token sp out of the plain fragments of *v. */
static void split_on_special(const Tokenizer *t, const char *text, FragVec *v, const Special *sp) {
    const char *needle = sym_text(t, sp->id);
    FragVec out = {0};
    for (size_t i = 0; i < v->len; i++) {
        Fragment f = v->data[i];
        if (f.id >= 0) {
            frags_push(&out, f.start, f.len, f.id);
            continue;
        }
        size_t pos = f.start, end = f.start + f.len;
        const char *hit;
        while ((hit = find_bytes(text + pos, end - pos, needle, sp->len))) {
            size_t at = (size_t)(hit - text);
            if (at > pos) frags_push(&out, pos, at - pos, -1);
            frags_push(&out, at, sp->len, sp->id);
            pos = at + sp->len;
        }
        if (pos < end) frags_push(&out, pos, end - pos, -1);
    }
    free(v->data);
    *v = out;
}

int tokenizer_encode(const Tokenizer *t, const char *text, size_t len, bool parse_special,
                     int32_t **ids, int *n_ids, char *err) {
    (void)err;
    FragVec frags = {0};
    if (len > 0) frags_push(&frags, 0, len, -1);
    for (int i = 0; i < t->n_specials && frags.len > 0; i++) {
        const Special *sp = &t->specials[i];
        if (!parse_special && t->type[sp->id] != TOKEN_USER_DEFINED) continue;
        split_on_special(t, text, &frags, sp);
    }
    IdVec out = {0};
    BpeWork w = {0};
    for (size_t i = 0; i < frags.len; i++) {
        if (frags.data[i].id >= 0) ids_push(&out, frags.data[i].id);
        else encode_plain(t, text + frags.data[i].start, frags.data[i].len, &w, &out);
    }
    work_free(&w);
    free(frags.data);
    *ids = out.data ? out.data : xmalloc(sizeof **ids);
    *n_ids = (int)out.len;
    return 0;
}

/* ---- Decoding ----------------------------------------------------------------------------- */

/* Byte-level text back to bytes; a character outside the byte map is kept as is. */
static int decode_byte_level(const char *s, size_t n, char *buf) {
    int o = 0;
    size_t i = 0;
    while (i < n) {
        uint32_t c;
        int k = utf8_decode(s + i, n - i, &c);
        int b = unicode_cp_to_byte(c);
        if (b >= 0) buf[o++] = (char)b;
        else {
            memcpy(buf + o, s + i, (size_t)k);
            o += k;
        }
        i += (size_t)k;
    }
    return o;
}

int tokenizer_token_bytes(const Tokenizer *t, int32_t id, bool render_special, char *buf, int cap) {
    if (id < 0 || id >= t->n_vocab) return 0;
    const char *s = sym_text(t, id);
    int n = (int)t->text_len[id];
    switch (t->type[id]) {
    case TOKEN_NORMAL: {
        if (cap >= n) return decode_byte_level(s, (size_t)n, buf);
        char *tmp = xmalloc((size_t)n + 1);
        int k = decode_byte_level(s, (size_t)n, tmp);
        if (k <= cap) memcpy(buf, tmp, (size_t)k);
        free(tmp);
        return k <= cap ? k : -k;
    }
    case TOKEN_CONTROL:
    case TOKEN_UNKNOWN:
        if (!render_special) return 0;
        /* fall through */
    case TOKEN_USER_DEFINED:
        if (n > cap) return -n;
        memcpy(buf, s, (size_t)n);
        return n;
    default:
        return 0;
    }
}

char *tokenizer_decode(const Tokenizer *t, const int32_t *ids, int n_ids, bool render_special,
                       size_t *len) {
    Buf b = {0};
    char *piece = xmalloc((size_t)t->max_token_bytes + 1);
    for (int i = 0; i < n_ids; i++) {
        int k = tokenizer_token_bytes(t, ids[i], render_special, piece, t->max_token_bytes);
        if (k > 0) buf_append(&b, piece, (size_t)k);
    }
    free(piece);
    buf_append(&b, "", 0);
    if (len) *len = b.len;
    return b.data;
}
