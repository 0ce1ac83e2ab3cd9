"""Checks this tool's tokenizer and reference forward against llama.cpp.

Uses ../shared/reference (not part of the project; skipped without it):
  - bpe.py on llama.cpp's 46 qwen2 tokenizer cases, with the real Qwen vocabulary;
  - reference.py on the tiny Qwen3 GGUFs there: prompt ids, first-step
    logits and 32 greedy tokens as llama.cpp computed them.
If both agree, the GGUFs this tool writes are read and run the way llama.cpp
(and so the engine) runs Qwen3.
Run: /usr/bin/python3 tools/train/check_llamacpp.py
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe                                             # noqa: E402
import gguf                                            # noqa: E402
from reference import Reference, tokenizer_from_meta   # noqa: E402

REF = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "..", "..", "..", "shared", "reference"))


def load_cases(base):
    texts = open(base + ".inp", encoding="utf-8").read().split("\n__ggml_vocab_test__\n")[:-1]
    outs = open(base + ".out", encoding="utf-8").read().split("\n")
    return [(t, [int(x) for x in o.split()]) for t, o in zip(texts, outs)]


def check_tokenizer():
    base = os.path.join(REF, "tokenizer", "ggml-vocab-qwen2.gguf")
    meta, _ = gguf.read_gguf(base)
    merges = [tuple(m.split(" ", 1)) for m in meta["tokenizer.ggml.merges"]]
    tok = bpe.Tokenizer(meta["tokenizer.ggml.tokens"], merges)
    cases = load_cases(base)
    failed = 0
    for text, want in cases:
        got = tok.encode_plain(text)
        if got != want or tok.decode(got) != text:
            failed += 1
            print("FAIL %r\n  want %s\n  got  %s" % (text, want, got))
    print("tokenizer: %d cases, %d failed" % (len(cases), failed))
    return failed


def check_forward(model, prompt):
    ref = Reference(os.path.join(REF, "models", model + ".gguf"))
    golden = os.path.join(REF, "golden", model, prompt)
    want = json.load(open(golden + ".json"))
    text = open(os.path.join(REF, "golden", "prompts", prompt + ".txt"), encoding="utf-8").read()
    ids = tokenizer_from_meta(ref.meta).encode(text)
    first = np.fromfile(golden + ".first_logits.f32", dtype="<f4")
    err = np.abs(ref.logits_all(ids)[-1] - first).max()
    ok = ids == want["prompt_tokens"] and err < 1e-3 and ref.greedy(ids, 32) == want["generated"]
    print("forward %s %s: first logits max diff %.1e, %s" % (
        model, prompt, err, "ok" if ok else "FAILED"))
    return not ok


def main():
    if not os.path.isdir(REF):
        print("skipped: %s not found" % REF)
        return 0
    failed = check_tokenizer()
    for model in ("tiny-a", "tiny-b"):
        for prompt in ("p1_plain", "p2_chatml", "p3_unicode_digits"):
            failed += check_forward(model, prompt)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
