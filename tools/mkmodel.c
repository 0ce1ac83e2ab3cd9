/* mkmodel: writes a Qwen3 GGUF file with seeded, deterministic weights.
 *
 *   mkmodel [--preset tiny|small|medium|kquant|qwen3-0.6b] [--layers N] [--hidden N]
 *           [--heads N] [--kv-heads N] [--head-dim N] [--ffn N] [--vocab N]
 *           [--ctx N] [--type TYPE] [--pure] [--untied] [--seed N] -o out.gguf
 *
 *   TYPE: f32 f16 bf16, or one of llama-quantize's file types, each written
 *   with the per-tensor choices llama-quantize makes (see "tensor list and
 *   types"): q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k_m q4_k_s q4_k_m q5_k_m q6_k
 *   iq4_nl iq4_xs; or q4_k (every matrix Q4_K). --pure: every matrix in the
 *   type itself, as llama-quantize --pure.
 *   mkmodel ... --print-size    prints the file's size in bytes and writes nothing
 *
 * The file looks like a real Qwen3 GGUF (same keys, types and tensor names) so
 * the engine can be built and tested without downloading anything. Three parts:
 *
 *   vocabulary  a byte-level BPE vocabulary learned here from a small English
 *               corpus, laid out like Qwen's: 256 byte tokens, then one token
 *               per merge (id = 256 + rank), then the special tokens, then
 *               [PADn] fillers up to the requested size.
 *   weights     random weights alone make greedy decoding collapse into one
 *               repeated token, so the first and last layers are built to do
 *               something: layer 0 copies each token's embedding into the next
 *               position ("previous token" heads, found through RoPE), and the
 *               last layer is an induction layer: it attends to the position
 *               whose previous token equals the current token and copies that
 *               position's token into the output with a large gain. The model
 *               thus continues text it has seen in its context, and greedy
 *               output varies with clear logit margins. Layers in between are
 *               small random perturbations. See "weight design" below.
 *   writing     tensors are generated row by row from a per-row seed and
 *               streamed to the file, so even the qwen3-0.6b shapes take seconds
 *               and little memory, and every run writes the same bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dtype.h"
#include "gguf_writer.h"
#include "quant.h"
#include "util.h"

/* ==== corpus ============================================================== */

/* The text the BPE merges are learned from (ASCII, written for this tool),
 * one paragraph per string. */
static const char *const CORPUS[] = {
    "Once upon a time, in a small village by the sea, there lived an old fisherman and his "
    "daughter. Every morning they walked down to the harbor before the sun was up. The boats "
    "were painted red, blue and green, and the water was calm and dark. \"Will we catch many "
    "fish today?\" the girl asked. Her father smiled and said, \"If the wind is kind, we will "
    "catch enough for the market and a little more for our supper.\"\n\n",
    "One day a storm came from the north. The sky turned grey, the waves grew tall, and the "
    "other fishermen stayed at home. But the girl saw a light far out on the water. Someone "
    "was in trouble. She ran to the boat, untied the rope, and rowed into the rain. It was "
    "hard work, and her arms were tired, but she did not stop. When she reached the light, "
    "she found a young boy holding on to a broken mast. She pulled him into the boat and "
    "rowed back to the shore. The whole village was waiting for them, and from that day on "
    "everyone called her the brave daughter of the sea.\n\n",
    "The quick brown fox jumps over the lazy dog. A lazy dog sleeps in the sun while the "
    "quick fox runs through the forest. Birds sing in the trees, and the river flows down "
    "the hill into the valley, where farmers grow wheat, apples, potatoes and corn.\n\n",
    "A computer is a machine that follows instructions. A program is a list of those "
    "instructions, written in a language the machine can read. When you run a program, the "
    "processor reads each instruction from memory, does a small piece of work, and moves on "
    "to the next one. Modern processors do billions of these steps every second. Memory is "
    "fast but small; a disk is large but slow. Good programs keep the data they need close "
    "to the processor, because reading from memory often takes longer than the work itself.\n\n",
    "A language model reads a sequence of tokens and predicts the next token. The text is "
    "first split into pieces, and each piece is turned into a number by the tokenizer. The "
    "model turns every number into a vector, mixes the vectors through many layers of "
    "attention and feed forward networks, and finally gives a score to every token in its "
    "vocabulary. The token with the highest score is the most likely next word. To write a "
    "long answer, the model adds the chosen token to the sequence and repeats the whole "
    "process, one token at a time, until it decides to stop.\n\n",
    "User: What is the capital of France?\n"
    "Assistant: The capital of France is Paris.\n"
    "User: How many days are there in a week?\n"
    "Assistant: There are seven days in a week: Monday, Tuesday, Wednesday, Thursday, "
    "Friday, Saturday and Sunday.\n"
    "User: Can you help me write a short poem about the moon?\n"
    "Assistant: Of course! Here is a short poem: The silver moon is shining bright, it "
    "guides the sailors through the night.\n\n",
    "To make bread, mix four cups of flour with a spoon of salt and a little yeast. Add warm "
    "water slowly and knead the dough for ten minutes, until it is smooth. Let it rest in a "
    "warm place for one hour. Then shape the loaf, put it in the oven, and bake it for about "
    "forty minutes. The bread is ready when it sounds hollow as you knock on the bottom.\n\n",
    "In 1969, two astronauts walked on the moon for the first time. The journey took about "
    "three days, and the spacecraft travelled more than 380000 kilometers. Today there are "
    "more than 8 billion people on Earth, and the planet turns once every 24 hours. Light "
    "from the sun needs about 8 minutes to reach us.\n\n",
    "def add(a, b):\n"
    "    return a + b\n\n",
    "for i in range(10):\n"
    "    print(i, add(i, 2))\n\n",
    "int main(void) {\n"
    "    printf(\"hello, world\\n\");\n"
    "    return 0;\n"
    "}\n\n",
    "I think it's a good idea, but I'm not sure we'll have the time. They've said they'd "
    "call us if anything changes. We're ready when you are. It isn't easy to learn a new "
    "language, but it's worth it: you'll read books, meet people and understand the world "
    "in a different way.\n\n",
    "The teacher opened the book and began to read. Students listened carefully, some of "
    "them writing notes, others looking out of the window at the falling snow. After the "
    "lesson, they went outside, threw snowballs, built a snowman with a carrot nose, and "
    "laughed until their faces were red from the cold. Later, at home, they drank hot tea "
    "and told their parents about the day.\n\n",
    "Science begins with a question. Why is the sky blue? Why do leaves change color in "
    "autumn? A scientist makes a guess, designs an experiment to test it, measures the "
    "results, and changes the idea when the numbers disagree. Over many years, careful "
    "experiments have taught us how stars are born, how plants turn sunlight into sugar, "
    "and how small changes in living things add up to the great variety of life we see "
    "around us.\n\n",
    "Dear Anna, thank you for your letter. We arrived in the mountains last Friday after a "
    "long journey by train. The valley is quiet, the air is fresh, and every evening we "
    "watch the sunset from the balcony of our little wooden house. Yesterday we climbed to "
    "a lake so clear that you could count the stones at the bottom. I hope you are well and "
    "that your new job is going nicely. Please write again soon. With love, Maria.\n\n",
    "The train left the station at exactly seven o'clock. Passengers settled into their "
    "seats, opened newspapers, and drank coffee from paper cups. Outside the windows, "
    "cities gave way to fields, fields gave way to forests, and the forests slowly climbed "
    "into hills covered with snow. A child pressed her face against the glass and counted "
    "the cows, the horses, the bridges and the tunnels until she fell asleep.\n\n",
    "Mathematics is the study of numbers, shapes and patterns. Two plus two equals four, "
    "and three times five equals fifteen. A triangle has three sides and a square has four. "
    "The area of a circle grows with the square of its radius. Prime numbers, such as 2, 3, "
    "5, 7 and 11, can only be divided by one and by themselves. Many puzzles that look "
    "difficult become simple once you find the right way to describe them.\n\n",
    "Music is sound arranged in time. A melody is a line of notes, one after another, while "
    "harmony is several notes played together. Rhythm tells us when each sound begins and "
    "how long it lasts. People have made music with drums, flutes, strings and voices for "
    "thousands of years, and every culture has its own songs for work, for dancing, for "
    "celebrating a wedding and for remembering the ones who are gone.\n\n",
    "Weather report: tomorrow will start cloudy in the west, with light rain spreading "
    "east during the afternoon. Temperatures will reach twelve degrees in the south and "
    "stay near five degrees in the north. Strong winds are expected along the coast, so "
    "sailors should stay in port. The weekend looks brighter, with sunshine on Saturday "
    "and only a small chance of showers on Sunday evening.\n\n",
    "Writing was invented more than five thousand years ago. The first writers pressed "
    "marks into soft clay to keep records of grain, animals and taxes. Later, people "
    "painted letters on paper made from plants, copied books by hand, and finally built "
    "printing machines that could produce hundreds of pages every hour. Today most of what "
    "we read is shown on screens, but the idea is still the same: words that stay after "
    "the speaker is silent.\n\n",
    "How to play: each player takes seven cards. The youngest player starts, and the game "
    "continues to the left. On your turn, place a card that matches the color or the number "
    "of the card on the table. If you cannot play, draw one card from the pile. The first "
    "player without cards wins the round. Keep score on a piece of paper, and the player "
    "with the lowest total after five rounds is the champion.\n\n",
    "Elephants are the largest animals that walk on land. They live in families led by the "
    "oldest female, who remembers where to find water during the dry season. Dolphins talk "
    "to each other with clicks and whistles, bees dance to show the way to flowers, and "
    "octopuses can change the color of their skin in less than a second. Every animal has "
    "found its own clever answer to the problem of staying alive.\n",
};

/* ==== byte-level alphabet (book/appendix-gguf.md A.4.2) ===================== */

/* GPT-2's bytes_to_unicode: printable bytes keep their code point, the other
 * 68 take U+0100, U+0101, ... in increasing byte order. */
static uint32_t byte_to_cp(int b) {
    bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    if (printable) return (uint32_t)b;
    int n = 0;
    for (int c = 0; c < b; c++) {
        bool p = (c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
        if (!p) n++;
    }
    return 0x100u + (uint32_t)n;
}

static int utf8_put(char *out, uint32_t cp) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | (cp >> 6)); /* every code point here is below U+0800 */
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/* The order of the 256 byte tokens in Qwen's vocabulary: the printable ranges
 * first (0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF), then the remaining 68 bytes. */
static void byte_token_order(int order[256]) {
    int n = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int b = 0; b < 256; b++) {
            bool printable = byte_to_cp(b) < 0x100;
            if (printable == (pass == 0)) order[n++] = b;
        }
    }
}

/* ==== pre-tokenizer (qwen2 rules of book/appendix-gguf.md A.4.3, ASCII only) */

static bool ch_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static bool ch_digit(char c) { return c >= '0' && c <= '9'; }
static bool ch_nl(char c) { return c == '\r' || c == '\n'; }
static bool ch_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
static bool ch_other(char c) { return !ch_space(c) && !ch_letter(c) && !ch_digit(c); }

static size_t contraction_len(const char *s, size_t n, size_t i) {
    if (s[i] != '\'' || i + 1 >= n) return 0;
    char a = (char)(s[i + 1] | 0x20), b = i + 2 < n ? (char)(s[i + 2] | 0x20) : 0;
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* End of the pre-token piece that starts at s[i]. */
static size_t pretok_end(const char *s, size_t n, size_t i) {
    size_t k = contraction_len(s, n, i);
    if (k) return i + k;
    size_t j = i;
    if (!ch_letter(s[j]) && !ch_nl(s[j]) && !ch_digit(s[j]) && j + 1 < n && ch_letter(s[j + 1])) j++;
    if (ch_letter(s[j])) {
        while (j < n && ch_letter(s[j])) j++;
        return j;
    }
    if (ch_digit(s[i])) return i + 1;
    j = (s[i] == ' ' && i + 1 < n && ch_other(s[i + 1])) ? i + 1 : i;
    if (ch_other(s[j])) {
        while (j < n && ch_other(s[j])) j++;
        while (j < n && ch_nl(s[j])) j++;
        return j;
    }
    size_t e = i;
    while (e < n && ch_space(s[e])) e++;
    for (size_t t = e; t > i; t--)
        if (ch_nl(s[t - 1])) return t; /* up to the last newline of the run */
    if (e - i >= 2 && e < n) return e - 1;
    return e > i ? e : i + 1;
}

/* ==== BPE training ========================================================== */

typedef struct {
    char **str;        /* token text (byte-level form), NUL-terminated */
    int32_t *type;     /* GGUF token type */
    int n;
    char **merges;     /* "left right" */
    int n_merges;
    int eos, bos, pad; /* ids */
} Vocab;

typedef struct {
    int *sym;   /* token ids of the piece as currently merged */
    int len;
    int count;  /* occurrences in the corpus */
} Piece;

/* Open-addressing hash tables keyed by 64-bit values (pair keys) or strings. */
typedef struct {
    uint64_t *key;
    int64_t *val;
    uint32_t cap;    /* power of two */
    uint32_t *used;  /* occupied slots, to clear them cheaply */
    uint32_t n_used;
} PairMap;

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static void pairmap_init(PairMap *m, uint32_t cap) {
    m->cap = cap;
    m->key = xmalloc(cap * sizeof *m->key);
    m->val = xmalloc(cap * sizeof *m->val);
    m->used = xmalloc(cap * sizeof *m->used);
    m->n_used = 0;
    for (uint32_t i = 0; i < cap; i++) m->key[i] = UINT64_MAX;
}

static void pairmap_free(PairMap *m) {
    free(m->key);
    free(m->val);
    free(m->used);
}

static void pairmap_clear(PairMap *m) {
    for (uint32_t i = 0; i < m->n_used; i++) m->key[m->used[i]] = UINT64_MAX;
    m->n_used = 0;
}

static int64_t *pairmap_slot(PairMap *m, uint64_t key) {
    uint32_t i = (uint32_t)mix64(key) & (m->cap - 1);
    while (m->key[i] != UINT64_MAX && m->key[i] != key) i = (i + 1) & (m->cap - 1);
    if (m->key[i] == UINT64_MAX) {
        if (m->n_used + 1 >= m->cap / 2) {
            fprintf(stderr, "mkmodel: pair table full\n");
            exit(70);
        }
        m->key[i] = key;
        m->val[i] = 0;
        m->used[m->n_used++] = i;
    }
    return &m->val[i];
}

/* The value stored for key, or 0 if absent (no insertion). */
static int64_t pairmap_get(const PairMap *m, uint64_t key) {
    uint32_t i = (uint32_t)mix64(key) & (m->cap - 1);
    while (m->key[i] != UINT64_MAX) {
        if (m->key[i] == key) return m->val[i];
        i = (i + 1) & (m->cap - 1);
    }
    return 0;
}

static uint64_t pair_key(int a, int b) { return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b; }

static uint64_t fnv1a(const void *p, size_t n) {
    const uint8_t *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Adds the pre-token pieces of one paragraph to the distinct pieces (seen
 * maps a piece's hash to its index + 1). */
static void add_pieces(const char *text, const int byte_id[256], PairMap *seen, Piece **pieces,
                       int *np) {
    size_t n = strlen(text);
    for (size_t i = 0; i < n;) {
        size_t e = pretok_end(text, n, i);
        int64_t *slot = pairmap_slot(seen, fnv1a(text + i, e - i) >> 1);
        if (*slot == 0) {
            *pieces = xrealloc(*pieces, (size_t)(*np + 1) * sizeof **pieces);
            Piece *p = &(*pieces)[(*np)++];
            p->len = (int)(e - i);
            p->sym = xmalloc((size_t)p->len * sizeof *p->sym);
            for (int k = 0; k < p->len; k++) p->sym[k] = byte_id[(uint8_t)text[i + (size_t)k]];
            p->count = 0;
            *slot = *np;
        }
        (*pieces)[*slot - 1].count++;
        i = e;
    }
}

/* The corpus as distinct pieces with counts, each piece as byte-token ids. */
static Piece *corpus_pieces(const int byte_id[256], int *n_out) {
    PairMap seen;
    pairmap_init(&seen, 1u << 14);
    Piece *pieces = NULL;
    int np = 0;
    for (size_t k = 0; k < sizeof CORPUS / sizeof CORPUS[0]; k++)
        add_pieces(CORPUS[k], byte_id, &seen, &pieces, &np);
    pairmap_free(&seen);
    *n_out = np;
    return pieces;
}

/* Token texts are keyed by a 63-bit hash: collisions among a few thousand
 * short strings are not a practical concern. */
static bool vocab_has(const PairMap *strs, const char *s) {
    return pairmap_get(strs, fnv1a(s, strlen(s)) >> 1) != 0;
}

static void vocab_push(Vocab *v, PairMap *strs, char *s, int32_t type) {
    v->str = xrealloc(v->str, (size_t)(v->n + 1) * sizeof *v->str);
    v->type = xrealloc(v->type, (size_t)(v->n + 1) * sizeof *v->type);
    v->str[v->n] = s;
    v->type[v->n] = type;
    v->n++;
    if (strs) *pairmap_slot(strs, fnv1a(s, strlen(s)) >> 1) = v->n;
}

/* The most frequent adjacent pair whose merged text is not yet a token; ties
 * go to the smallest (left, right) ids, so the result is deterministic. */
static bool best_pair(const Piece *pieces, int np, PairMap *counts, const Vocab *v,
                      const PairMap *strs, int *a_out, int *b_out) {
    pairmap_clear(counts);
    for (int i = 0; i < np; i++)
        for (int k = 0; k + 1 < pieces[i].len; k++)
            *pairmap_slot(counts, pair_key(pieces[i].sym[k], pieces[i].sym[k + 1])) += pieces[i].count;
    int64_t best = 0;
    uint64_t best_key = 0;
    char buf[1024];
    for (uint32_t u = 0; u < counts->n_used; u++) {
        uint32_t slot = counts->used[u];
        uint64_t key = counts->key[slot];
        int64_t c = counts->val[slot];
        if (c < best || (c == best && key > best_key)) continue;
        const char *l = v->str[key >> 32], *r = v->str[key & 0xFFFFFFFFu];
        size_t nl = strlen(l), nr = strlen(r);
        if (nl + nr >= sizeof buf) continue;
        memcpy(buf, l, nl);
        memcpy(buf + nl, r, nr + 1);
        if (vocab_has(strs, buf)) continue; /* keep token texts unique */
        best = c;
        best_key = key;
    }
    *a_out = (int)(best_key >> 32);
    *b_out = (int)(best_key & 0xFFFFFFFFu);
    return best > 0;
}

static void apply_merge(Piece *pieces, int np, int a, int b, int id) {
    for (int i = 0; i < np; i++) {
        Piece *p = &pieces[i];
        int w = 0;
        for (int k = 0; k < p->len; k++) {
            if (k + 1 < p->len && p->sym[k] == a && p->sym[k + 1] == b) {
                p->sym[w++] = id;
                k++;
            } else {
                p->sym[w++] = p->sym[k];
            }
        }
        p->len = w;
    }
}

static char *str_concat(const char *a, const char *sep, const char *b) {
    size_t n = strlen(a) + strlen(sep) + strlen(b) + 1;
    char *s = xmalloc(n);
    snprintf(s, n, "%s%s%s", a, sep, b);
    return s;
}

/* Learns up to max_merges merges from the corpus into v (after the byte tokens). */
static void learn_merges(Vocab *v, PairMap *strs, const int byte_id[256], int max_merges) {
    int np;
    Piece *pieces = corpus_pieces(byte_id, &np);
    PairMap counts;
    pairmap_init(&counts, 1u << 16);
    int a, b;
    while (v->n_merges < max_merges && best_pair(pieces, np, &counts, v, strs, &a, &b)) {
        v->merges = xrealloc(v->merges, (size_t)(v->n_merges + 1) * sizeof *v->merges);
        v->merges[v->n_merges++] = str_concat(v->str[a], " ", v->str[b]);
        vocab_push(v, strs, str_concat(v->str[a], "", v->str[b]), 1);
        apply_merge(pieces, np, a, b, v->n - 1);
    }
    pairmap_free(&counts);
    for (int i = 0; i < np; i++) free(pieces[i].sym);
    free(pieces);
}

enum { TOK_NORMAL = 1, TOK_CONTROL = 3, TOK_USER_DEFINED = 4, TOK_UNUSED = 5 };

/* The whole vocabulary of n_vocab tokens (n_vocab >= 256 + 5). */
static void build_vocab(Vocab *v, int n_vocab) {
    static const struct { const char *text; int32_t type; } SPECIAL[] = {
        {"<|endoftext|>", TOK_CONTROL}, {"<|im_start|>", TOK_CONTROL},
        {"<|im_end|>", TOK_CONTROL},    {"<think>", TOK_USER_DEFINED},
        {"</think>", TOK_USER_DEFINED},
    };
    const int n_special = (int)(sizeof SPECIAL / sizeof SPECIAL[0]);
    memset(v, 0, sizeof *v);
    PairMap strs; /* token text hash -> id + 1 */
    pairmap_init(&strs, 1u << 16);
    int order[256], byte_id[256];
    byte_token_order(order);
    for (int i = 0; i < 256; i++) {
        char buf[4] = {0};
        utf8_put(buf, byte_to_cp(order[i]));
        byte_id[order[i]] = i;
        vocab_push(v, &strs, xstrdup(buf), TOK_NORMAL);
    }
    learn_merges(v, &strs, byte_id, n_vocab - 256 - n_special);
    pairmap_free(&strs);
    for (int i = 0; i < n_special; i++) vocab_push(v, NULL, xstrdup(SPECIAL[i].text), SPECIAL[i].type);
    v->bos = v->pad = 256 + v->n_merges; /* <|endoftext|> */
    v->eos = v->bos + 2;                 /* <|im_end|> */
    while (v->n < n_vocab) {
        char buf[32];
        snprintf(buf, sizeof buf, "[PAD%d]", v->n);
        vocab_push(v, NULL, xstrdup(buf), TOK_UNUSED);
    }
}

static void vocab_free(Vocab *v) {
    for (int i = 0; i < v->n; i++) free(v->str[i]);
    for (int i = 0; i < v->n_merges; i++) free(v->merges[i]);
    free(v->str);
    free(v->type);
    free(v->merges);
}

/* ChatML with the thinking switch, as Qwen3 renders plain conversations. */
static const char CHAT_TEMPLATE[] =
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}"
    "{%- endif %}";

/* ==== deterministic numbers ================================================= */

/* Weights must be the same bytes on every machine, so nothing here calls libm
 * functions whose last bit may differ between libraries (exp, sin, cos): these
 * use only IEEE + - * /, which are exact-rounded everywhere. */
static double det_exp(double x) {
    const double ln2 = 0.6931471805599453;
    double k = floor(x / ln2 + 0.5), r = x - k * ln2, term = 1, sum = 1;
    for (int i = 1; i < 30; i++) {
        term *= r / i;
        sum += term;
    }
    return ldexp(sum, (int)k);
}

static double det_cos(double x) {
    const double two_pi = 6.283185307179586;
    x -= two_pi * floor(x / two_pi + 0.5); /* now in [-pi, pi] */
    double term = 1, sum = 1;
    for (int i = 1; i < 30; i++) {
        term *= -x * x / ((2 * i - 1) * (2 * i));
        sum += term;
    }
    return sum;
}

static double det_sin(double x) { return det_cos(x - 1.5707963267948966); }

/* splitmix64: one 64-bit state per tensor row, seeded from (seed, name, row),
 * so rows can be made in any order and each costs one multiply per value. */
typedef struct { uint64_t s; } Rng;

static uint64_t rng_next(Rng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static Rng rng_for(uint64_t seed, const char *name, int64_t row) {
    Rng r = {mix64(seed ^ mix64(fnv1a(name, strlen(name)) + (uint64_t)row * 0x9E3779B97F4A7C15ull))};
    return r;
}

/* Approximately standard normal: the sum of four 16-bit uniforms (mean 0,
 * variance 1, bounded by +-3.46), cheap enough for 600M weights. */
static float rng_normal(Rng *r) {
    uint64_t z = rng_next(r);
    uint32_t s = (uint32_t)(z & 0xFFFF) + (uint32_t)((z >> 16) & 0xFFFF) +
                 (uint32_t)((z >> 32) & 0xFFFF) + (uint32_t)(z >> 48);
    return ((float)s - 131070.0f) * (1.7320508f / 65536.0f);
}

/* ==== weight design =========================================================
 *
 * Residual stream layout (D = hidden):
 *   content [0, de)          the token's embedding (de = D/2), norm sqrt(de)
 *   prev    [de, de + pd)    written by layer 0: the previous token's content
 *                            coordinates 0..pd-1 (pd = D - de - 1)
 *   const   D - 1            a constant C0 in every embedding: a bias input
 *                            that gives position-only queries and keys
 * Embeddings are (almost) zero outside content + const, and the logits (tied
 * or the untied copy) read the content part, so writing a token's content
 * into the stream with a large gain makes that token the top logit.
 *
 * Layer 0, "previous token": q and k come from the const input only and sit in
 * the fastest RoPE pairs, with q rotated by -theta relative to k, so every head
 * scores offset 1 highest and attends to position p-1 (position 0 to itself).
 * V takes content coordinates, O writes them into the prev dims.
 *
 * Last layer, "induction": q = A . content(p), k = A . (prev(j) - content(j))
 * in the slow RoPE pairs (their rotation barely changes over a context), so
 * position j scores high when the token before j equals the current token,
 * and low when j holds the current token itself (no self-copying). V takes
 * the content, O writes it back with gain BETA; large q/k norm gains make the
 * softmax nearly one-hot. The model so continues text seen in its context.
 *
 * The key of position 0 has no content (its prev is itself), so after the key
 * norm it consists of a constant "sink" component that other keys only carry
 * a little of. In wide heads the query also carries that component, sized so
 * that the sink beats random non-matches but not true matches: with nothing
 * to continue, the model restarts from the beginning of the context.
 *
 * Layers in between are small random perturbations; all layers get random
 * MLPs and a little noise on every structured weight. */

#define C0 2.0              /* the const coordinate of every embedding */
#define G_PREV 4.0          /* q/k norm gain of layer 0 */
#define G_COPY 5.0          /* q/k norm gain of the last layer */
#define BETA 4.0            /* gain of the copied embedding */
#define OFF_THETA 0.15      /* RoPE pairs at least this fast find offset 1 */
#define CONTENT_THETA 0.015 /* pairs at most this fast match content */
#define SINK_K 0.3          /* key weight on the sink dim, relative to content */
#define SINK_SPREAD 2.4     /* random content scores reach about this many std devs */
#define SINK_AT 0.3         /* where the sink sits between those and a true match */
#define SINK_MIN_GAP 0.25   /* no sink unless matches beat the noise by this much */
#define MID_OUT 0.1         /* output rms of all random middle layers together */

typedef enum { ROLE_PREV, ROLE_MID, ROLE_COPY } Role;

typedef struct {
    int D, H, Hkv, hd, half, L, group, q_dim, kv_dim;
    int de, pd, konst;
    int n_off, off[4];   /* layer 0 pairs */
    int sink;            /* last layer's sink dim (the slowest pair), -1 if none */
    int n_cont;          /* head dims that carry content in the last layer */
    int *cont;           /* [n_cont] */
    float *A;            /* [n_cont x pd] shared query/key projection */
    double *theta;       /* [half] RoPE frequency of each pair */
    double sink_q;       /* query weight on the sink dim, relative to content */
    double rms0;         /* expected rms of an embedding row */
    float mid_out;       /* output scale of the random middle layers */
} Plan;

typedef struct {
    int layers, hidden, heads, kv_heads, head_dim, ffn, vocab, ctx;
} Shape;

static void plan_pairs(Plan *p) {
    p->theta = xmalloc((size_t)p->half * sizeof *p->theta);
    for (int i = 0; i < p->half; i++)
        p->theta[i] = det_exp(-2.0 * i / p->hd * 13.815510557964274); /* ln 1e6 */
    p->n_off = 0;
    for (int i = 0; i < p->half && p->n_off < 4; i++)
        if (i == 0 || p->theta[i] >= OFF_THETA) p->off[p->n_off++] = i;
    int first = p->n_off;
    while (first < p->half - 1 && p->theta[first] > CONTENT_THETA) first++;
    /* the slowest pair holds the sink when content keeps at least one pair */
    p->sink = first < p->half - 1 ? p->half - 1 : -1;
    int end = p->sink >= 0 ? p->sink : p->half;
    p->n_cont = 2 * (end - first);
    p->cont = xmalloc((size_t)(p->n_cont > 0 ? p->n_cont : 1) * sizeof *p->cont);
    for (int i = first, k = 0; i < end; i++) {
        p->cont[k++] = i;
        p->cont[k++] = i + p->half;
    }
}

/* A true match has content cosine 1/sqrt(2) (the key is prev - content); the
 * best of the random non-matches reaches about SINK_SPREAD / sqrt(n_cont).
 * The sink score goes between the two; heads too narrow to separate them
 * get no sink (and start from a random earlier token instead). */
static void plan_sink(Plan *p) {
    double match = 1 / sqrt(2.0);
    double noise = p->n_cont > 0 ? SINK_SPREAD / sqrt((double)p->n_cont) : 1;
    double f = SINK_K / sqrt(1 + SINK_K * SINK_K); /* the sink's share of other keys */
    p->sink_q = 0;
    if (p->sink >= 0 && noise < match - SINK_MIN_GAP)
        p->sink_q = (noise + SINK_AT * (match - noise)) / (1 - f);
}

static Plan plan_make(const Shape *s, uint64_t seed) {
    Plan p = {.D = s->hidden, .H = s->heads, .Hkv = s->kv_heads, .hd = s->head_dim,
              .half = s->head_dim / 2, .L = s->layers};
    p.group = p.H / p.Hkv;
    p.q_dim = p.H * p.hd;
    p.kv_dim = p.Hkv * p.hd;
    p.de = p.D / 2;
    p.pd = p.D - p.de - 1;
    p.konst = p.D - 1;
    p.rms0 = sqrt((p.de + C0 * C0 + 0.0004 * p.pd) / p.D);
    p.mid_out = (float)(MID_OUT / sqrt(p.L > 3 ? p.L - 2 : 1));
    plan_pairs(&p);
    plan_sink(&p);
    p.A = xmalloc((size_t)(p.n_cont * p.pd > 0 ? p.n_cont * p.pd : 1) * sizeof *p.A);
    Rng r = rng_for(seed, "induction.A", 0);
    float scale = 1.0f / sqrtf((float)p.pd);
    for (int i = 0; i < p.n_cont * p.pd; i++) p.A[i] = rng_normal(&r) * scale;
    return p;
}

static void plan_free(Plan *p) {
    free(p->cont);
    free(p->A);
    free(p->theta);
}

static Role layer_role(const Plan *p, int layer) {
    if (layer == p->L - 1) return ROLE_COPY;
    return layer == 0 ? ROLE_PREV : ROLE_MID;
}

/* Index of head dim j in the content list, or -1. */
static int cont_index(const Plan *p, int j) {
    for (int k = 0; k < p->n_cont; k++)
        if (p->cont[k] == j) return k;
    return -1;
}

/* ---- tensors ---- */

typedef enum {
    K_EMBD, K_OUTPUT, K_OUT_NORM, K_ATTN_NORM, K_Q, K_K, K_V, K_O, K_QNORM, K_KNORM,
    K_FFN_NORM, K_GATE, K_UP, K_DOWN,
} Kind;

typedef struct {
    char name[64];
    Kind kind;
    int layer;
    int n_dims;
    int64_t ne[2];  /* ne[0] = row length, ne[1] = rows */
    DType type;
} Spec;

static void add_noise(Rng *r, float *row, int64_t n, float sigma) {
    for (int64_t i = 0; i < n; i++) row[i] = sigma * rng_normal(r);
}

/* Content entries are normalized to norm sqrt(de), so every token's rms is
 * the same and layer 0 can copy it into the prev dims at exactly the scale of
 * the content dims (prev - content then cancels where they hold one token). */
static void embd_row(const Plan *p, uint64_t seed, int64_t t, float *row) {
    Rng r = rng_for(seed, "token_embd.weight", t);
    double ss = 0;
    for (int i = 0; i < p->de; i++) {
        row[i] = rng_normal(&r);
        ss += (double)row[i] * row[i];
    }
    float scale = (float)sqrt(p->de / (ss > 0 ? ss : 1));
    for (int i = 0; i < p->de; i++) row[i] *= scale;
    for (int i = p->de; i < p->D; i++) row[i] = 0.02f * rng_normal(&r);
    row[p->konst] = (float)C0;
}

static void norm_row(Rng *r, float *row, int64_t n, double gain, float jitter) {
    for (int64_t i = 0; i < n; i++) row[i] = (float)gain * (1.0f + jitter * rng_normal(r));
}

/* Layer 0 query/key rows: position-only vectors in the offset pairs. */
static void prev_qk_row(const Plan *p, bool is_q, int j, float *row) {
    for (int k = 0; k < p->n_off; k++) {
        double th = p->theta[p->off[k]];
        if (j == p->off[k]) row[p->konst] += (float)(is_q ? det_cos(th) : 1.0);
        if (j == p->off[k] + p->half && is_q) row[p->konst] += (float)(-det_sin(th));
    }
}

/* Last layer query/key rows: content match in the slow pairs, the sink. */
static void copy_qk_row(const Plan *p, bool is_q, int j, float *row) {
    int k = cont_index(p, j);
    if (k >= 0) {
        const float *a = p->A + (size_t)k * (size_t)p->pd;
        for (int c = 0; c < p->pd; c++) {
            if (is_q) {
                row[c] += a[c];
            } else {
                row[p->de + c] += a[c];
                row[c] -= a[c];
            }
        }
    }
    double unit = sqrt((double)p->n_cont * (is_q ? 1 : 2)) / C0; /* content norm, per const */
    if (p->sink >= 0 && j == p->sink) row[p->konst] += (float)((is_q ? p->sink_q : SINK_K) * unit);
}

/* V row (kv dim r): picks content coordinate r if it has a destination. */
static void v_row(const Plan *p, Role role, int64_t r, float *row) {
    int limit = role == ROLE_PREV ? p->pd : p->de;
    if (r < limit) row[r] += 1.0f;
}

/* O row (residual dim r): gathers coordinate c from every head of kv group c/hd. */
static void o_row(const Plan *p, Role role, int64_t r, float *row) {
    int64_t c = role == ROLE_PREV ? r - p->de : r;
    int64_t limit = role == ROLE_PREV ? p->pd : p->de;
    if (c < 0 || c >= limit || c / p->hd >= p->Hkv) return;
    int g = (int)(c / p->hd), j = (int)(c % p->hd);
    double gain = role == ROLE_PREV ? p->rms0 : BETA;
    for (int i = g * p->group; i < (g + 1) * p->group; i++) row[i * p->hd + j] += (float)(gain / p->group);
}

static float matrix_sigma(const Plan *p, Kind k, Role role, int64_t in) {
    float s = 1.0f;
    switch (k) {
    case K_Q: case K_K: case K_V: s = role == ROLE_MID ? 1.0f : 0.02f; break;
    case K_O: s = role == ROLE_MID ? p->mid_out : 0.02f; break;
    case K_GATE: case K_UP: s = 1.0f; break;
    case K_DOWN: s = role == ROLE_MID ? p->mid_out : 0.05f; break;
    default: break;
    }
    return s / sqrtf((float)in);
}

static double qk_norm_gain(Role role) {
    return role == ROLE_PREV ? G_PREV : role == ROLE_COPY ? G_COPY : 1.0;
}

/* Row r of tensor t (t->ne[0] values). */
static void gen_row(const Plan *p, uint64_t seed, const Spec *t, int64_t r, float *row) {
    Rng rng = rng_for(seed, t->name, r);
    int64_t n = t->ne[0];
    Role role = layer_role(p, t->layer);
    switch (t->kind) {
    case K_EMBD: embd_row(p, seed, r, row); return;
    case K_OUTPUT: /* the untied head: the embedding plus a little noise */
        embd_row(p, seed, r, row);
        for (int64_t i = 0; i < n; i++) row[i] += 0.05f * rng_normal(&rng);
        return;
    case K_OUT_NORM: /* copied logits grow with de: keep them near a real model's scale */
        norm_row(&rng, row, n, 32.0 / p->de, 0.02f);
        return;
    case K_ATTN_NORM: case K_FFN_NORM: /* structured layers need content and prev alike */
        norm_row(&rng, row, n, 1.0, role == ROLE_MID ? 0.05f : 0.01f);
        return;
    case K_QNORM: case K_KNORM:
        norm_row(&rng, row, n, qk_norm_gain(role), role == ROLE_MID ? 0.05f : 0.01f);
        return;
    default: break;
    }
    add_noise(&rng, row, n, matrix_sigma(p, t->kind, role, n));
    if (role == ROLE_MID) return;
    int j = (int)(r % p->hd);
    switch (t->kind) {
    case K_Q: case K_K:
        if (role == ROLE_PREV) prev_qk_row(p, t->kind == K_Q, j, row);
        else copy_qk_row(p, t->kind == K_Q, j, row);
        break;
    case K_V: v_row(p, role, r, row); break;
    case K_O: o_row(p, role, r, row); break;
    default: break;
    }
}

/* ==== options ================================================================ */

/* llama.cpp's file types (general.file_type) that have a recipe here. */
enum {
    FT_F32 = 0, FT_F16 = 1, FT_Q4_0 = 2, FT_Q4_1 = 3, FT_Q8_0 = 7, FT_Q5_0 = 8, FT_Q5_1 = 9, FT_Q2_K = 10,
    FT_Q3_K_M = 12, FT_Q4_K_S = 14, FT_Q4_K_M = 15, FT_Q5_K_M = 17, FT_Q6_K = 18, FT_IQ4_NL = 25,
    FT_IQ4_XS = 30, FT_BF16 = 32,
};

typedef struct {
    const char *name;
    DType base;
    uint32_t file_type; /* general.file_type (llama.cpp's LlamaFileType) */
    bool pure;          /* every matrix in base (else llama-quantize's recipe for file_type) */
} TypeOpt;

static const TypeOpt TYPE_OPTS[] = {
    {"f32", DT_F32, FT_F32, true},          {"f16", DT_F16, FT_F16, true},
    {"bf16", DT_BF16, FT_BF16, true},       {"q8_0", DT_Q8_0, FT_Q8_0, false},
    {"q4_0", DT_Q4_0, FT_Q4_0, false},      {"q4_1", DT_Q4_1, FT_Q4_1, false},
    {"q5_0", DT_Q5_0, FT_Q5_0, false},      {"q5_1", DT_Q5_1, FT_Q5_1, false},
    {"q2_k", DT_Q2_K, FT_Q2_K, false},      {"q3_k_m", DT_Q3_K, FT_Q3_K_M, false},
    {"q4_k_s", DT_Q4_K, FT_Q4_K_S, false},  {"q4_k_m", DT_Q4_K, FT_Q4_K_M, false},
    {"q5_k_m", DT_Q5_K, FT_Q5_K_M, false},  {"q6_k", DT_Q6_K, FT_Q6_K, false},
    {"iq4_nl", DT_IQ4_NL, FT_IQ4_NL, false}, {"iq4_xs", DT_IQ4_XS, FT_IQ4_XS, false},
    {"q4_k", DT_Q4_K, FT_Q4_K_S, true},
};
#define TYPE_NAMES "f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k_m q4_k_s q4_k_m q5_k_m q6_k iq4_nl iq4_xs q4_k"

typedef struct {
    const char *name;
    Shape shape;
} Preset;

static const Preset PRESETS[] = {
    {"tiny", {2, 64, 4, 2, 16, 192, 1000, 2048}},
    {"small", {4, 128, 8, 2, 32, 352, 2000, 4096}},
    {"medium", {4, 256, 8, 4, 64, 768, 4000, 4096}},
    /* the smallest shapes where every row is a whole number of K-quant
     * super-blocks (256), with 8 layers so that the per-layer rules of the
     * quantization mixes (first eighth, use_more_bits) all show */
    {"kquant", {8, 256, 4, 2, 64, 512, 1000, 2048}},
    {"qwen3-0.6b", {28, 1024, 16, 8, 128, 3072, 151936, 40960}},
};

/* Picked among seeds 1-16 as the one whose tiny, small and medium models
 * gave the largest greedy margins on the project's test prompts, with the same
 * tokens in f32 and q8_0 (most seeds do well; a few have a near-tie). */
#define DEFAULT_SEED 12

typedef struct {
    const char *preset;
    Shape shape;
    const TypeOpt *type;
    bool untied;
    bool pure;          /* --pure */
    bool print_size;  /* --print-size: only say how many bytes the file takes */
    uint64_t seed;
    const char *out;
} Options;

static void usage(FILE *f) {
    fprintf(f,
            "usage: mkmodel [--preset tiny|small|medium|kquant|qwen3-0.6b] [--layers N] [--hidden N]\n"
            "               [--heads N] [--kv-heads N] [--head-dim N] [--ffn N] [--vocab N]\n"
            "               [--ctx N] [--type TYPE] [--pure] [--untied] [--seed N] -o out.gguf | --print-size\n"
            "Writes a Qwen3 GGUF with deterministic weights; flags override the preset\n"
            "(--print-size: print the file's size in bytes, write nothing)\n"
            "(default: --preset medium --type f32 --seed %d).\n"
            "TYPE: " TYPE_NAMES "\n"
            "  llama-quantize's file types get its per-tensor mix (as with an importance\n"
            "  matrix: q4_0 and q5_0 put the first eighth of ffn_down in Q4_1 / Q5_1);\n"
            "  --pure writes every matrix in the type itself; q4_k is always pure.\n", DEFAULT_SEED);
}

static int parse_int(const char *flag, const char *s, long lo, long hi, long *out, char *err) {
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || errno || end == s || *end || v < lo || v > hi) {
        err_set(err, "%s needs an integer from %ld to %ld, got '%s'", flag, lo, hi, s ? s : "");
        return 1;
    }
    *out = v;
    return 0;
}

static const Preset *find_preset(const char *name) {
    for (size_t i = 0; i < sizeof PRESETS / sizeof PRESETS[0]; i++)
        if (strcmp(PRESETS[i].name, name) == 0) return &PRESETS[i];
    return NULL;
}

static const TypeOpt *find_type(const char *name) {
    for (size_t i = 0; i < sizeof TYPE_OPTS / sizeof TYPE_OPTS[0]; i++)
        if (strcmp(TYPE_OPTS[i].name, name) == 0) return &TYPE_OPTS[i];
    return NULL;
}

/* The integer flags: name, field, limits. */
typedef struct { const char *flag; size_t offset; long lo, hi; } IntFlag;

static const IntFlag INT_FLAGS[] = {
    {"--layers", offsetof(Shape, layers), 1, 1024},
    {"--hidden", offsetof(Shape, hidden), 4, 65536},
    {"--heads", offsetof(Shape, heads), 1, 1024},
    {"--kv-heads", offsetof(Shape, kv_heads), 1, 1024},
    {"--head-dim", offsetof(Shape, head_dim), 2, 4096},
    {"--ffn", offsetof(Shape, ffn), 1, 1 << 18},
    {"--vocab", offsetof(Shape, vocab), 256 + 5, 1 << 22},
    {"--ctx", offsetof(Shape, ctx), 1, 1 << 24},
};

/* The preset first, so that flags override it wherever they appear. */
static int parse_preset(int argc, char **argv, Options *o, char *err) {
    const char *name = "medium";
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--preset") == 0) name = i + 1 < argc ? argv[i + 1] : "";
    const Preset *p = find_preset(name);
    if (!p) {
        err_set(err, "unknown preset '%s' (tiny, small, medium, kquant, qwen3-0.6b)", name);
        return 1;
    }
    o->preset = p->name;
    o->shape = p->shape;
    return 0;
}

static int parse_flag(int argc, char **argv, int *i, Options *o, char *err) {
    const char *a = argv[*i], *val = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (strcmp(a, "--untied") == 0) {
        o->untied = true;
        return 0;
    }
    if (strcmp(a, "--pure") == 0) {
        o->pure = true;
        return 0;
    }
    if (strcmp(a, "--print-size") == 0) {
        o->print_size = true;
        return 0;
    }
    if (strcmp(a, "--preset") == 0) {
        ++*i;
        return 0;
    }
    if (!val) {
        err_set(err, "%s needs a value", a);
        return 1;
    }
    ++*i;
    if (strcmp(a, "-o") == 0) {
        o->out = val;
        return 0;
    }
    if (strcmp(a, "--type") == 0) {
        o->type = find_type(val);
        if (!o->type) err_set(err, "unknown --type '%s' (" TYPE_NAMES ")", val);
        return o->type ? 0 : 1;
    }
    long v;
    if (strcmp(a, "--seed") == 0) {
        if (parse_int(a, val, 0, 0x7FFFFFFFL, &v, err)) return 1;
        o->seed = (uint64_t)v;
        return 0;
    }
    for (size_t k = 0; k < sizeof INT_FLAGS / sizeof INT_FLAGS[0]; k++) {
        if (strcmp(a, INT_FLAGS[k].flag) != 0) continue;
        if (parse_int(a, val, INT_FLAGS[k].lo, INT_FLAGS[k].hi, &v, err)) return 1;
        *(int *)((char *)&o->shape + INT_FLAGS[k].offset) = (int)v;
        return 0;
    }
    err_set(err, "unknown option '%s'", a);
    return 1;
}

static int parse_args(int argc, char **argv, Options *o, char *err) {
    *o = (Options){.type = &TYPE_OPTS[0], .seed = DEFAULT_SEED};
    if (parse_preset(argc, argv, o, err)) return 1;
    for (int i = 1; i < argc; i++)
        if (parse_flag(argc, argv, &i, o, err)) return 1;
    if (!o->out && !o->print_size) {
        err_set(err, "no output file: give -o out.gguf");
        return 1;
    }
    return 0;
}

/* ==== tensor list and types ================================================== */

/* Where llama-quantize spends more bits: the first and last eighth of the
 * layers, and every third layer in between. */
static bool use_more_bits(int layer, int n_layers) {
    return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

/* The type llama-quantize gives a 2-D tensor in a file of type ft (its public
 * recipe, llama.cpp src/llama-quant.cpp, restated here for the Qwen3 tensors;
 * files on the hub are made with an importance matrix, which only changes the
 * choice for Q4_0 / Q5_0 and the IQ4 types below). */
static DType recipe_type(const TypeOpt *ty, const Shape *s, const Spec *t, bool tied) {
    DType out = ty->base;
    int l = t->layer, n = s->layers, gqa = s->heads / s->kv_heads;
    bool more = l >= 0 && use_more_bits(l, n);
    if (t->kind == K_OUTPUT || (t->kind == K_EMBD && tied)) {
        /* The output matrix (the embedding, when it is tied to it) matters most:
         * Q6_K, unless the file is Q8_0 or the rows do not fit the base type. */
        if (t->ne[0] % dtype_block_size(ty->base) != 0) out = DT_Q8_0;
        else if (ty->base != DT_Q8_0) out = DT_Q6_K;
    } else if (t->kind == K_V) { /* attn_v: small (kv heads only) and sensitive */
        switch (ty->file_type) {
        case FT_Q2_K: out = gqa >= 4 ? DT_Q4_K : DT_Q3_K; break;
        case FT_Q3_K_M: out = l < 2 ? DT_Q5_K : DT_Q4_K; break;
        case FT_Q4_K_S: if (l < 4) out = DT_Q5_K; break;
        case FT_Q4_K_M: case FT_Q5_K_M: if (more) out = DT_Q6_K; break;
        case FT_IQ4_NL: case FT_IQ4_XS: if (gqa >= 4) out = DT_Q5_K; break;
        default: break;
        }
    } else if (t->kind == K_DOWN) { /* ffn_down: the most sensitive of the FFN */
        switch (ty->file_type) {
        case FT_Q2_K: out = DT_Q3_K; break;
        case FT_Q3_K_M: out = l < n / 16 ? DT_Q5_K : DT_Q4_K; break;
        case FT_Q4_K_S: if (l < n / 8) out = DT_Q5_K; break;
        case FT_Q4_K_M: case FT_Q5_K_M: if (more) out = DT_Q6_K; break;
        /* with an importance matrix, the first eighth of Q4_0 / Q5_0 files get a
         * min term (without one, IQ4_NL / IQ4_XS files would use Q5_K there) */
        case FT_Q4_0: if (l < n / 8) out = DT_Q4_1; break;
        case FT_Q5_0: if (l < n / 8) out = DT_Q5_1; break;
        default: break;
        }
    } else if (t->kind == K_O) { /* attn_output */
        if (ty->file_type == FT_Q2_K) out = DT_Q3_K;
        else if (ty->file_type == FT_Q3_K_M) out = DT_Q4_K;
    }
    /* Rows the chosen type's blocks do not divide: llama-quantize falls back
     * to a 32-element type of about the same size, else F16. */
    if (t->ne[0] % dtype_block_size(out) != 0) {
        switch (out) {
        case DT_Q2_K: case DT_Q3_K: case DT_IQ4_XS: out = DT_IQ4_NL; break;
        case DT_Q4_K: out = DT_Q5_0; break;
        case DT_Q5_K: out = DT_Q5_1; break;
        case DT_Q6_K: out = DT_Q8_0; break;
        default: break;
        }
        if (t->ne[0] % dtype_block_size(out) != 0) out = DT_F16;
    }
    return out;
}

static DType spec_type(const Options *o, const Spec *t) {
    if (t->n_dims == 1) return DT_F32; /* norms are F32 in every file type */
    if (o->pure || o->type->pure) return o->type->base;
    return recipe_type(o->type, &o->shape, t, !o->untied);
}

static void spec_add(Spec **list, int *n, const char *name, Kind kind, int layer, int64_t ne0,
                     int64_t ne1) {
    *list = xrealloc(*list, (size_t)(*n + 1) * sizeof **list);
    Spec *t = &(*list)[(*n)++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->kind = kind;
    t->layer = layer;
    t->n_dims = ne1 > 0 ? 2 : 1;
    t->ne[0] = ne0;
    t->ne[1] = ne1 > 0 ? ne1 : 1;
}

static Spec *make_specs(const Options *o, int *n_out) {
    const Shape *s = &o->shape;
    int64_t D = s->hidden, q_dim = (int64_t)s->heads * s->head_dim;
    int64_t kv_dim = (int64_t)s->kv_heads * s->head_dim;
    static const struct { const char *suffix; Kind kind; } LAYER[] = {
        {"attn_norm", K_ATTN_NORM}, {"attn_q", K_Q},           {"attn_k", K_K},
        {"attn_v", K_V},            {"attn_output", K_O},      {"attn_q_norm", K_QNORM},
        {"attn_k_norm", K_KNORM},   {"ffn_norm", K_FFN_NORM},  {"ffn_gate", K_GATE},
        {"ffn_up", K_UP},           {"ffn_down", K_DOWN},
    };
    Spec *list = NULL;
    int n = 0;
    spec_add(&list, &n, "token_embd.weight", K_EMBD, -1, D, s->vocab);
    for (int l = 0; l < s->layers; l++) {
        for (size_t k = 0; k < sizeof LAYER / sizeof LAYER[0]; k++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, LAYER[k].suffix);
            Kind kind = LAYER[k].kind;
            int64_t ne0 = kind == K_O ? q_dim : kind == K_DOWN ? s->ffn : kind == K_QNORM || kind == K_KNORM ? s->head_dim : D;
            int64_t ne1 = kind == K_Q ? q_dim : kind == K_K || kind == K_V ? kv_dim
                        : kind == K_O || kind == K_DOWN ? D : kind == K_GATE || kind == K_UP ? s->ffn : 0;
            spec_add(&list, &n, name, kind, l, ne0, ne1);
        }
    }
    spec_add(&list, &n, "output_norm.weight", K_OUT_NORM, -1, D, 0);
    if (o->untied) spec_add(&list, &n, "output.weight", K_OUTPUT, -1, D, s->vocab);
    for (int i = 0; i < n; i++) list[i].type = spec_type(o, &list[i]);
    *n_out = n;
    return list;
}

/* Shape rules, with messages that say which flag to change. */
static int check_shape(const Options *o, const Spec *specs, int n, char *err) {
    const Shape *s = &o->shape;
    if (s->heads % s->kv_heads != 0) {
        err_set(err, "--heads %d is not a multiple of --kv-heads %d", s->heads, s->kv_heads);
        return 1;
    }
    if (s->head_dim % 2 != 0) {
        err_set(err, "--head-dim %d must be even (RoPE rotates pairs of dimensions)", s->head_dim);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        int block = dtype_block_size(specs[i].type);
        if (specs[i].ne[0] % block != 0) {
            err_set(err, "--type %s: %s has rows of %lld values, not a multiple of %s's block of %d "
                    "(choose --hidden, --heads x --head-dim and --ffn as multiples of %d)",
                    o->type->name, specs[i].name, (long long)specs[i].ne[0],
                    dtype_name(specs[i].type), block, block);
            return 1;
        }
    }
    return 0;
}

/* ==== writing ================================================================== */

static void add_metadata(GgufWriter *w, const Options *o, const Vocab *v) {
    const Shape *s = &o->shape;
    char name[96];
    snprintf(name, sizeof name, "mkmodel %s %s seed %llu", o->preset, o->type->name,
             (unsigned long long)o->seed);
    gw_add_str(w, "general.architecture", "qwen3");
    gw_add_str(w, "general.name", name);
    gw_add_u32(w, "general.file_type", o->type->file_type);
    if (o->type->base != DT_F32 && o->type->base != DT_F16 && o->type->base != DT_BF16)
        gw_add_u32(w, "general.quantization_version", 2);
    gw_add_u32(w, "qwen3.block_count", (uint32_t)s->layers);
    gw_add_u32(w, "qwen3.context_length", (uint32_t)s->ctx);
    gw_add_u32(w, "qwen3.embedding_length", (uint32_t)s->hidden);
    gw_add_u32(w, "qwen3.feed_forward_length", (uint32_t)s->ffn);
    gw_add_u32(w, "qwen3.attention.head_count", (uint32_t)s->heads);
    gw_add_u32(w, "qwen3.attention.head_count_kv", (uint32_t)s->kv_heads);
    gw_add_u32(w, "qwen3.attention.key_length", (uint32_t)s->head_dim);
    gw_add_u32(w, "qwen3.attention.value_length", (uint32_t)s->head_dim);
    gw_add_f32(w, "qwen3.rope.freq_base", 1000000.0f);
    gw_add_f32(w, "qwen3.attention.layer_norm_rms_epsilon", 1e-6f);
    gw_add_str(w, "tokenizer.ggml.model", "gpt2");
    gw_add_str(w, "tokenizer.ggml.pre", "qwen2");
    gw_add_str_arr(w, "tokenizer.ggml.tokens", (const char *const *)v->str, (uint64_t)v->n);
    gw_add_arr(w, "tokenizer.ggml.token_type", GGUF_INT32, v->type, (uint64_t)v->n);
    gw_add_str_arr(w, "tokenizer.ggml.merges", (const char *const *)v->merges, (uint64_t)v->n_merges);
    gw_add_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)v->bos);
    gw_add_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)v->eos);
    gw_add_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)v->pad);
    gw_add_bool(w, "tokenizer.ggml.add_bos_token", false);
    gw_add_str(w, "tokenizer.chat_template", CHAT_TEMPLATE);
}

/* Generates, converts and streams one tensor, a row at a time. */
static int write_tensor(GgufWriter *w, FILE *f, const Plan *p, uint64_t seed, const Spec *t,
                        char *err) {
    size_t row_bytes = dtype_row_bytes(t->type, t->ne[0]);
    float *row = xmalloc((size_t)t->ne[0] * sizeof *row);
    void *q = xmalloc(row_bytes);
    int rc = 0;
    for (int64_t r = 0; r < t->ne[1] && !rc; r++) {
        gen_row(p, seed, t, r, row);
        quant_row(t->type, row, q, t->ne[0]);
        rc = gw_write_data(w, f, q, row_bytes, err);
    }
    free(row);
    free(q);
    return rc;
}

/* Where the model goes: a new temporary file beside the target, renamed over
 * it once complete, so that a failed or interrupted write leaves whatever was
 * there and no partial model. A target that exists and is not a regular file
 * (a device, a pipe) is written in place. Either way mkmodel removes only the
 * temporary file it created, never the path it was given. Sets *tmp (malloc'd,
 * NULL when writing in place). */
static FILE *open_output(const char *out, char **tmp, char *err) {
    struct stat st;
    *tmp = NULL;
    if (stat(out, &st) == 0 && !S_ISREG(st.st_mode)) {
        FILE *f = fopen(out, "wb");
        if (!f) err_set(err, "cannot write %s: %s", out, strerror(errno));
        return f;
    }
    size_t len = strlen(out) + 32;
    *tmp = xmalloc(len);
    snprintf(*tmp, len, "%s.tmp%ld", out, (long)getpid());
    int fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        err_set(err, "cannot create %s: %s", *tmp, strerror(errno));
        if (fd >= 0) {
            close(fd);
            remove(*tmp);
        }
        free(*tmp);
        *tmp = NULL;
    }
    return f;
}

/* The writer with the model's metadata and tensors declared; NULL with err. */
static GgufWriter *declare_model(const Options *o, const Spec *specs, int n, const Vocab *v, char *err) {
    GgufWriter *w = gw_new();
    add_metadata(w, o, v);
    for (int i = 0; i < n; i++)
        if (gw_add_tensor(w, specs[i].name, specs[i].type, (uint32_t)specs[i].n_dims, specs[i].ne, err)) {
            gw_free(w);
            return NULL;
        }
    return w;
}

static int write_model(const Options *o, const Spec *specs, int n, const Vocab *v, char *err) {
    GgufWriter *w = declare_model(o, specs, n, v, err);
    if (!w) return 1;
    char *tmp;
    FILE *f = open_output(o->out, &tmp, err);
    if (!f) {
        gw_free(w);
        return 1;
    }
    setvbuf(f, NULL, _IOFBF, 1 << 22);
    int rc = gw_write_header(w, f, err);
    Plan plan = plan_make(&o->shape, o->seed);
    for (int i = 0; i < n && !rc; i++) rc = write_tensor(w, f, &plan, o->seed, &specs[i], err);
    if (!rc) rc = gw_finish(w, f, err);
    plan_free(&plan);
    gw_free(w);
    if (fclose(f) != 0 && !rc) {
        err_set(err, "writing %s failed: %s", tmp ? tmp : o->out, strerror(errno));
        rc = 1;
    }
    if (!rc && tmp && rename(tmp, o->out) != 0) {
        err_set(err, "cannot rename %s to %s: %s", tmp, o->out, strerror(errno));
        rc = 1;
    }
    if (rc && tmp) remove(tmp); /* no truncated model left behind */
    free(tmp);
    return rc;
}

int main(int argc, char **argv) {
    char err[ERR_MAX];
    Options o;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        }
    }
    if (parse_args(argc, argv, &o, err)) {
        fprintf(stderr, "mkmodel: %s\n", err);
        usage(stderr);
        return 2;
    }
    int n;
    Spec *specs = make_specs(&o, &n);
    if (check_shape(&o, specs, n, err)) {
        fprintf(stderr, "mkmodel: %s\n", err);
        free(specs);
        return 2;
    }
    double t0 = time_now_ms();
    Vocab v;
    build_vocab(&v, o.shape.vocab);
    if (o.print_size) {
        GgufWriter *w = declare_model(&o, specs, n, &v, err);
        if (w) printf("%llu\n", (unsigned long long)gw_file_size(w));
        else fprintf(stderr, "mkmodel: %s\n", err);
        gw_free(w);
        vocab_free(&v);
        free(specs);
        return w ? 0 : 1;
    }
    int rc = write_model(&o, specs, n, &v, err);
    if (rc) {
        fprintf(stderr, "mkmodel: %s\n", err);
    } else {
        printf("mkmodel: wrote %s (%s, %s, %d tensors, vocab %d = 256 bytes + %d merges + 5 "
               "special + %d pad) in %.1f s\n",
               o.out, o.preset, o.type->name, n, v.n, v.n_merges, v.n - 261 - v.n_merges,
               (time_now_ms() - t0) / 1000);
    }
    vocab_free(&v);
    free(specs);
    return rc ? 1 : 0;
}
