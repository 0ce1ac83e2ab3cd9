/* unicode.c: see unicode.h. */
#include "unicode.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- UTF-8 ---------------------------------------------------------------- */

/* For a lead byte: the sequence length and the allowed range of the second
 * byte (narrower than 0x80..0xBF for E0, ED, F0, F4: that range is what rules
 * out overlong forms, surrogates and code points above U+10FFFF). Returns 0
 * for bytes that never start a sequence (continuations, C0, C1, F5..FF). */
static int utf8_lead(uint8_t b, uint8_t *lo, uint8_t *hi) {
    *lo = 0x80;
    *hi = 0xBF;
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) return 2;
    if (b >= 0xE0 && b <= 0xEF) {
        if (b == 0xE0) *lo = 0xA0;
        if (b == 0xED) *hi = 0x9F;
        return 3;
    }
    if (b >= 0xF0 && b <= 0xF4) {
        if (b == 0xF0) *lo = 0x90;
        if (b == 0xF4) *hi = 0x8F;
        return 4;
    }
    return 0;
}

int utf8_check(const char *s, size_t len) {
    const uint8_t *u = (const uint8_t *)s;
    uint8_t lo, hi;
    int need = utf8_lead(u[0], &lo, &hi);
    if (need == 0) return -1;
    for (int i = 1; i < need; i++) {
        if ((size_t)i >= len) return 0;
        if (u[i] < lo || u[i] > hi) return -1;
        lo = 0x80;
        hi = 0xBF;
    }
    return need;
}

int utf8_decode(const char *s, size_t len, uint32_t *cp) {
    const uint8_t *u = (const uint8_t *)s;
    int n = utf8_check(s, len);
    switch (n) {
    case 1: *cp = u[0]; return 1;
    case 2: *cp = (uint32_t)(u[0] & 0x1F) << 6 | (u[1] & 0x3F); return 2;
    case 3:
        *cp = (uint32_t)(u[0] & 0x0F) << 12 | (uint32_t)(u[1] & 0x3F) << 6 | (u[2] & 0x3F);
        return 3;
    case 4:
        *cp = (uint32_t)(u[0] & 0x07) << 18 | (uint32_t)(u[1] & 0x3F) << 12 |
              (uint32_t)(u[2] & 0x3F) << 6 | (u[3] & 0x3F);
        return 4;
    default: *cp = UNICODE_REPLACEMENT; return 1;
    }
}

int utf8_encode(uint32_t cp, char *out) {
    uint8_t *o = (uint8_t *)out;
    if (cp > UNICODE_MAX || (cp >= 0xD800 && cp <= 0xDFFF)) cp = UNICODE_REPLACEMENT;
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xC0 | cp >> 6);
        o[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | cp >> 12);
        o[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | cp >> 18);
    o[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

uint32_t *utf8_decode_all(const char *s, size_t len, size_t *n) {
    uint32_t *cps = xmalloc((len ? len : 1) * sizeof *cps); /* never more code points than bytes */
    size_t i = 0, k = 0;
    while (i < len) i += (size_t)utf8_decode(s + i, len - i, &cps[k++]);
    *n = k;
    return cps;
}

/* ---- Character classes ------------------------------------------------------ */

static bool in_ranges(const uint32_t (*r)[2], int n, uint32_t cp) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < r[mid][0]) hi = mid - 1;
        else if (cp > r[mid][1]) lo = mid + 1;
        else return true;
    }
    return false;
}

bool unicode_is_letter(uint32_t cp) {
    if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
    return in_ranges(unicode_letter_ranges, unicode_letter_ranges_count, cp);
}

bool unicode_is_number(uint32_t cp) {
    if (cp < 0x80) return cp >= '0' && cp <= '9';
    return in_ranges(unicode_number_ranges, unicode_number_ranges_count, cp);
}

bool unicode_is_whitespace(uint32_t cp) {
    switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20:
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202F: case 0x205F: case 0x3000:
        return true;
    default:
        return cp >= 0x2000 && cp <= 0x200A;
    }
}

/* ---- GPT-2 byte-level map ---------------------------------------------------- */

static bool byte_is_printable(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

/* The 68 non-printable bytes, in increasing order, are 0x00..0x20 (33 bytes),
 * 0x7F..0xA0 (34 bytes) and 0xAD; the n-th of them stands for U+0100 + n. */
uint32_t unicode_byte_to_cp(uint8_t b) {
    if (byte_is_printable(b)) return b;
    if (b <= 0x20) return 0x100u + b;
    if (b <= 0xA0) return 0x100u + 33 + (b - 0x7Fu);
    return 0x100u + 67; /* 0xAD */
}

int unicode_cp_to_byte(uint32_t cp) {
    if (cp < 0x100) return byte_is_printable(cp) ? (int)cp : -1;
    uint32_t n = cp - 0x100;
    if (n < 33) return (int)n;
    if (n < 67) return (int)(0x7F + n - 33);
    if (n == 67) return 0xAD;
    return -1;
}

/* ---- Streaming UTF-8 ---------------------------------------------------------- */

void utf8_stream_init(Utf8Stream *s) { memset(s, 0, sizeof *s); }

static size_t put_replacement(char *out) { return (size_t)utf8_encode(UNICODE_REPLACEMENT, out); }

static size_t stream_feed(Utf8Stream *s, const char *p, size_t n, char *out);

/* One step on the held-back bytes after byte c arrived: emits the character if
 * complete, keeps waiting if still unfinished, and when the sequence turns out
 * invalid emits U+FFFD for its first byte and feeds the rest again. */
static size_t stream_top_up(Utf8Stream *s, char c, char *out) {
    s->pending[s->n_pending++] = c;
    int r = utf8_check(s->pending, (size_t)s->n_pending);
    if (r == 0) return 0;
    if (r > 0) {
        memcpy(out, s->pending, (size_t)r);
        s->n_pending = 0;
        return (size_t)r;
    }
    char rest[3];
    size_t n_rest = (size_t)s->n_pending - 1;
    memcpy(rest, s->pending + 1, n_rest);
    s->n_pending = 0;
    size_t o = put_replacement(out);
    return o + stream_feed(s, rest, n_rest, out + o);
}

static size_t stream_feed(Utf8Stream *s, const char *p, size_t n, char *out) {
    size_t i = 0, o = 0;
    while (i < n) {
        if (s->n_pending > 0) {
            o += stream_top_up(s, p[i++], out + o);
            continue;
        }
        int r = utf8_check(p + i, n - i);
        if (r > 0) {
            memcpy(out + o, p + i, (size_t)r);
            o += (size_t)r;
            i += (size_t)r;
        } else if (r == 0) { /* an unfinished sequence ends the chunk: hold it */
            memcpy(s->pending, p + i, n - i);
            s->n_pending = (int)(n - i);
            i = n;
        } else {
            o += put_replacement(out + o);
            i++;
        }
    }
    return o;
}

size_t utf8_stream_push(Utf8Stream *s, const char *bytes, size_t n, char *out) {
    return stream_feed(s, bytes, n, out);
}

size_t utf8_stream_flush(Utf8Stream *s, char *out) {
    size_t o = 0;
    for (int i = 0; i < s->n_pending; i++) o += put_replacement(out + o);
    s->n_pending = 0;
    return o;
}
