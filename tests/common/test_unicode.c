/* test_unicode.c: UTF-8, character classes, the GPT-2 byte map, streaming
 * (common/text/unicode.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "unicode.h"

/* Decodes s[0..n) and checks the code points against want[0..n_want). */
static void check_decodes(const char *s, size_t n, const uint32_t *want, size_t n_want) {
    size_t got_n;
    uint32_t *got = utf8_decode_all(s, n, &got_n);
    CHECK_EQ_INT(got_n, n_want);
    for (size_t i = 0; i < got_n && i < n_want; i++)
        CHECK_MSG(got[i] == want[i], "code point %zu: U+%04X, want U+%04X", i, (unsigned)got[i],
                  (unsigned)want[i]);
    free(got);
}

#define CHECK_DECODES(lit, ...)                                                \
    do {                                                                       \
        const uint32_t want_[] = {__VA_ARGS__};                                \
        check_decodes(lit, sizeof lit - 1, want_, sizeof want_ / sizeof *want_); \
    } while (0)

TEST(unicode_utf8_round_trip) {
    const uint32_t cps[] = {0, 0x41, 0x7F, 0x80, 0xE9, 0x7FF, 0x800, 0x20AC, 0xD7FF,
                            0xE000, 0xFFFD, 0xFFFF, 0x10000, 0x1F999, 0x10FFFF};
    const int lens[] = {1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 3, 3, 4, 4, 4};
    for (size_t i = 0; i < sizeof cps / sizeof *cps; i++) {
        char buf[4];
        int n = utf8_encode(cps[i], buf);
        CHECK_EQ_INT(n, lens[i]);
        CHECK_EQ_INT(utf8_check(buf, (size_t)n), n);
        uint32_t back;
        CHECK_EQ_INT(utf8_decode(buf, (size_t)n, &back), n);
        CHECK_EQ_INT(back, cps[i]);
    }
    char buf[4];
    CHECK_EQ_INT(utf8_encode(0xD800, buf), 3); /* surrogates cannot be encoded: U+FFFD */
    CHECK(memcmp(buf, "\xEF\xBF\xBD", 3) == 0);
    CHECK_EQ_INT(utf8_encode(0x110000, buf), 3);
}

TEST(unicode_utf8_invalid_bytes) {
    CHECK_DECODES("a\xFF" "b", 'a', 0xFFFD, 'b');
    CHECK_DECODES("\x80", 0xFFFD);                                 /* lone continuation */
    CHECK_DECODES("\xC0\x80", 0xFFFD, 0xFFFD);                     /* overlong NUL */
    CHECK_DECODES("\xE0\x80\x80", 0xFFFD, 0xFFFD, 0xFFFD);         /* overlong */
    CHECK_DECODES("\xED\xA0\x80", 0xFFFD, 0xFFFD, 0xFFFD);         /* surrogate U+D800 */
    CHECK_DECODES("\xF4\x90\x80\x80", 0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD); /* > U+10FFFF */
    CHECK_DECODES("\xE2\x82", 0xFFFD, 0xFFFD);                     /* truncated at the end */
    CHECK_DECODES("\xE2\x82" "A", 0xFFFD, 0xFFFD, 'A');            /* interrupted */
    CHECK_DECODES("\xF0\x9F\xA6\x99!", 0x1F999, '!');
    CHECK_EQ_INT(utf8_check("\xF0\x9F", 2), 0);  /* unfinished: wait for more */
    CHECK_EQ_INT(utf8_check("\xE0\x80", 2), -1); /* can never become valid */
    CHECK_EQ_INT(utf8_check("\xC1", 1), -1);
}

TEST(unicode_classes) {
    CHECK(unicode_is_letter('A') && unicode_is_letter('z') && !unicode_is_letter('_'));
    CHECK(unicode_is_letter(0xE9));     /* é */
    CHECK(unicode_is_letter(0x4E00));   /* CJK, inside a "First>/Last>" range */
    CHECK(unicode_is_letter(0x9FFF));
    CHECK(unicode_is_letter(0xAC00));   /* Hangul syllable range */
    CHECK(unicode_is_letter(0x20000));  /* CJK extension B */
    CHECK(unicode_is_letter(0x1780));   /* Khmer KA */
    CHECK(!unicode_is_letter(0x17B6));  /* Khmer vowel sign: a mark (Mc), not a letter */
    CHECK(!unicode_is_letter(0x0301));  /* combining acute accent (Mn) */
    CHECK(!unicode_is_letter(0xE000));  /* private use */
    CHECK(unicode_is_number('0') && unicode_is_number('9') && !unicode_is_number('a'));
    CHECK(unicode_is_number(0xBD));     /* ½ (No) */
    CHECK(unicode_is_number(0xB2));     /* ² (No) */
    CHECK(unicode_is_number(0x2167));   /* Ⅷ (Nl) */
    CHECK(unicode_is_number(0x0663));   /* Arabic-Indic three (Nd) */
    CHECK(!unicode_is_number(0x4E00));
    const uint32_t ws[] = {9, 10, 11, 12, 13, 0x20, 0x85, 0xA0, 0x1680, 0x2000, 0x200A,
                           0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
    for (size_t i = 0; i < sizeof ws / sizeof *ws; i++)
        CHECK_MSG(unicode_is_whitespace(ws[i]), "U+%04X is white space", (unsigned)ws[i]);
    CHECK(!unicode_is_whitespace(0x200B)); /* zero width space is not White_Space */
    CHECK(!unicode_is_whitespace(0x1C) && !unicode_is_whitespace('a'));
}

static void check_ranges(const uint32_t (*r)[2], int n, const char *name) {
    CHECK_MSG(n > 50, "%s: only %d ranges", name, n);
    for (int i = 0; i < n; i++) {
        CHECK_MSG(r[i][0] <= r[i][1], "%s[%d] is empty", name, i);
        CHECK_MSG(i == 0 || r[i - 1][1] + 1 < r[i][0], "%s[%d] is not sorted/merged", name, i);
        if (test_failed_now()) return;
    }
    CHECK(r[n - 1][1] <= UNICODE_MAX);
}

TEST(unicode_tables_sorted) {
    check_ranges(unicode_letter_ranges, unicode_letter_ranges_count, "letters");
    check_ranges(unicode_number_ranges, unicode_number_ranges_count, "numbers");
}

/* The map as GPT-2's bytes_to_unicode builds it, for comparison. */
TEST(unicode_byte_map) {
    uint32_t want[256];
    bool printable[256] = {false};
    for (int b = 0x21; b <= 0x7E; b++) printable[b] = true;
    for (int b = 0xA1; b <= 0xAC; b++) printable[b] = true;
    for (int b = 0xAE; b <= 0xFF; b++) printable[b] = true;
    uint32_t next = 256;
    for (int b = 0; b < 256; b++) want[b] = printable[b] ? (uint32_t)b : next++;
    for (int b = 0; b < 256; b++) {
        CHECK_EQ_INT(unicode_byte_to_cp((uint8_t)b), want[b]);
        CHECK_EQ_INT(unicode_cp_to_byte(want[b]), b);
    }
    CHECK_EQ_INT(unicode_byte_to_cp(' '), 0x120);   /* Ġ */
    CHECK_EQ_INT(unicode_byte_to_cp('\n'), 0x10A);  /* Ċ */
    CHECK_EQ_INT(unicode_byte_to_cp(0xA0), 0x142);
    CHECK_EQ_INT(unicode_byte_to_cp(0xAD), 0x143);
    CHECK_EQ_INT(unicode_cp_to_byte(0x20), -1);     /* a raw space is not in the alphabet */
    CHECK_EQ_INT(unicode_cp_to_byte(0xAD), -1);
    CHECK_EQ_INT(unicode_cp_to_byte(0x144), -1);
    CHECK_EQ_INT(unicode_cp_to_byte(0x4E00), -1);
}

/* Pushes the chunks of s cut at the given offsets, then flushes; returns the output. */
static size_t stream_chunks(const char *s, size_t n, const size_t *cuts, int n_cuts, char *out) {
    Utf8Stream st;
    utf8_stream_init(&st);
    size_t o = 0, pos = 0;
    for (int i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : n;
        o += utf8_stream_push(&st, s + pos, end - pos, out + o);
        pos = end;
    }
    return o + utf8_stream_flush(&st, out + o);
}

TEST(unicode_stream_split_character) {
    Utf8Stream st;
    utf8_stream_init(&st);
    char out[64];
    const char *llama = "\xF0\x9F\xA6\x99"; /* one emoji, fed a byte at a time */
    for (int i = 0; i < 3; i++) CHECK_EQ_INT(utf8_stream_push(&st, llama + i, 1, out), 0);
    CHECK_EQ_INT(utf8_stream_push(&st, llama + 3, 1, out), 4);
    CHECK(memcmp(out, llama, 4) == 0);
    CHECK_EQ_INT(utf8_stream_flush(&st, out), 0);

    CHECK_EQ_INT(utf8_stream_push(&st, "ab\xE2\x82", 4, out), 2); /* "ab" now, € later */
    CHECK(memcmp(out, "ab", 2) == 0);
    CHECK_EQ_INT(utf8_stream_push(&st, "\xAC!", 2, out), 4);
    CHECK(memcmp(out, "\xE2\x82\xAC!", 4) == 0);
}

TEST(unicode_stream_invalid) {
    Utf8Stream st;
    utf8_stream_init(&st);
    char out[64];
    CHECK_EQ_INT(utf8_stream_push(&st, "\xE2\x82", 2, out), 0);
    CHECK_EQ_INT(utf8_stream_push(&st, "A", 1, out), 7); /* the held bytes were not a character */
    CHECK(memcmp(out, "\xEF\xBF\xBD\xEF\xBF\xBD" "A", 7) == 0);
    CHECK_EQ_INT(utf8_stream_push(&st, "\xFF", 1, out), 3);
    CHECK_EQ_INT(utf8_stream_push(&st, "\xF0\x9F", 2, out), 0);
    CHECK_EQ_INT(utf8_stream_flush(&st, out), 6); /* cut short at the end */
    CHECK(memcmp(out, "\xEF\xBF\xBD\xEF\xBF\xBD", 6) == 0);
}

/* However a byte string is cut into chunks, the stream gives the same text as
 * decoding it in one go. */
TEST(unicode_stream_any_chunking) {
    static const char alphabet[] = "a \xC3\xA9\xE2\x82\xAC\xF0\x9F\xA6\x99\x80\xFF\xED\xA0\xC0";
    uint32_t seed = 12345;
    for (int trial = 0; trial < 2000; trial++) {
        char s[24];
        size_t n = (size_t)(trial % 24);
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            s[i] = alphabet[(seed >> 16) % (sizeof alphabet - 1)];
        }
        size_t n_cp;
        uint32_t *cp = utf8_decode_all(s, n, &n_cp);
        char want[128];
        size_t w = 0;
        for (size_t i = 0; i < n_cp; i++) w += (size_t)utf8_encode(cp[i], want + w);
        free(cp);
        size_t cuts[24];
        int n_cuts = 0;
        for (size_t i = 1; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            if ((seed >> 16) % 3 == 0) cuts[n_cuts++] = i;
        }
        char got[UTF8_STREAM_OUT_MAX(24)];
        size_t g = stream_chunks(s, n, cuts, n_cuts, got);
        CHECK_MSG(g == w && memcmp(got, want, w) == 0, "trial %d: stream output differs", trial);
        if (test_failed_now()) return;
    }
}
