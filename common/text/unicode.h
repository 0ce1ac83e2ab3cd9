/* unicode.h: the bits of Unicode a byte-level BPE tokenizer needs.
 *
 * - UTF-8 decoding that never fails: each byte that does not start a valid
 *   sequence becomes one U+FFFD, the way llama.cpp treats invalid input, so any
 *   byte string can be tokenized.
 * - The character classes of the pre-tokenizer: letter (category L*), number
 *   (N*) and white space (the Unicode White_Space property).
 * - GPT-2's byte <-> code point map, which lets a vocabulary store arbitrary
 *   bytes as printable text ("Ġ" is the space byte).
 * - A streaming decoder that prints tokens as they come without ever cutting a
 *   character in half (one emoji is often two or three tokens). */
#ifndef UNICODE_H
#define UNICODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UNICODE_REPLACEMENT 0xFFFDu
#define UNICODE_MAX 0x10FFFFu

/* ---- UTF-8 ---------------------------------------------------------------- */

/* Checks the sequence at s[0..len): returns its length (1..4) when s starts
 * with a complete, valid one; 0 when s is a valid but unfinished start (more
 * bytes needed); -1 when s[0] cannot start a valid sequence. Valid means
 * shortest form, no surrogates, at most U+10FFFF. */
int utf8_check(const char *s, size_t len);

/* Decodes one code point from s[0..len) (len > 0) into *cp and returns the bytes
 * consumed. An invalid or truncated sequence gives U+FFFD and consumes exactly
 * one byte, so each bad byte becomes one replacement character. */
int utf8_decode(const char *s, size_t len, uint32_t *cp);

/* Writes cp as UTF-8 into out (room for 4 bytes); returns the length. Code
 * points that cannot be encoded (surrogates, > U+10FFFF) give U+FFFD. */
int utf8_encode(uint32_t cp, char *out);

/* Decodes a whole string; returns a malloc'ed array of *n code points. */
uint32_t *utf8_decode_all(const char *s, size_t len, size_t *n);

/* ---- Character classes ------------------------------------------------------ */

bool unicode_is_letter(uint32_t cp);     /* general category L* */
bool unicode_is_number(uint32_t cp);     /* general category N* (digits, ½, Ⅷ, ...) */
bool unicode_is_whitespace(uint32_t cp); /* White_Space: \t..\r, space, U+0085, U+00A0, ... */

/* The generated tables behind the first two (unicode_data.c, written by
 * tools/gen_unicode.c): sorted, disjoint [first, last] ranges. */
extern const uint32_t unicode_letter_ranges[][2];
extern const int unicode_letter_ranges_count;
extern const uint32_t unicode_number_ranges[][2];
extern const int unicode_number_ranges_count;

/* ---- GPT-2 byte-level map ---------------------------------------------------- */

/* The code point that stands for byte b in vocabulary text: printable bytes
 * (0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF) stand for themselves, the other 68 take
 * U+0100, U+0101, ... in increasing byte order (space 0x20 -> U+0120 "Ġ"). */
uint32_t unicode_byte_to_cp(uint8_t b);
/* The inverse: the byte that cp stands for, or -1 if cp is not in the map. */
int unicode_cp_to_byte(uint32_t cp);

/* ---- Streaming UTF-8 ---------------------------------------------------------- */

/* Turns a stream of byte chunks (token pieces) into complete characters: an
 * unfinished sequence at the end of a chunk is held back until the next chunk
 * completes it; bytes that cannot be part of a valid sequence come out as
 * U+FFFD, one per byte, like utf8_decode. Zero-initialize (or utf8_stream_init). */
typedef struct {
    char pending[4];
    int n_pending;
} Utf8Stream;

/* Output room that utf8_stream_push needs for an n-byte chunk. */
#define UTF8_STREAM_OUT_MAX(n) (3 * ((size_t)(n) + 4))

void utf8_stream_init(Utf8Stream *s);
/* Feeds bytes[0..n); writes the complete characters to out (room for
 * UTF8_STREAM_OUT_MAX(n) bytes, not NUL-terminated) and returns their length. */
size_t utf8_stream_push(Utf8Stream *s, const char *bytes, size_t n, char *out);
/* Ends the stream: a held-back unfinished sequence comes out as U+FFFD per byte.
 * out needs UTF8_STREAM_OUT_MAX(0) bytes. The stream is then empty again. */
size_t utf8_stream_flush(Utf8Stream *s, char *out);

#endif
