"""Byte-level BPE exactly as the engine's tokenizer runs it (book/appendix-gguf.md A.4).

- byte_to_unicode(): GPT-2's byte -> visible character table (section 5.3);
  its order also gives the ids 0..255 of the single-byte tokens (5.1).
- pretokenize(): the hand-written qwen2 pre-tokenizer (section 5.4).
- Tokenizer.encode(): lowest-rank merge first, leftmost on ties (5.5), with
  added tokens split out of the text first, longest first (5.6).
- train_merges(): learns the merges from a text (the project's own step).
"""
import collections
import unicodedata


# ------------------------------------------------------------ byte mapping

def byte_order():
    """Bytes in id order: the 188 printable ones, then the other 68."""
    printable = (list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD))
                 + list(range(0xAE, 0x100)))
    rest = [b for b in range(256) if b not in printable]
    return printable + rest


def byte_to_unicode():
    """byte -> one-character string; printable bytes map to themselves,
    the n-th other byte (in increasing order) to U+0100 + n."""
    printable = byte_order()[:188]
    table = {b: chr(b) for b in printable}
    n = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(0x100 + n)
            n += 1
    return table


BYTE_TO_UNICODE = byte_to_unicode()
UNICODE_TO_BYTE = {c: b for b, c in BYTE_TO_UNICODE.items()}


def to_byte_level(text):
    return "".join(BYTE_TO_UNICODE[b] for b in text.encode("utf-8"))


# ------------------------------------------------------------ pre-tokenizer

WHITESPACE = set("\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000"
                 + "".join(chr(c) for c in range(0x2000, 0x200B)))


def is_letter(c):
    return unicodedata.category(c)[0] == "L"


def is_number(c):
    return unicodedata.category(c)[0] == "N"


def is_space(c):
    return c in WHITESPACE


def is_newline(c):
    return c in "\r\n"


def is_other(c):
    return not (is_space(c) or is_letter(c) or is_number(c))


def _run(s, i, pred):
    """End of the maximal run of characters satisfying pred starting at i."""
    while i < len(s) and pred(s[i]):
        i += 1
    return i


def _contraction(s, i):
    """Length of a contraction ('s 't 're 've 'm 'll 'd, any case) at i, or 0."""
    if s[i] != "'":
        return 0
    rest = s[i + 1:i + 3].lower()
    if rest[:2] in ("re", "ve", "ll"):
        return 3
    if rest[:1] in ("s", "t", "m", "d"):
        return 2
    return 0


def _piece_end(s, i):
    """End of the piece starting at i: the first rule of section 5.4 that applies."""
    n = len(s)
    c = s[i]
    k = _contraction(s, i)                                       # rule 1
    if k:
        return i + k
    if is_letter(c):                                             # rule 2
        return _run(s, i, is_letter)
    if (not is_newline(c) and not is_number(c)
            and i + 1 < n and is_letter(s[i + 1])):
        return _run(s, i + 1, is_letter)
    if is_number(c):                                             # rule 3
        return i + 1
    j = i + 1 if (c == " " and i + 1 < n and is_other(s[i + 1])) else i
    if is_other(s[j]):                                           # rule 4
        return _run(s, _run(s, j, is_other), is_newline)
    end = _run(s, i, is_space)
    last_nl = max((p for p in range(i, end) if is_newline(s[p])), default=-1)
    if last_nl >= 0:                                             # rule 5
        return last_nl + 1
    if end - i >= 2 and end < n:                                 # rule 6
        return end - 1
    return end                                                   # rule 7


def pretokenize(text):
    """Splits text into the pieces BPE works on independently."""
    pieces, i = [], 0
    while i < len(text):
        j = _piece_end(text, i)
        pieces.append(text[i:j])
        i = j
    return pieces


# ------------------------------------------------------------ encoding

def bpe(symbols, ranks):
    """Merges adjacent symbols, lowest rank first, leftmost among equals."""
    symbols = list(symbols)
    while len(symbols) > 1:
        best, best_rank = -1, None
        for i in range(len(symbols) - 1):
            r = ranks.get((symbols[i], symbols[i + 1]))
            if r is not None and (best_rank is None or r < best_rank):
                best, best_rank = i, r
        if best < 0:
            break
        symbols[best:best + 2] = [symbols[best] + symbols[best + 1]]
    return symbols


class Tokenizer:
    """tokens: id -> byte-level text; merges: list of (left, right) in rank order;
    added: texts of the added tokens (split out of raw text before BPE)."""

    def __init__(self, tokens, merges, added=()):
        self.tokens = list(tokens)
        self.ids = {t: i for i, t in enumerate(self.tokens)}
        self.ranks = {pair: r for r, pair in enumerate(merges)}
        self.added = sorted(added, key=len, reverse=True)
        self.cache = {}

    def encode_plain(self, text):
        """Text without added tokens -> ids."""
        out = []
        for piece in pretokenize(text):
            ids = self.cache.get(piece)
            if ids is None:
                ids = [self.ids[s] for s in bpe(to_byte_level(piece), self.ranks)]
                self.cache[piece] = ids
            out.extend(ids)
        return out

    def encode(self, text):
        """Text that may contain added tokens such as <|im_end|> -> ids."""
        parts = [text]
        for tok in self.added:          # longest first, as the engine does
            split = []
            for p in parts:
                if isinstance(p, int):
                    split.append(p)
                    continue
                chunks = p.split(tok)
                for k, chunk in enumerate(chunks):
                    if k:
                        split.append(self.ids[tok])
                    if chunk:
                        split.append(chunk)
            parts = split
        out = []
        for p in parts:
            out.extend([p] if isinstance(p, int) else self.encode_plain(p))
        return out

    def decode(self, ids):
        """ids -> text; bytes are joined first since a token may end inside
        a multi-byte UTF-8 character."""
        out = bytearray()
        for i in ids:
            t = self.tokens[i]
            if t in self.added:
                out += t.encode("utf-8")
            else:
                out += bytes(UNICODE_TO_BYTE[c] for c in t)
        return out.decode("utf-8", errors="replace")


# ------------------------------------------------------------ training

def train_merges(text, n_merges, log=None):
    """Learns n_merges merges from text (no added tokens in it).

    Counts each distinct pre-token piece once with its frequency, then
    repeatedly merges the most frequent adjacent pair (ties: the smallest
    pair as strings, so the result is deterministic).  A pair whose result
    is already a token is skipped so that every token text stays unique
    (the engine looks tokens up by text)."""
    counts = collections.Counter(pretokenize(text))
    words = [[list(to_byte_level(p)), n] for p, n in counts.items()]
    known = set(BYTE_TO_UNICODE.values())
    merges = []
    while len(merges) < n_merges:
        pairs = collections.Counter()
        for syms, n in words:
            for a, b in zip(syms, syms[1:]):
                pairs[(a, b)] += n
        ranked = sorted(((-n, p) for p, n in pairs.items()
                         if p[0] + p[1] not in known))
        if not ranked:
            break
        pair = ranked[0][1]
        merges.append(pair)
        known.add(pair[0] + pair[1])
        for w in words:
            w[0] = _merge_pair(w[0], pair)
        if log and len(merges) % 256 == 0:
            log("  %d merges, last %r" % (len(merges), pair[0] + pair[1]))
    return merges


def _merge_pair(syms, pair):
    out, i = [], 0
    while i < len(syms):
        if i + 1 < len(syms) and (syms[i], syms[i + 1]) == pair:
            out.append(syms[i] + syms[i + 1])
            i += 2
        else:
            out.append(syms[i])
            i += 1
    return out
