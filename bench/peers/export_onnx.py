#!/usr/bin/python3
"""Exports adapterd's encoder + one task's adapters to ONNX, and checks it.

    /usr/bin/python3 bench/peers/export_onnx.py --model_dir D --adapter F --out model.onnx \
        --peer build/bench/peers/adapterd-peer [--check_json check.json]

Builds a torch.nn.Module with HF BertModel math (exact-erf GELU) plus adapterd's
per-task parts (docs/ARCHITECTURE.md, "The forward pass"; docs/ADAPTER_FORMAT.md): an adapter after each
sub-layer's output projection, before the residual add and LayerNorm; the task's
LayerNorm affines; the head on the pooler output (h[CLS] without a pooler).

Checks the module's logits against `adapterd-peer logits` (adapterd's fp32
forward) on a few random id batches: exits 1 when the max abs difference exceeds
1e-4. Writes --check_json (inputs and the module's logits) for ort_bench.js to
check ONNX Runtime against. Needs only Debian's python3-torch (1.13) and numpy:
safetensors is parsed by hand.
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

TOL = 1e-4


def read_safetensors(path):
    """name -> fp32 torch tensor; and the metadata dict."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for name, info in header.items():
        start, end = info["data_offsets"]
        raw = data[base + start:base + end]
        dt, shape = info["dtype"], info["shape"]
        if dt == "F32":
            arr = np.frombuffer(raw, dtype="<f4")
        elif dt == "F16":
            arr = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        elif dt == "BF16":
            arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif dt == "F64":
            arr = np.frombuffer(raw, dtype="<f8").astype(np.float32)
        elif dt in ("I64", "I32"):
            continue  # buffers (position_ids, token_type_ids)
        else:
            raise SystemExit(f"{path}: tensor {name} has unsupported dtype {dt}")
        out[name] = torch.from_numpy(np.array(arr, dtype=np.float32).reshape(shape))
    return out, meta


def canonical(name):
    if name.startswith("bert."):
        name = name[5:]
    name = name.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
    return name


class PeerModel(torch.nn.Module):
    def __init__(self, config, enc, ad, activation):
        super().__init__()
        if activation != "gelu":
            raise SystemExit(f"adapter activation {activation!r}: only gelu is exported")
        self.d = config["hidden_size"]
        self.heads = config["num_attention_heads"]
        self.dh = self.d // self.heads
        self.layers = config["num_hidden_layers"]
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.p = torch.nn.ParameterDict()

        def put(key, t):
            self.p[key.replace(".", "_")] = torch.nn.Parameter(t.clone(), requires_grad=False)

        for k in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
            put(k, enc[f"embeddings.{k}.weight"])
        put("emb_ln_w", ad["embeddings.layer_norm.weight"])
        put("emb_ln_b", ad["embeddings.layer_norm.bias"])
        for i in range(self.layers):
            e = f"encoder.layer.{i}."
            for src, dst in (("attention.self.query", "q"), ("attention.self.key", "k"),
                             ("attention.self.value", "v"), ("attention.output.dense", "o"),
                             ("intermediate.dense", "w1"), ("output.dense", "w2")):
                put(f"l{i}_{dst}_w", enc[e + src + ".weight"])
                put(f"l{i}_{dst}_b", enc[e + src + ".bias"])
            a = f"layers.{i}."
            for site in ("attention_adapter", "ffn_adapter"):
                for proj in ("down", "up"):
                    put(f"l{i}_{site}_{proj}_w", ad[a + f"{site}.{proj}.weight"])
                    put(f"l{i}_{site}_{proj}_b", ad[a + f"{site}.{proj}.bias"])
            for ln in ("attention_layer_norm", "output_layer_norm"):
                put(f"l{i}_{ln}_w", ad[a + ln + ".weight"])
                put(f"l{i}_{ln}_b", ad[a + ln + ".bias"])
        self.has_pooler = "pooler.dense.weight" in enc
        if self.has_pooler:
            put("pooler_w", enc["pooler.dense.weight"])
            put("pooler_b", enc["pooler.dense.bias"])
        put("head_w", ad["head.weight"])
        put("head_b", ad["head.bias"])

    def w(self, key):
        return self.p[key]

    def adapter(self, i, site, x):
        h = F.gelu(F.linear(x, self.w(f"l{i}_{site}_down_w"), self.w(f"l{i}_{site}_down_b")))
        return x + F.linear(h, self.w(f"l{i}_{site}_up_w"), self.w(f"l{i}_{site}_up_b"))

    def ln(self, x, key):
        return F.layer_norm(x, (self.d,), self.w(key + "_w"), self.w(key + "_b"), self.eps)

    def forward(self, input_ids, attention_mask, token_type_ids):
        b, n = input_ids.shape[0], input_ids.shape[1]
        h = (F.embedding(input_ids, self.w("word_embeddings"))
             + self.w("position_embeddings")[:n].unsqueeze(0)
             + F.embedding(token_type_ids, self.w("token_type_embeddings")))
        h = self.ln(h, "emb_ln")
        # HF's additive mask: 0 for tokens, finfo(float32).min for padding.
        mask = ((1.0 - attention_mask.to(torch.float32)) * torch.finfo(torch.float32).min)[:, None, None, :]
        scale = 1.0 / math.sqrt(self.dh)

        def split(t):
            return t.view(b, n, self.heads, self.dh).transpose(1, 2)

        for i in range(self.layers):
            q = split(F.linear(h, self.w(f"l{i}_q_w"), self.w(f"l{i}_q_b")))
            k = split(F.linear(h, self.w(f"l{i}_k_w"), self.w(f"l{i}_k_b")))
            v = split(F.linear(h, self.w(f"l{i}_v_w"), self.w(f"l{i}_v_b")))
            scores = torch.matmul(q, k.transpose(-1, -2)) * scale + mask
            ctx = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).reshape(b, n, self.d)
            a = F.linear(ctx, self.w(f"l{i}_o_w"), self.w(f"l{i}_o_b"))
            a = self.adapter(i, "attention_adapter", a)
            h1 = self.ln(a + h, f"l{i}_attention_layer_norm")
            f = F.linear(F.gelu(F.linear(h1, self.w(f"l{i}_w1_w"), self.w(f"l{i}_w1_b"))),
                         self.w(f"l{i}_w2_w"), self.w(f"l{i}_w2_b"))
            f = self.adapter(i, "ffn_adapter", f)
            h = self.ln(f + h1, f"l{i}_output_layer_norm")
        cls = h[:, 0]
        pooled = torch.tanh(F.linear(cls, self.w("pooler_w"), self.w("pooler_b"))) if self.has_pooler else cls
        return F.linear(pooled, self.w("head_w"), self.w("head_b"))


def pad(rows):
    n = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), n, dtype=torch.int64)
    mask = torch.zeros(len(rows), n, dtype=torch.int64)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = torch.tensor(r, dtype=torch.int64)
        mask[i, :len(r)] = 1
    return ids, mask, torch.zeros_like(ids)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model_dir", required=True)
    ap.add_argument("--adapter", required=True)
    ap.add_argument("--out", required=True, help="ONNX file to write")
    ap.add_argument("--peer", required=True, help="path to adapterd-peer")
    ap.add_argument("--check_json", help="write inputs + the module's logits here (for ort_bench.js)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    with open(os.path.join(args.model_dir, "config.json")) as f:
        config = json.load(f)
    raw, _ = read_safetensors(os.path.join(args.model_dir, "model.safetensors"))
    enc = {canonical(k): v for k, v in raw.items() if not canonical(k).startswith("cls.")}
    ad, meta = read_safetensors(args.adapter)
    model = PeerModel(config, enc, ad, meta.get("activation", "gelu")).eval()

    # Random id batches: ragged rows (padding + mask), and full-length rows.
    gen = np.random.default_rng(args.seed)
    vocab = config["vocab_size"]
    batches = [
        [list(map(int, gen.integers(1, vocab, size=int(n)))) for n in (20, 7, 13, 1)],
        [list(map(int, gen.integers(1, vocab, size=128))) for _ in range(2)],
        [list(map(int, gen.integers(1, vocab, size=20)))],
    ]
    worst = 0.0
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        for bi, rows in enumerate(batches):
            ids_file = os.path.join(tmp, f"ids{bi}.json")
            with open(ids_file, "w") as f:
                json.dump(rows, f)
            res = subprocess.run([args.peer, "logits", "--model_dir", args.model_dir, "--adapter", args.adapter,
                                  "--ids", ids_file, "--threads", str(args.threads)],
                                 check=True, capture_output=True, text=True)
            ref = torch.tensor(json.loads(res.stdout.strip().splitlines()[-1]), dtype=torch.float64)
            ids, mask, types = pad(rows)
            with torch.no_grad():
                got = model(ids, mask, types).to(torch.float64)
            diff = (got - ref).abs().max().item()
            worst = max(worst, diff)
            print(f"batch {bi} {tuple(ids.shape)}: max |torch - adapterd| = {diff:.3g} "
                  f"(logit scale {ref.abs().max().item():.3g})")
            records.append({"input_ids": ids.tolist(), "attention_mask": mask.tolist(),
                            "token_type_ids": types.tolist(), "logits": got.tolist()})
    print(f"CHECK torch module vs adapterd fp32: max abs diff {worst:.3g} (tolerance {TOL})")
    if not worst <= TOL:
        print("FAILED: the exported module does not compute adapterd's forward", file=sys.stderr)
        sys.exit(1)

    ids, mask, types = pad(batches[0])
    with torch.no_grad():
        torch.onnx.export(model, (ids, mask, types), args.out, opset_version=14,
                          input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["logits"],
                          dynamic_axes={"input_ids": {0: "batch", 1: "sequence"},
                                        "attention_mask": {0: "batch", 1: "sequence"},
                                        "token_type_ids": {0: "batch", 1: "sequence"},
                                        "logits": {0: "batch"}},
                          do_constant_folding=True)
    print(f"wrote {args.out} ({os.path.getsize(args.out) / 1e6:.1f} MB)")
    if args.check_json:
        with open(args.check_json, "w") as f:
            json.dump({"tolerance": TOL, "cases": records}, f)
        print(f"wrote {args.check_json}")


if __name__ == "__main__":
    main()
