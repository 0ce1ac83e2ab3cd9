"""Runs the engine's model-generate on a GGUF made by train.py and compares it
with the torch model loaded from the same file: the prompt's token ids, every
step's logits, and the greedy tokens.

Run:  /usr/bin/python3 tools/train/check_engine.py [--engine build/II.1/model-generate]
          [--model models/default.gguf] [-n 64]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf                                 # noqa: E402
from model import from_gguf                 # noqa: E402
from reference import tokenizer_from_meta   # noqa: E402

PROMPTS = ["Once upon a time",
           "Tom and his dog went to the park.",
           "Lily had a red ball.",
           "<|im_start|>user\nTell me a story about a cat.<|im_end|>\n<|im_start|>assistant\n"]


def run_engine(engine, model_path, prompt, n):
    """The engine's JSON result and its per-step logits [steps, vocab]."""
    with tempfile.TemporaryDirectory() as d:
        pf, lf = os.path.join(d, "prompt.txt"), os.path.join(d, "logits.f32")
        with open(pf, "wb") as f:
            f.write(prompt.encode("utf-8"))
        out = subprocess.run([engine, "--json", "--ignore-eos", "--logits", lf,
                              "--prompt-file", pf, model_path, str(n)],
                             check=True, capture_output=True, text=True).stdout
        result = json.loads(out.strip().splitlines()[-1])
        return result, np.fromfile(lf, dtype="<f4")


def torch_greedy(model, ids, n):
    """Greedy tokens and the logits that chose each of them."""
    ids, out, rows = list(ids), [], []
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([ids]))[0, -1]
            rows.append(logits.numpy())
            out.append(int(torch.argmax(logits)))
            ids.append(out[-1])
    return out, np.stack(rows)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--engine", default="build/II.1/model-generate")
    p.add_argument("--model", default="models/default.gguf")
    p.add_argument("-n", type=int, default=64)
    args = p.parse_args()
    torch.set_num_threads(1)
    meta, tensors = gguf.read_gguf(args.model)
    tok = tokenizer_from_meta(meta)
    model = from_gguf(meta, tensors)
    failed = 0
    for prompt in PROMPTS:
        ids = tok.encode(prompt)
        result, logits = run_engine(args.engine, args.model, prompt, args.n)
        want, want_logits = torch_greedy(model, ids, args.n)
        logits = logits.reshape(-1, want_logits.shape[1])[:len(want)]
        err = np.abs(logits - want_logits).max()
        top2 = np.sort(want_logits, axis=1)[:, -2:]
        same = result["prompt_tokens"] == ids and result["generated"] == want
        failed += not same
        print("%-45r ids %s, tokens %s, logits max abs diff %.1e, min greedy margin %.3f"
              % (prompt[:45], "same" if result["prompt_tokens"] == ids else "DIFFERENT",
                 "same" if result["generated"] == want else "DIFFERENT", err,
                 (top2[:, 1] - top2[:, 0]).min()))
        print("   engine: %r" % result["text"])
        if result["generated"] != want:
            print("   torch : %r" % tok.decode(want))
    print("engine check: %d prompts, %d differ" % (len(PROMPTS), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
