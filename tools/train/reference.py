"""An independent float64 forward pass straight from a GGUF file, token by
token with a KV cache, following book/appendix-gguf.md A.5 line by line.  It shares
no code with model.py, so agreement between the two checks the GGUF writer,
the tensor names and shapes, and the math.

Run on a file:  /usr/bin/python3 tools/train/reference.py FILE.gguf "prompt" [n]
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe   # noqa: E402
import gguf  # noqa: E402


class Reference:
    def __init__(self, path):
        self.meta, t = gguf.read_gguf(path)
        self.w = {k: v.astype(np.float64) for k, v in t.items()}
        m, a = self.meta, self.meta["general.architecture"]
        self.n_layer = m[a + ".block_count"]
        self.n_head = m[a + ".attention.head_count"]
        self.n_kv = m[a + ".attention.head_count_kv"]
        self.hd = m[a + ".attention.key_length"]
        self.theta = m[a + ".rope.freq_base"]
        self.eps = m[a + ".attention.layer_norm_rms_epsilon"]
        self.out = self.w.get("output.weight", self.w["token_embd.weight"])
        self.reset()

    def reset(self):
        self.k_cache = [[] for _ in range(self.n_layer)]
        self.v_cache = [[] for _ in range(self.n_layer)]

    def rmsnorm(self, x, w):
        return w * x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps)

    def rope(self, x, p):
        """x: [heads, hd]; NEOX pairs (i, i + hd/2)."""
        half = self.hd // 2
        theta = p * self.theta ** (-2.0 * np.arange(half) / self.hd)
        c, s = np.cos(theta), np.sin(theta)
        x0, x1 = x[:, :half], x[:, half:]
        return np.concatenate([x0 * c - x1 * s, x0 * s + x1 * c], axis=1)

    def step(self, token):
        """Feeds one token at the next position; returns its logits."""
        p = len(self.k_cache[0])
        x = self.w["token_embd.weight"][token]
        for l in range(self.n_layer):
            W = lambda n: self.w["blk.%d.%s.weight" % (l, n)]   # noqa: E731
            h = self.rmsnorm(x, W("attn_norm"))
            q = (W("attn_q") @ h).reshape(self.n_head, self.hd)
            k = (W("attn_k") @ h).reshape(self.n_kv, self.hd)
            v = (W("attn_v") @ h).reshape(self.n_kv, self.hd)
            q = self.rope(self.rmsnorm(q, W("attn_q_norm")), p)
            k = self.rope(self.rmsnorm(k, W("attn_k_norm")), p)
            self.k_cache[l].append(k)
            self.v_cache[l].append(v)
            K = np.stack(self.k_cache[l])     # [p+1, n_kv, hd]
            V = np.stack(self.v_cache[l])
            o = np.empty((self.n_head, self.hd))
            for i in range(self.n_head):
                g = i // (self.n_head // self.n_kv)
                s = K[:, g, :] @ q[i] / np.sqrt(self.hd)
                a = np.exp(s - s.max())
                o[i] = (a / a.sum()) @ V[:, g, :]
            x = x + W("attn_output") @ o.reshape(-1)
            h = self.rmsnorm(x, W("ffn_norm"))
            g_ = W("ffn_gate") @ h
            x = x + W("ffn_down") @ (g_ / (1 + np.exp(-g_)) * (W("ffn_up") @ h))
        return self.out @ self.rmsnorm(x, self.w["output_norm.weight"])

    def logits_all(self, ids):
        """Logits after every token of ids, from an empty cache: [len, vocab]."""
        self.reset()
        return np.stack([self.step(t) for t in ids])

    def greedy(self, ids, n_new, stop=()):
        logits = self.logits_all(ids)[-1]
        out = []
        for _ in range(n_new):
            t = int(np.argmax(logits))
            out.append(t)
            if t in stop:
                break
            logits = self.step(t)
        return out


def tokenizer_from_meta(meta):
    tokens = meta["tokenizer.ggml.tokens"]
    merges = [tuple(m.split(" ", 1)) for m in meta["tokenizer.ggml.merges"]]
    types = meta["tokenizer.ggml.token_type"]
    added = [t for t, ty in zip(tokens, types) if ty in (3, 4)]
    return bpe.Tokenizer(tokens, merges, added)


def main():
    path, prompt = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 32
    ref = Reference(path)
    tok = tokenizer_from_meta(ref.meta)
    ids = tok.encode(prompt)
    out = ref.greedy(ids, n, stop={ref.meta["tokenizer.ggml.eos_token_id"]})
    print("prompt ids:", ids)
    print("generated :", out)
    print(repr(prompt + tok.decode(out)))


if __name__ == "__main__":
    main()
