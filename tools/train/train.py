"""Trains the project's default model and writes it as a Qwen3 GGUF.

Steps (each in its own function below):
  1. generate the story corpus (corpus.py), a fifth of it as chats;
  2. learn a byte-level BPE vocabulary on it (bpe.py);
  3. train a tiny Qwen3 (model.py) on the token stream;
  4. write the GGUF (gguf.py) and check it: an independent float64 forward
     of the written file (reference.py) must give the torch model's logits
     and greedy tokens.

Run:  /usr/bin/python3 tools/train/train.py -o models/default.gguf
Everything is seeded; the same torch build and thread count give the same file.
"""
import argparse
import ctypes
import math
import os
import sys
import time


def threads_from_argv(default="2"):
    """The --threads value, needed before torch loads (see below)."""
    argv = sys.argv
    return next((argv[i + 1] for i in range(1, len(argv) - 1) if argv[i] == "--threads"),
                default)


def keep_freed_memory():
    """Asks glibc to keep freed memory instead of giving big blocks back to the
    OS: otherwise every step maps fresh pages for each large tensor and pays
    for zeroing them, which made training about 1.5 times slower here."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-4, 0)              # M_MMAP_MAX: never use mmap for malloc
        libc.mallopt(-1, 2**30)          # M_TRIM_THRESHOLD: trim only above 1 GB
    except (OSError, AttributeError):
        pass                             # not glibc: only slower


# OpenBLAS sizes its thread pool when it is loaded, so set it before importing
# torch; idle OpenMP threads sleep instead of spinning (the cores are shared).
os.environ["OPENBLAS_NUM_THREADS"] = threads_from_argv()
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
keep_freed_memory()

import numpy as np                # noqa: E402
import torch                      # noqa: E402
import torch.nn.functional as F   # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe        # noqa: E402
import corpus     # noqa: E402
import gguf       # noqa: E402
from model import Config, Qwen3, gguf_names   # noqa: E402
from reference import Reference, tokenizer_from_meta   # noqa: E402

SEED = 1234
ADDED = [("<|endoftext|>", 3), ("<|im_start|>", 3), ("<|im_end|>", 3),
         ("<think>", 4), ("</think>", 4)]
SYSTEM = "You are a helpful assistant."

# Qwen3-style ChatML template (plain chats; no tools), written for this project.
CHAT_TEMPLATE = (
    "{%- for message in messages %}\n"
    "    {%- if message.role == 'assistant' %}\n"
    "        {%- set content = message.content %}\n"
    "        {%- if '</think>' in content %}\n"
    "            {%- set content = content.split('</think>')[-1].lstrip('\\n') %}\n"
    "        {%- endif %}\n"
    "        {{- '<|im_start|>assistant\\n' + content + '<|im_end|>\\n' }}\n"
    "    {%- else %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "    {%- if enable_thinking is defined and enable_thinking is false %}\n"
    "        {{- '<think>\\n\\n</think>\\n\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}")


def log(*a):
    print(*a, flush=True)


# ------------------------------------------------------------ 1. corpus

def chat_document(rng, request, story):
    """A story as the assistant's answer in the ChatML format the template renders
    (with the empty think block Qwen3 writes when it does not think)."""
    system = "<|im_start|>system\n%s<|im_end|>\n" % SYSTEM if rng.random() < 0.3 else ""
    return (system + "<|im_start|>user\n%s<|im_end|>\n" % request
            + "<|im_start|>assistant\n<think>\n\n</think>\n\n" + story + "<|im_end|>")


def make_documents(n_stories, chat_fraction):
    rng = np.random.default_rng(SEED)
    docs = []
    for topic, request, story in corpus.stories(SEED, n_stories):
        docs.append(chat_document(rng, request, story)
                    if rng.random() < chat_fraction else story)
    return docs


# ------------------------------------------------------------ 2. tokenizer

def make_tokenizer(docs, n_merges):
    """Byte tokens (ids 0..255), learned merges (256 + rank), then added tokens."""
    plain = "\n".join(docs)
    for text, _ in ADDED:
        plain = plain.replace(text, "\n")
    merges = bpe.train_merges(plain, n_merges, log=log)
    tokens = [bpe.BYTE_TO_UNICODE[b] for b in bpe.byte_order()]
    tokens += [a + b for a, b in merges]
    types = [1] * len(tokens) + [t for _, t in ADDED]
    tokens += [text for text, _ in ADDED]
    return bpe.Tokenizer(tokens, merges, [t for t, _ in ADDED]), merges, types


def encode_documents(tok, docs):
    """One token stream, each document followed by <|endoftext|>;
    also returns where each document starts."""
    eot = tok.ids["<|endoftext|>"]
    stream, starts = [], []
    for d in docs:
        starts.append(len(stream))
        stream.extend(tok.encode(d) + [eot])
    return np.array(stream, dtype=np.int64), np.array(starts)


# ------------------------------------------------------------ 3. training

def batches(stream, starts, batch, T, gen):
    """Rows of T+1 tokens that each begin at a document start, so the model
    learns to start a story at position 0 without any BOS token."""
    usable = starts[starts + T + 1 <= len(stream)]
    while True:
        picks = usable[torch.randint(len(usable), (batch,), generator=gen).numpy()]
        rows = np.stack([stream[p:p + T + 1] for p in picks])
        yield torch.from_numpy(rows)


def lr_at(step, args):
    """Linear warm-up, then cosine decay to a tenth of the peak."""
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    t = (step - args.warmup) / max(1, args.steps - args.warmup)
    return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def make_optimizer(model, args):
    """AdamW; no weight decay on the norm weights (1-D)."""
    decay = [p for p in model.parameters() if p.dim() == 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": args.wd},
                              {"params": other, "weight_decay": 0.0}],
                             lr=args.lr, betas=(0.9, 0.95), eps=1e-8)


def loss_of(model, rows):
    logits = model(rows[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), rows[:, 1:].reshape(-1))


@torch.no_grad()
def evaluate(model, stream, starts, args):
    gen = torch.Generator().manual_seed(SEED + 1)
    it = batches(stream, starts, args.batch, args.context, gen)
    model.eval()
    loss = sum(float(loss_of(model, next(it))) for _ in range(4)) / 4
    model.train()
    return loss


def train(model, train_data, val_data, args):
    gen = torch.Generator().manual_seed(SEED)
    it = batches(*train_data, args.batch, args.context, gen)
    opt = make_optimizer(model, args)
    t0, smooth = time.time(), None
    for step in range(args.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args)
        loss = loss_of(model, next(it))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        smooth = float(loss) if smooth is None else 0.95 * smooth + 0.05 * float(loss)
        if (step + 1) % args.log_every == 0 or step + 1 == args.steps:
            log("step %5d/%d  loss %.3f  lr %.2e  %.0fs" % (
                step + 1, args.steps, smooth, lr_at(step, args), time.time() - t0))
    val = evaluate(model, *val_data, args)
    log("final: train loss (smoothed) %.3f, validation loss %.3f, %.0f s"
        % (smooth, val, time.time() - t0))
    return smooth, val


# ------------------------------------------------------------ 4. GGUF

def write_gguf(path, model, cfg, tok, merges, types):
    w = gguf.GGUFWriter()
    a = "qwen3."
    w.add("general.architecture", gguf.STRING, "qwen3")
    w.add("general.name", gguf.STRING, "default (tiny stories, trained by tools/train)")
    w.add("general.file_type", gguf.UINT32, 0)                     # all F32
    for key, value in [("block_count", cfg.n_layer), ("context_length", cfg.context),
                       ("embedding_length", cfg.d_model),
                       ("feed_forward_length", cfg.d_ff),
                       ("attention.head_count", cfg.n_head),
                       ("attention.head_count_kv", cfg.n_kv_head),
                       ("attention.key_length", cfg.head_dim),
                       ("attention.value_length", cfg.head_dim)]:
        w.add(a + key, gguf.UINT32, value)
    w.add(a + "rope.freq_base", gguf.FLOAT32, cfg.rope_theta)
    w.add(a + "attention.layer_norm_rms_epsilon", gguf.FLOAT32, cfg.eps)
    w.add("tokenizer.ggml.model", gguf.STRING, "gpt2")
    w.add("tokenizer.ggml.pre", gguf.STRING, "qwen2")
    w.add_array("tokenizer.ggml.tokens", gguf.STRING, tok.tokens)
    w.add_array("tokenizer.ggml.token_type", gguf.INT32, types)
    w.add_array("tokenizer.ggml.merges", gguf.STRING, [l + " " + r for l, r in merges])
    w.add("tokenizer.ggml.bos_token_id", gguf.UINT32, tok.ids["<|endoftext|>"])
    w.add("tokenizer.ggml.eos_token_id", gguf.UINT32, tok.ids["<|im_end|>"])
    w.add("tokenizer.ggml.padding_token_id", gguf.UINT32, tok.ids["<|endoftext|>"])
    w.add("tokenizer.ggml.add_bos_token", gguf.BOOL, False)
    w.add("tokenizer.chat_template", gguf.STRING, CHAT_TEMPLATE)
    params = dict(model.named_parameters())
    for name, attr in gguf_names(cfg).items():
        w.add_tensor(name, params[attr].detach().numpy())
    w.write(path)


# ------------------------------------------------------------ checks

PROMPTS = ["Once upon a time", "Tom and his dog went to the park.",
           "<|im_start|>user\nTell me a story about a cat.<|im_end|>\n<|im_start|>assistant\n"]


def check_gguf(path, model, tok, n_new):
    """The written file, run by reference.py, must match the torch model:
    logits within float32 noise, and the same greedy tokens."""
    ref = Reference(path)
    assert tokenizer_from_meta(ref.meta).tokens == tok.tokens
    stop = {tok.ids["<|endoftext|>"], tok.ids["<|im_end|>"]}
    model.eval()
    ok = True
    for prompt in PROMPTS:
        ids = tok.encode(prompt)
        with torch.no_grad():
            want = model(torch.tensor([ids]))[0].double().numpy()
        got = ref.logits_all(ids)
        err = np.abs(got - want).max() / np.abs(want).max()
        t_out = model.greedy(ids, n_new, stop)
        r_out = ref.greedy(ids, n_new, stop)
        same = t_out == r_out
        ok = ok and same and err < 1e-4
        log("prompt %r: %d ids, logits max rel diff %.1e, greedy %s" % (
            prompt, len(ids), err, "same" if same else "DIFFERENT"))
        log("  ids: %s" % ids)
        log("  greedy: %s" % t_out)
        log("  text: %r" % tok.decode(t_out))
    return ok


# ------------------------------------------------------------ main

def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-o", "--out", default="models/default.gguf")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--stories", type=int, default=40000)
    p.add_argument("--chat-fraction", type=float, default=0.2)
    p.add_argument("--merges", type=int, default=1024)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--head-dim", type=int, default=32)
    p.add_argument("--ffn", type=int, default=384)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=1200)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--wd", type=float, default=0.1)
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--check-tokens", type=int, default=48)
    return p.parse_args()


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(SEED)
    t0 = time.time()

    docs = make_documents(args.stories, args.chat_fraction)
    log("corpus: %d documents, %d characters" % (len(docs), sum(map(len, docs))))
    tok, merges, types = make_tokenizer(docs, args.merges)
    stream, starts = encode_documents(tok, docs)
    n_val = len(docs) // 50
    split = starts[-n_val]
    train_data = (stream[:split], starts[:-n_val])
    val_data = (stream[split:], starts[-n_val:] - split)
    log("tokenizer: %d tokens; stream %d tokens (%.1f per document)" % (
        len(tok.tokens), len(stream), len(stream) / len(docs)))

    cfg = Config(vocab_size=len(tok.tokens), n_layer=args.layers, d_model=args.dim,
                 n_head=args.heads, n_kv_head=args.kv_heads, head_dim=args.head_dim,
                 d_ff=args.ffn, context=args.context)
    model = Qwen3(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    log("model: %s, %d parameters" % (cfg, n_params))
    log("training: %d steps x %d rows x %d tokens = %.1fM tokens" % (
        args.steps, args.batch, args.context, args.steps * args.batch * args.context / 1e6))
    train(model, train_data, val_data, args)

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    write_gguf(args.out, model, cfg, tok, merges, types)
    log("wrote %s (%d bytes)" % (args.out, os.path.getsize(args.out)))
    ok = check_gguf(args.out, model, tok, args.check_tokens)
    log("total time %.0f s (cpu %.0f s); check %s" % (
        time.time() - t0, time.process_time(), "passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
