"""The Qwen3 architecture in PyTorch, written out so that every step is the
math of book/appendix-gguf.md A.5 (and so the C engine's forward reproduces it):

  x = embed[token]
  per layer:  h = rmsnorm(x) ; q,k,v = Wq h, Wk h, Wv h
              q,k = per-head rmsnorm, then NEOX RoPE ; causal GQA attention
              x = x + Wo o
              h = rmsnorm(x) ; x = x + Wdown(silu(Wgate h) * Wup h)
  logits = embed @ rmsnorm(x)   (tied embeddings, no biases)
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    vocab_size: int = 1285
    n_layer: int = 6
    d_model: int = 128
    n_head: int = 8
    n_kv_head: int = 4
    head_dim: int = 32
    d_ff: int = 384
    context: int = 256
    rope_theta: float = 1e6
    eps: float = 1e-6


def rmsnorm(x, weight, eps):
    """y = w * x / sqrt(mean(x^2) + eps) over the last dimension."""
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return rmsnorm(x, self.weight, self.eps)


def rope_tables(cfg, n_pos):
    """cos/sin of p * theta^(-2i/head_dim) for i < head_dim/2, shape [n_pos, half]."""
    half = cfg.head_dim // 2
    inv_freq = cfg.rope_theta ** (-torch.arange(half, dtype=torch.float64) * 2 / cfg.head_dim)
    angles = torch.arange(n_pos, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return torch.cos(angles).float(), torch.sin(angles).float()


def rope_neox(x, cos, sin):
    """NEOX RoPE: rotates the pairs (i, i + half) of each head.
    x: [batch, heads, T, head_dim]; cos/sin: [T, half]."""
    half = x.shape[-1] // 2
    x0, x1 = x[..., :half], x[..., half:]
    return torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        hd = cfg.head_dim
        self.wq = nn.Linear(cfg.d_model, cfg.n_head * hd, bias=False)
        self.wk = nn.Linear(cfg.d_model, cfg.n_kv_head * hd, bias=False)
        self.wv = nn.Linear(cfg.d_model, cfg.n_kv_head * hd, bias=False)
        self.wo = nn.Linear(cfg.n_head * hd, cfg.d_model, bias=False)
        self.q_norm = RMSNorm(hd, cfg.eps)   # one [head_dim] weight shared by all heads
        self.k_norm = RMSNorm(hd, cfg.eps)

    def forward(self, h, cos, sin):
        B, T, _ = h.shape
        c = self.cfg
        q = self.wq(h).view(B, T, c.n_head, c.head_dim)
        k = self.wk(h).view(B, T, c.n_kv_head, c.head_dim)
        v = self.wv(h).view(B, T, c.n_kv_head, c.head_dim)
        q = rope_neox(self.q_norm(q).transpose(1, 2), cos, sin)   # [B, H, T, hd]
        k = rope_neox(self.k_norm(k).transpose(1, 2), cos, sin)   # [B, Hkv, T, hd]
        v = v.transpose(1, 2)
        # GQA: q head i reads kv head i // group.  Heads g*group .. g*group+group-1
        # are adjacent, so viewing q as [B, Hkv, group*T, hd] lines every q row
        # up with its kv head without copying k and v.
        group = c.n_head // c.n_kv_head
        q = q.reshape(B, c.n_kv_head, group * T, c.head_dim)
        # Scaling q instead of the scores is the same math on a smaller tensor.
        scores = (q * (1.0 / math.sqrt(c.head_dim))) @ k.transpose(-1, -2)
        causal = torch.ones(T, T, dtype=torch.bool).triu(1).repeat(group, 1)
        scores = scores.masked_fill(causal, float("-inf"))
        o = torch.softmax(scores, dim=-1) @ v               # [B, Hkv, group*T, hd]
        o = o.reshape(B, c.n_head, T, c.head_dim).transpose(1, 2)
        return self.wo(o.reshape(B, T, c.n_head * c.head_dim))


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.gate = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.up = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.down = nn.Linear(cfg.d_ff, cfg.d_model, bias=False)

    def forward(self, h):
        return self.down(F.silu(self.gate(h)) * self.up(h))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.attn_norm = RMSNorm(cfg.d_model, cfg.eps)
        self.attn = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.d_model, cfg.eps)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.ffn_norm(x))


class Qwen3(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.out_norm = RMSNorm(cfg.d_model, cfg.eps)
        cos, sin = rope_tables(cfg, cfg.context)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self._init_weights()

    def _init_weights(self):
        """GPT-2 style: N(0, 0.02); the two projections that write into the
        residual stream are scaled down by sqrt(2 * n_layer)."""
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02
                if name.endswith("wo.weight") or name.endswith("down.weight"):
                    std /= math.sqrt(2 * self.cfg.n_layer)
                nn.init.normal_(p, 0.0, std)

    def forward(self, ids):
        T = ids.shape[1]
        x = self.embed(ids)
        for blk in self.blocks:
            x = blk(x, self.cos[:T], self.sin[:T])
        return self.out_norm(x) @ self.embed.weight.t()   # tied output matrix

    @torch.no_grad()
    def greedy(self, ids, n_new, stop=()):
        """Greedy continuation by full recompute (what the engine's II.1 does)."""
        ids = list(ids)
        out = []
        for _ in range(n_new):
            if len(ids) >= self.cfg.context:
                break
            logits = self(torch.tensor([ids]))[0, -1]
            t = int(torch.argmax(logits))
            out.append(t)
            ids.append(t)
            if t in stop:
                break
        return out


def from_gguf(meta, tensors):
    """Builds the module from a GGUF's metadata and F32 tensors (gguf.read_gguf)."""
    a = meta["general.architecture"] + "."
    cfg = Config(vocab_size=len(meta["tokenizer.ggml.tokens"]),
                 n_layer=meta[a + "block_count"], d_model=meta[a + "embedding_length"],
                 n_head=meta[a + "attention.head_count"],
                 n_kv_head=meta[a + "attention.head_count_kv"],
                 head_dim=meta[a + "attention.key_length"],
                 d_ff=meta[a + "feed_forward_length"], context=meta[a + "context_length"],
                 rope_theta=meta[a + "rope.freq_base"],
                 eps=meta[a + "attention.layer_norm_rms_epsilon"])
    model = Qwen3(cfg)
    params = dict(model.named_parameters())
    for name, attr in gguf_names(cfg).items():
        params[attr].data.copy_(torch.from_numpy(tensors[name]))
    return model.eval()


# GGUF tensor name -> attribute path in this module (book/appendix-gguf.md A.2.2).
def gguf_names(cfg):
    names = {"token_embd.weight": "embed.weight",
             "output_norm.weight": "out_norm.weight"}
    per_layer = {"attn_norm": "attn_norm", "attn_q": "attn.wq", "attn_k": "attn.wk",
                 "attn_v": "attn.wv", "attn_output": "attn.wo",
                 "attn_q_norm": "attn.q_norm", "attn_k_norm": "attn.k_norm",
                 "ffn_norm": "ffn_norm", "ffn_gate": "mlp.gate", "ffn_up": "mlp.up",
                 "ffn_down": "mlp.down"}
    for i in range(cfg.n_layer):
        for g, t in per_layer.items():
            names["blk.%d.%s.weight" % (i, g)] = "blocks.%d.%s.weight" % (i, t)
    return names
