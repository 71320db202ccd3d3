#!/usr/bin/python3
"""Why do adapters trail full fine-tuning on the default encoder? (docs/QUALITY.md, "Diagnosis")

An independent PyTorch replica of adapterd's trainer protocol (server/training/trainer.h) on the
default encoder, with two switches the product does not have, to test two explanations of the gap
between Houlsby adapters and full fine-tuning in the paper table:

  --pooling mean      the head reads the masked mean of the last layer instead of h[CLS]
                      (the encoder was pretrained with MLM only: no NSP, no pooler, so h[CLS] was
                      never trained to summarise a text);
  --method full_noemb full fine-tuning with the embedding tables frozen (the encoder's word
                      embeddings are 2.1M of its 5.4M parameters; adapters cannot change them);
  --method adapters_emb  adapters plus the trainable word-embedding table (not a parameter-
                      efficient method: it shows how much of full fine-tuning's lead the
                      embeddings alone give adapters).

Everything else follows the trainer: Houlsby adapters (D, U ~ N(0, 1e-2) truncated at 2 sigma,
GELU, after the attention output and the FFN output, before each residual + LayerNorm), per-task
LayerNorm affines, a head N(0, 0.02) truncated; AdamW (betas 0.9/0.999, eps 1e-6, weight decay
0.01 except LayerNorms and biases), batch 32, 10% linear warmup then linear decay, grad-norm clip
1.0, dropout 0.1, max 128 tokens, seed 42; validation each epoch, the best epoch's test accuracy.
It shares no code with adapterd (BertTokenizer and BertModel are re-implemented here), so it
checks itself against adapterd's own runs: `train --method adapters` and `--method full` at a
configuration of bench/results/paper_table.jsonl should land within about 2 points of that row
(dropout draws and data order differ). `probe` fits a linear head on frozen features, which
adapterd's head-only baseline approximates.

Run with Debian's python3-torch (scripts/install-deps.sh installs it), one thread per process:
    /usr/bin/python3 bench/gap_diagnosis.py probe --dataset wordnet_supersenses
    /usr/bin/python3 bench/gap_diagnosis.py train --dataset wordnet_supersenses \\
        --method adapters --pooling mean --lr 3e-3 --epochs 10
Each command appends one JSON line per result to --results
(default bench/results/gap_diagnosis.jsonl) and prints it.
"""
import argparse
import csv
import json
import os
import struct
import time
import unicodedata

import numpy as np
import torch

F = torch.nn.functional
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_safetensors(path):
    """{name: fp32 tensor}, without the "bert." prefix."""
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    dtypes = {"F16": np.float16, "F32": np.float32}
    out = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        begin, end = spec["data_offsets"]
        a = np.frombuffer(raw[8 + n + begin:8 + n + end], dtype=dtypes[spec["dtype"]]).reshape(spec["shape"])
        out[name[5:] if name.startswith("bert.") else name] = torch.tensor(a.astype(np.float32))
    return out


class Tokenizer:
    """HF BertTokenizer for uncased single texts (what these datasets need): lowercase, strip
    accents, split on whitespace and punctuation, then greedy longest-match WordPiece."""

    def __init__(self, vocab_path):
        self.vocab = {t: i for i, t in enumerate(l.rstrip("\n") for l in open(vocab_path, encoding="utf-8"))}

    @staticmethod
    def _is_punct(c):
        o = ord(c)
        return 33 <= o <= 47 or 58 <= o <= 64 or 91 <= o <= 96 or 123 <= o <= 126 or \
            unicodedata.category(c).startswith("P")

    def _basic(self, text):
        text = unicodedata.normalize("NFD", text.lower())
        text = "".join(c for c in text if unicodedata.category(c) != "Mn")
        words = []
        for w in text.split():
            cur = ""
            for c in w:
                if self._is_punct(c):
                    if cur:
                        words.append(cur)
                    words.append(c)
                    cur = ""
                else:
                    cur += c
            if cur:
                words.append(cur)
        return words

    def _wordpiece(self, word):
        if len(word) > 100:
            return ["[UNK]"]
        pieces, start = [], 0
        while start < len(word):
            end, piece = len(word), None
            while start < end:
                sub = word[start:end] if start == 0 else "##" + word[start:end]
                if sub in self.vocab:
                    piece = sub
                    break
                end -= 1
            if piece is None:
                return ["[UNK]"]
            pieces.append(piece)
            start = end
        return pieces

    def encode(self, text, max_len=128):
        pieces = [p for w in self._basic(text) for p in self._wordpiece(w)][:max_len - 2]
        return [self.vocab[t] for t in ["[CLS]"] + pieces + ["[SEP]"]]


def pad(rows):
    length = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), length, dtype=torch.long)
    mask = torch.zeros(len(rows), length)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = torch.tensor(r)
        mask[i, :len(r)] = 1
    return ids, mask


def masked_mean(h, mask):
    """The mean of h [B, L, d] over the positions where mask [B, L] is 1."""
    return (h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)


def load_dataset(name, tokenizer):
    """{split: (token id lists, label index tensor)}, labels sorted by name."""
    splits = {}
    for split in ("train", "validation", "test"):
        with open(os.path.join(ROOT, "examples", f"{name}_{split}.csv"), encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        splits[split] = ([tokenizer.encode(r["text"]) for r in rows], [r["label"] for r in rows])
    labels = sorted(set(splits["train"][1]))
    index = {l: i for i, l in enumerate(labels)}
    return {s: (ids, torch.tensor([index[l] for l in ls])) for s, (ids, ls) in splits.items()}, labels


class Model:
    """BertModel (post-LN, exact GELU) with optional Houlsby adapters and a linear head."""

    def __init__(self, weights, config, num_labels, method, pooling, bottleneck):
        self.config, self.method, self.pooling = config, method, pooling
        d = config["hidden_size"]
        full = method in ("full", "full_noemb")
        self.encoder = {}
        for name, t in weights.items():
            if name.startswith("cls.") or name.startswith("pooler.") or "LayerNorm" in name:
                continue
            trainable = (full and not (method == "full_noemb" and name.startswith("embeddings."))) or \
                (method == "adapters_emb" and name == "embeddings.word_embeddings.weight")
            self.encoder[name] = torch.nn.Parameter(t.clone(), requires_grad=trainable)
        # Per-task LayerNorm copies: trained by every method but head-only.
        self.task = {name: torch.nn.Parameter(t.clone(), requires_grad=method != "head")
                     for name, t in weights.items() if "LayerNorm" in name and not name.startswith("cls.")}

        def trunc(*shape, std):
            t = torch.empty(*shape)
            torch.nn.init.trunc_normal_(t, 0.0, std, -2 * std, 2 * std)
            return torch.nn.Parameter(t)
        if method.startswith("adapters"):
            for i in range(config["num_hidden_layers"]):
                for site in ("attn", "ffn"):
                    p = f"adapter.{i}.{site}."
                    self.task[p + "down.weight"] = trunc(bottleneck, d, std=1e-2)
                    self.task[p + "down.bias"] = torch.nn.Parameter(torch.zeros(bottleneck))
                    self.task[p + "up.weight"] = trunc(d, bottleneck, std=1e-2)
                    self.task[p + "up.bias"] = torch.nn.Parameter(torch.zeros(d))
        self.task["head.weight"] = trunc(num_labels, d, std=0.02)
        self.task["head.bias"] = torch.nn.Parameter(torch.zeros(num_labels))

    def named_trainable(self):
        return [(n, p) for n, p in list(self.encoder.items()) + list(self.task.items()) if p.requires_grad]

    def _ln(self, x, name):
        d = self.config["hidden_size"]
        return F.layer_norm(x, (d,), self.task[name + ".weight"], self.task[name + ".bias"],
                            self.config["layer_norm_eps"])

    def _linear(self, x, name, params=None):
        params = self.encoder if params is None else params
        return F.linear(x, params[name + ".weight"], params[name + ".bias"])

    def _adapter(self, x, layer, site):
        if not self.method.startswith("adapters"):
            return x
        p = f"adapter.{layer}.{site}."
        return x + self._linear(F.gelu(self._linear(x, p + "down", self.task)), p + "up", self.task)

    def hidden(self, ids, mask, train):
        c = self.config
        batch, length = ids.shape
        d, heads = c["hidden_size"], c["num_attention_heads"]
        dh = d // heads

        def drop(x):
            return F.dropout(x, c["hidden_dropout_prob"], train)
        e = self.encoder
        h = e["embeddings.word_embeddings.weight"][ids] + e["embeddings.position_embeddings.weight"][:length] \
            + e["embeddings.token_type_embeddings.weight"][0]
        h = drop(self._ln(h, "embeddings.LayerNorm"))
        additive = (1.0 - mask)[:, None, None, :] * torch.finfo(torch.float32).min
        for i in range(c["num_hidden_layers"]):
            p = f"encoder.layer.{i}."

            def split(x):
                return x.view(batch, length, heads, dh).transpose(1, 2)
            q, k, v = (split(self._linear(h, p + "attention.self." + n)) for n in ("query", "key", "value"))
            probs = F.softmax(q @ k.transpose(-1, -2) / dh ** 0.5 + additive, -1)
            ctx = (F.dropout(probs, c["attention_probs_dropout_prob"], train) @ v).transpose(1, 2).reshape(
                batch, length, d)
            a = self._adapter(drop(self._linear(ctx, p + "attention.output.dense")), i, "attn")
            h1 = self._ln(a + h, p + "attention.output.LayerNorm")
            f = drop(self._linear(F.gelu(self._linear(h1, p + "intermediate.dense")), p + "output.dense"))
            h = self._ln(self._adapter(f, i, "ffn") + h1, p + "output.LayerNorm")
        return h

    def pool(self, h, mask):
        return h[:, 0] if self.pooling == "cls" else masked_mean(h, mask)

    def logits(self, ids, mask, train):
        return self._linear(self.pool(self.hidden(ids, mask, train), mask), "head", self.task)


def accuracy(model, split, batch=64):
    ids, labels = split
    correct = 0
    with torch.no_grad():
        for s in range(0, len(ids), batch):
            x, m = pad(ids[s:s + batch])
            correct += (model.logits(x, m, False).argmax(1) == labels[s:s + batch]).sum().item()
    return correct / len(ids)


def train(args, weights, config, data, labels):
    torch.manual_seed(args.seed)
    model = Model(weights, config, len(labels), args.method, args.pooling, args.bottleneck)
    named = model.named_trainable()

    def undecayed(n):
        return n.endswith("bias") or "LayerNorm" in n
    opt = torch.optim.AdamW([
        {"params": [p for n, p in named if not undecayed(n)], "weight_decay": 0.01},
        {"params": [p for n, p in named if undecayed(n)], "weight_decay": 0.0}],
        lr=args.lr, betas=(0.9, 0.999), eps=1e-6)
    ids, labels_t = data["train"]
    steps_per_epoch = (len(ids) + 31) // 32
    total = steps_per_epoch * args.epochs
    warmup = int(0.1 * total)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: s / max(1, warmup) if s < warmup else max(0.0, (total - s) / max(1, total - warmup)))
    order = torch.Generator().manual_seed(args.seed)
    best = None
    for epoch in range(1, args.epochs + 1):
        perm = torch.randperm(len(ids), generator=order).tolist()
        for s in range(0, len(perm), 32):
            rows = perm[s:s + 32]
            x, m = pad([ids[j] for j in rows])
            loss = F.cross_entropy(model.logits(x, m, True), labels_t[rows])
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_([p for _, p in named], 1.0)
            opt.step()
            sched.step()
        val = accuracy(model, data["validation"])
        if best is None or val > best["validation_accuracy"]:
            best = {"best_epoch": epoch, "validation_accuracy": val, "test_accuracy": accuracy(model, data["test"])}
    trained = sum(p.numel() for _, p in named)
    return [dict(best, method=args.method, pooling=args.pooling, lr=args.lr, epochs=args.epochs,
                 trainable_parameters=trained)]


def probe(args, weights, config, data, labels):
    """A linear head on frozen features (h[CLS] and the masked mean), no dropout; lr chosen on
    validation from {3e-3, 1e-2, 3e-2}, 200 epochs each."""
    model = Model(weights, config, len(labels), "head", "cls", args.bottleneck)
    features = {}
    with torch.no_grad():
        for split, (ids, _) in data.items():
            cls, mean = [], []
            for s in range(0, len(ids), 64):
                x, m = pad(ids[s:s + 64])
                h = model.hidden(x, m, False)
                cls.append(h[:, 0])
                mean.append(masked_mean(h, m))
            features[split] = {"cls": torch.cat(cls), "mean": torch.cat(mean)}
    results = []
    for pooling in ("cls", "mean"):
        best = None
        for lr in (3e-3, 1e-2, 3e-2):
            torch.manual_seed(args.seed)
            head = torch.nn.Linear(config["hidden_size"], len(labels))
            opt = torch.optim.AdamW(head.parameters(), lr=lr)
            x, y = features["train"][pooling], data["train"][1]
            for _ in range(200):
                perm = torch.randperm(len(y))
                for s in range(0, len(y), 32):
                    rows = perm[s:s + 32]
                    loss = F.cross_entropy(head(x[rows]), y[rows])
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            with torch.no_grad():
                acc = {s: (head(features[s][pooling]).argmax(1) == data[s][1]).float().mean().item()
                       for s in ("validation", "test")}
            if best is None or acc["validation"] > best["validation_accuracy"]:
                best = {"validation_accuracy": acc["validation"], "test_accuracy": acc["test"], "lr": lr}
        results.append(dict(best, method="probe", pooling=pooling))
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=("train", "probe"))
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--model_dir", default=os.path.join(ROOT, "models", "adapterd-mini-en"))
    ap.add_argument("--method", choices=("adapters", "adapters_emb", "full", "full_noemb", "head_ln", "head"), default="adapters")
    ap.add_argument("--pooling", choices=("cls", "mean"), default="cls")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--bottleneck", type=int, default=64)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--results", default=os.path.join(ROOT, "bench", "results", "gap_diagnosis.jsonl"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    with open(os.path.join(args.model_dir, "config.json")) as f:
        config = json.load(f)
    weights = load_safetensors(os.path.join(args.model_dir, "model.safetensors"))
    data, labels = load_dataset(args.dataset, Tokenizer(os.path.join(args.model_dir, "vocab.txt")))
    start = time.monotonic()
    rows = (train if args.command == "train" else probe)(args, weights, config, data, labels)
    for row in rows:
        row.update(dataset=args.dataset, seed=args.seed, seconds=round(time.monotonic() - start, 1))
        if row["method"].startswith("adapters"):
            row["bottleneck"] = args.bottleneck
        line = json.dumps(row, sort_keys=True)
        print(line, flush=True)
        with open(args.results, "a") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
