#!/usr/bin/python3
"""Generates the golden-output fixture for tests/model/golden_test.cc.

An independent reference: a tiny random BERT written as a HuggingFace
checkpoint, and its BertModel outputs computed here in PyTorch, module by
module as transformers' modeling_bert.py defines them (BertEmbeddings,
BertSelfAttention, BertSelfOutput, BertIntermediate, BertOutput, BertPooler,
and get_extended_attention_mask). It shares no code with adapterd.

Run with Debian's python3-torch (no transformers is needed):
    /usr/bin/python3 tests/model/testdata/golden/make_golden.py

Writes, next to this script:
    model/config.json, model/model.safetensors (HF names, "bert." prefix,
    TF-style LayerNorm gamma/beta so both loader spellings are exercised
    across tests), model/vocab.txt
    inputs.json            input_ids / token_type_ids / attention_mask
    expected.safetensors   last_hidden_state [B, L, d], pooler_output [B, d]
"""
import json
import math
import os
import struct

import torch

HERE = os.path.dirname(os.path.abspath(__file__))

CONFIG = {
    "architectures": ["BertModel"],
    "model_type": "bert",
    "vocab_size": 40,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 24,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
    "layer_norm_eps": 1e-12,
    "pad_token_id": 0,
    "position_embedding_type": "absolute",
}


SAFETENSORS_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}


def write_safetensors(path, tensors, metadata=None, dtype=torch.float32):
    """Minimal safetensors writer (the format's spec: u64 LE header size,
    JSON header, raw little-endian bytes), every tensor cast to `dtype`."""
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    blobs = []
    offset = 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().to(dtype)
        raw = t.view(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": SAFETENSORS_DTYPES[dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def make_weights(gen):
    c = CONFIG
    d, ff = c["hidden_size"], c["intermediate_size"]

    def normal(*shape, std=0.2):
        return torch.randn(*shape, generator=gen) * std

    def gain(n):
        return 1.0 + torch.randn(n, generator=gen) * 0.1

    w = {
        "embeddings.word_embeddings.weight": normal(c["vocab_size"], d, std=0.5),
        "embeddings.position_embeddings.weight": normal(c["max_position_embeddings"], d, std=0.5),
        "embeddings.token_type_embeddings.weight": normal(c["type_vocab_size"], d, std=0.5),
        "embeddings.LayerNorm.weight": gain(d),
        "embeddings.LayerNorm.bias": normal(d, std=0.1),
    }
    for i in range(c["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        for proj in ("query", "key", "value"):
            w[p + f"attention.self.{proj}.weight"] = normal(d, d)
            w[p + f"attention.self.{proj}.bias"] = normal(d, std=0.1)
        w[p + "attention.output.dense.weight"] = normal(d, d)
        w[p + "attention.output.dense.bias"] = normal(d, std=0.1)
        w[p + "attention.output.LayerNorm.weight"] = gain(d)
        w[p + "attention.output.LayerNorm.bias"] = normal(d, std=0.1)
        w[p + "intermediate.dense.weight"] = normal(ff, d)
        w[p + "intermediate.dense.bias"] = normal(ff, std=0.1)
        w[p + "output.dense.weight"] = normal(d, ff)
        w[p + "output.dense.bias"] = normal(d, std=0.1)
        w[p + "output.LayerNorm.weight"] = gain(d)
        w[p + "output.LayerNorm.bias"] = normal(d, std=0.1)
    w["pooler.dense.weight"] = normal(d, d)
    w["pooler.dense.bias"] = normal(d, std=0.1)
    return w


def linear(x, w, prefix):
    return torch.nn.functional.linear(x, w[prefix + ".weight"], w[prefix + ".bias"])


def layer_norm(x, w, prefix):
    return torch.nn.functional.layer_norm(
        x, (x.shape[-1],), w[prefix + ".weight"], w[prefix + ".bias"], eps=CONFIG["layer_norm_eps"])


def bert_model(w, input_ids, token_type_ids, attention_mask):
    """transformers.BertModel.forward in eval mode, absolute positions."""
    c = CONFIG
    heads = c["num_attention_heads"]
    head_size = c["hidden_size"] // heads
    bsz, seq = input_ids.shape
    # BertEmbeddings
    position_ids = torch.arange(seq).unsqueeze(0)
    emb = (torch.nn.functional.embedding(input_ids, w["embeddings.word_embeddings.weight"])
           + torch.nn.functional.embedding(token_type_ids, w["embeddings.token_type_embeddings.weight"])
           + torch.nn.functional.embedding(position_ids, w["embeddings.position_embeddings.weight"]))
    hidden = layer_norm(emb, w, "embeddings.LayerNorm")
    # ModuleUtilsMixin.get_extended_attention_mask
    ext = attention_mask[:, None, None, :].to(torch.float32)
    ext = (1.0 - ext) * torch.finfo(torch.float32).min

    def split_heads(x):  # BertSelfAttention.transpose_for_scores
        return x.view(bsz, seq, heads, head_size).permute(0, 2, 1, 3)

    for i in range(c["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        # BertSelfAttention
        q = split_heads(linear(hidden, w, p + "attention.self.query"))
        k = split_heads(linear(hidden, w, p + "attention.self.key"))
        v = split_heads(linear(hidden, w, p + "attention.self.value"))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(head_size)
        scores = scores + ext
        probs = torch.nn.functional.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous().view(bsz, seq, c["hidden_size"])
        # BertSelfOutput
        attn = layer_norm(linear(ctx, w, p + "attention.output.dense") + hidden, w,
                          p + "attention.output.LayerNorm")
        # BertIntermediate (ACT2FN["gelu"] is the exact erf GELU)
        inter = torch.nn.functional.gelu(linear(attn, w, p + "intermediate.dense"))
        # BertOutput
        hidden = layer_norm(linear(inter, w, p + "output.dense") + attn, w, p + "output.LayerNorm")
    # BertPooler
    pooled = torch.tanh(linear(hidden[:, 0], w, "pooler.dense"))
    return hidden, pooled


def main():
    gen = torch.Generator().manual_seed(20261122)
    w = make_weights(gen)
    model_dir = os.path.join(HERE, "model")
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=2)
        f.write("\n")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"tok{i}" for i in range(CONFIG["vocab_size"] - 5)]
    with open(os.path.join(model_dir, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab) + "\n")
    # HF BertForPreTraining spelling: "bert." prefix, TF-era gamma/beta, plus a
    # cls.* head that BertModel ignores.
    stored = {}
    for name, t in w.items():
        name = name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        stored["bert." + name] = t
    stored["cls.predictions.bias"] = torch.zeros(CONFIG["vocab_size"])
    write_safetensors(os.path.join(model_dir, "model.safetensors"), stored, {"format": "pt"})

    # Three rows: full length, padded, and a pair with token types.
    input_ids = torch.tensor([
        [2, 7, 11, 19, 23, 5, 31, 17, 3, 9, 12, 3],
        [2, 13, 29, 3, 0, 0, 0, 0, 0, 0, 0, 0],
        [2, 6, 8, 10, 3, 14, 16, 18, 39, 3, 0, 0],
    ])
    token_type_ids = torch.tensor([
        [0] * 9 + [1] * 3,
        [0] * 12,
        [0] * 5 + [1] * 5 + [0] * 2,
    ])
    attention_mask = (input_ids != 0).long()
    attention_mask[0] = 1
    with torch.no_grad():
        hidden, pooled = bert_model(w, input_ids, token_type_ids, attention_mask)
    with open(os.path.join(HERE, "inputs.json"), "w") as f:
        json.dump({"input_ids": input_ids.tolist(), "token_type_ids": token_type_ids.tolist(),
                   "attention_mask": attention_mask.tolist()}, f)
        f.write("\n")
    write_safetensors(os.path.join(HERE, "expected.safetensors"),
                      {"last_hidden_state": hidden, "pooler_output": pooled},
                      {"generator": "make_golden.py", "torch": torch.__version__})
    print("wrote fixture to", HERE)


if __name__ == "__main__":
    main()
