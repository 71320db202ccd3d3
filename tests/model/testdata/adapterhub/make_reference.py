#!/usr/bin/python3
"""AdapterHub adapters and the logits they give, for tests/model/adapterhub_import_test.cc.

A reference in plain PyTorch (Debian's python3-torch; neither transformers nor
the `adapters` library is packaged): the golden tiny BERT
(../golden/model, whose forward ../golden/make_golden.py checks against
transformers' modeling_bert.py) with Houlsby bottleneck adapters placed as
the `adapters` library (1.x) places them for DoubleSeqBnConfig, and its
prediction heads. It shares no code with adapterd.

The library's placement (methods/bottleneck.py, bottleneck_layer_forward
with original_ln_before false, residual_before_ln true, original_ln_after
true), at both the attention output and the FFN output of every layer not
in leave_out, where h is the sublayer's projection and x its input:
    out = LayerNorm(h + adapter_up(act(adapter_down(h))) + x)
with the encoder's own, frozen LayerNorm. Heads (heads/base.py,
PredictionHead): Dropout, Linear(d, K) for layers 1, reading the pooler's
output (use_pooler true) or every token's final state (tagging, QA).

Each case is a directory as save_adapter writes it (adapter_config.json
from build_full_config, the adapter's tensors under the library's keys,
head_config.json, the head's tensors) under <case>/adapter/, and
<case>/expected.json with the reference's logits for ../golden/inputs.json
("logits" [B, K] for pooled heads, [B, L, K] for token heads; each float32
written exactly). Weights are far from identity (std 0.1), so an adapter or head
applied in the wrong place shows.

Run: /usr/bin/python3 tests/model/testdata/adapterhub/make_reference.py

`make_reference.py --read DIR...` is the other direction, for adapterd's export
(tests/model/adapterhub_export_test.cc): it loads the directory DIR as
load_adapter would (the configs' fields it reads, the older files'
activation rename, `int(d // reduction_factor)` for the bottleneck size,
torch.load with weights_only=True), requires the exact key set the library's
modules have (it would only warn on a missing or an extra key), and prints
one line {"logits": ...} per DIR for ../golden/inputs.json, as expected.json
holds them (several directories per run: PyTorch's start-up is most of one).
"""
import json
import math
import os
import shutil
import struct
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "golden")
sys.path.insert(0, GOLDEN)
from make_golden import write_safetensors  # noqa: E402
OUT = os.path.join(HERE, "reference")

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        t = torch.frombuffer(bytearray(raw[base + begin:base + end]), dtype=DTYPES[info["dtype"]])
        out[name] = t.reshape(info["shape"]).to(torch.float32)
    return out


def encoder_weights():
    """The golden checkpoint under BertModel's names (LayerNorm weight/bias)."""
    w = {}
    for name, t in read_safetensors(os.path.join(GOLDEN, "model", "model.safetensors")).items():
        if not name.startswith("bert."):
            continue
        name = name[len("bert."):].replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta",
                                                                                          "LayerNorm.bias")
        w[name] = t
    return w


with open(os.path.join(GOLDEN, "model", "config.json")) as f:
    CONFIG = json.load(f)
D = CONFIG["hidden_size"]
LAYERS = CONFIG["num_hidden_layers"]

ACTIVATIONS = {
    "swish": torch.nn.functional.silu,
    "relu": torch.relu,
    "tanh": torch.tanh,
    "gelu": torch.nn.functional.gelu,  # the library's "gelu" with a version: exact
    "gelu_new": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
}


def linear(x, w, prefix):
    return torch.nn.functional.linear(x, w[prefix + ".weight"], w.get(prefix + ".bias"))


def layer_norm(x, w, prefix):
    return torch.nn.functional.layer_norm(x, (D,), w[prefix + ".weight"], w[prefix + ".bias"],
                                          eps=CONFIG["layer_norm_eps"])


def adapted(h, x, adapter, act, ln_prefix, w):
    """bottleneck_layer_forward: LN(h + up(act(down(h))) + x), or LN(h + x) without an adapter."""
    if adapter is not None:
        h = h + linear(act(linear(h, adapter, "adapter_down.0")), adapter, "adapter_up")
    return layer_norm(h + x, w, ln_prefix)


def forward(w, adapters, act, input_ids, token_type_ids, attention_mask):
    """BertModel in eval mode with the adapters; returns (last_hidden_state, pooler_output)."""
    heads = CONFIG["num_attention_heads"]
    hs = D // heads
    bsz, seq = input_ids.shape
    emb = (torch.nn.functional.embedding(input_ids, w["embeddings.word_embeddings.weight"])
           + torch.nn.functional.embedding(token_type_ids, w["embeddings.token_type_embeddings.weight"])
           + torch.nn.functional.embedding(torch.arange(seq).unsqueeze(0),
                                           w["embeddings.position_embeddings.weight"]))
    hidden = layer_norm(emb, w, "embeddings.LayerNorm")
    ext = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * torch.finfo(torch.float32).min

    def split(x):
        return x.view(bsz, seq, heads, hs).permute(0, 2, 1, 3)

    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        q, k, v = (split(linear(hidden, w, p + f"attention.self.{n}")) for n in ("query", "key", "value"))
        probs = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hs) + ext, dim=-1)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).reshape(bsz, seq, D)
        attn = adapted(linear(ctx, w, p + "attention.output.dense"), hidden, adapters.get((i, "attention")), act,
                       p + "attention.output.LayerNorm", w)
        inter = torch.nn.functional.gelu(linear(attn, w, p + "intermediate.dense"))
        hidden = adapted(linear(inter, w, p + "output.dense"), attn, adapters.get((i, "output")), act,
                         p + "output.LayerNorm", w)
    return hidden, torch.tanh(linear(hidden[:, 0], w, "pooler.dense"))


def bn_config(non_linearity, reduction_factor, leave_out):
    """DoubleSeqBnConfig().to_dict() with the case's changes."""
    return {
        "architecture": "bottleneck", "mh_adapter": True, "output_adapter": True,
        "reduction_factor": reduction_factor, "non_linearity": non_linearity,
        "original_ln_before": False, "original_ln_after": True, "ln_before": False, "ln_after": False,
        "init_weights": "bert", "init_weights_seed": None, "is_parallel": False, "scaling": 1.0,
        "use_gating": False, "residual_before_ln": True, "adapter_residual_before_ln": False,
        "inv_adapter": None, "inv_adapter_reduction_factor": None, "cross_adapter": False,
        "leave_out": leave_out, "dropout": 0.0, "phm_layer": False, "phm_dim": 4,
        "factorized_phm_W": True, "shared_W_phm": False, "shared_phm_rule": True,
        "factorized_phm_rule": False, "phm_c_init": "normal", "phm_init_range": 0.0001, "learn_phm": True,
        "hypercomplex_nonlinearity": "glorot-uniform", "phm_rank": 1, "phm_bias": True,
        "stochastic_depth": 0.0,
    }


# name, non_linearity as written, the activation it means, version written,
# reduction_factor, leave_out, head type, labels, use_pooler, head bias,
# weights file format ("bin" or "safetensors") and dtype.
CASES = [
    ("swish_classification", "swish", "swish", True, 8, [], "classification", ["neg", "neu", "pos"], True, True,
     "bin", torch.float32),
    ("relu_regression", "relu", "relu", True, 16, [1], "classification", ["LABEL_0"], True, True,
     "safetensors", torch.float32),
    ("tanh_multilabel", "tanh", "tanh", True, 8, [0], "multilabel_classification", ["a", "b", "c", "d"], True,
     False, "bin", torch.float32),
    ("gelu_tagging", "gelu", "gelu", True, 4, [], "tagging", ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"], False,
     True, "safetensors", torch.float16),
    # No "version": an older library's file, whose "gelu" means the tanh form.
    ("gelu_new_qa", "gelu", "gelu_new", False, 8, [], "question_answering", None, False, True, "bin",
     torch.bfloat16),
]


def main():
    torch.manual_seed(20261207)
    w = encoder_weights()
    inputs = json.load(open(os.path.join(GOLDEN, "inputs.json")))
    ids, types, mask = (torch.tensor(inputs[k]) for k in ("input_ids", "token_type_ids", "attention_mask"))
    shutil.rmtree(OUT, ignore_errors=True)
    for (case, written_act, act, versioned, rf, leave_out, head_type, labels, use_pooler, bias, fmt,
         dtype) in CASES:
        m = D // rf
        name = "task"
        adapters, state = {}, {}
        for i in range(LAYERS):
            if i in leave_out:
                continue
            for site, key in (("attention", "attention.output"), ("output", "output")):
                a = {"adapter_down.0.weight": torch.randn(m, D) * 0.1, "adapter_down.0.bias": torch.randn(m) * 0.1,
                     "adapter_up.weight": torch.randn(D, m) * 0.1, "adapter_up.bias": torch.randn(D) * 0.1}
                # What the file stores is what the reference computes with.
                a = {k: t.to(dtype).to(torch.float32) for k, t in a.items()}
                adapters[(i, site)] = a
                for k, t in a.items():
                    state[f"bert.encoder.layer.{i}.{key}.adapters.{name}.{k}"] = t
        num_labels = 2 if head_type == "question_answering" else len(labels)
        head = {"1.weight": (torch.randn(num_labels, D) * 0.1).to(dtype).to(torch.float32)}
        if bias:
            head["1.bias"] = (torch.randn(num_labels) * 0.1).to(dtype).to(torch.float32)
        head_state = {f"heads.{name}.{k}": t for k, t in head.items()}

        with torch.no_grad():
            hidden, pooled = forward(w, adapters, ACTIVATIONS[act], ids, types, mask)
            reads = pooled if head_type in ("classification", "multilabel_classification") else hidden
            logits = linear(reads, head, "1")

        adir = os.path.join(OUT, case, "adapter")
        os.makedirs(adir)
        full = {"model_type": "bert", "hidden_size": D, "model_name": "adapterd-golden-tiny-bert",
                "model_class": "BertAdapterModel", "name": name, "config": bn_config(written_act, rf, leave_out)}
        if versioned:
            full["version"] = "adapters.1.1.0"
        head_config = {"config": {"head_type": head_type, "num_labels": num_labels, "layers": 1,
                                  "activation_function": None, "use_pooler": use_pooler, "bias": bias,
                                  "dropout_prob": None},
                       "hidden_size": D, "model_class": "BertAdapterModel", "model_name": full["model_name"],
                       "model_type": "bert", "name": name, "version": "adapters.1.1.0"}
        if head_type != "question_answering":
            head_config["config"]["label2id"] = {label: i for i, label in enumerate(labels)}
        if head_type == "classification" and num_labels == 1:
            head_config["config"]["label2id"] = None
        for fname, obj in (("adapter_config.json", full), ("head_config.json", head_config)):
            with open(os.path.join(adir, fname), "w") as f:
                json.dump(obj, f, indent=2, sort_keys=True)
                f.write("\n")
        if fmt == "bin":
            torch.save({k: t.to(dtype) for k, t in state.items()}, os.path.join(adir, "pytorch_adapter.bin"))
            torch.save({k: t.to(dtype) for k, t in head_state.items()}, os.path.join(adir, "pytorch_model_head.bin"))
        else:
            write_safetensors(os.path.join(adir, "adapter.safetensors"), state, {"format": "pt"}, dtype)
            write_safetensors(os.path.join(adir, "model_head.safetensors"), head_state, {"format": "pt"}, dtype)
        with open(os.path.join(OUT, case, "expected.json"), "w") as f:
            json.dump({"logits": logits.tolist()}, f)
            f.write("\n")
    print("wrote", ", ".join(c[0] for c in CASES), "under", OUT)


def load_file(adir, safetensors_name, torch_name):
    """The tensors of one of the directory's weights files, as fp32."""
    if os.path.exists(os.path.join(adir, safetensors_name)):
        tensors = read_safetensors(os.path.join(adir, safetensors_name))
    else:
        tensors = torch.load(os.path.join(adir, torch_name), weights_only=True)
    return {k: t.to(torch.float32) for k, t in tensors.items()}


def read_directory(adir):
    """An AdapterHub directory's logits on ../golden/inputs.json, as the library would load and run it."""
    full = json.load(open(os.path.join(adir, "adapter_config.json")))
    c = full["config"]
    expected_off = {"ln_before": False, "ln_after": False, "is_parallel": False, "use_gating": False,
                    "phm_layer": False, "cross_adapter": False, "original_ln_before": False,
                    "original_ln_after": True, "residual_before_ln": True, "mh_adapter": True,
                    "output_adapter": True, "scaling": 1.0, "architecture": "bottleneck"}
    for key, value in expected_off.items():
        assert c[key] == value, f"{key} is {c[key]!r}; the reference computes {value!r}"
    assert full["hidden_size"] == D, full["hidden_size"]
    act = c["non_linearity"].lower()
    if "version" not in full:  # the library's ACTIVATION_RENAME
        act = {"gelu": "gelu_new", "gelu_orig": "gelu"}.get(act, act)
    m = int(D // c["reduction_factor"])
    name = full["name"]
    state = load_file(adir, "adapter.safetensors", "pytorch_adapter.bin")
    adapters, want = {}, {}
    for i in range(LAYERS):
        if i in (c["leave_out"] or []):
            continue
        for site, key in (("attention", "attention.output"), ("output", "output")):
            shapes = {"adapter_down.0.weight": (m, D), "adapter_down.0.bias": (m,), "adapter_up.weight": (D, m),
                      "adapter_up.bias": (D,)}
            adapters[(i, site)] = {}
            for k, shape in shapes.items():
                want[f"bert.encoder.layer.{i}.{key}.adapters.{name}.{k}"] = ((i, site), k, shape)
    assert set(state) == set(want), f"keys differ: missing {set(want) - set(state)}, extra {set(state) - set(want)}"
    for full_key, ((i, site), k, shape) in want.items():
        assert tuple(state[full_key].shape) == shape, (full_key, tuple(state[full_key].shape), shape)
        adapters[(i, site)][k] = state[full_key]

    head_full = json.load(open(os.path.join(adir, "head_config.json")))
    h = head_full["config"]
    assert h["layers"] == 1, h["layers"]
    head_name = head_full["name"]
    head_state = load_file(adir, "model_head.safetensors", "pytorch_model_head.bin")
    head_keys = {f"heads.{head_name}.1.weight"} | ({f"heads.{head_name}.1.bias"} if h.get("bias", True) else set())
    assert set(head_state) == head_keys, (sorted(head_state), sorted(head_keys))
    head = {k[len(f"heads.{head_name}."):]: t for k, t in head_state.items()}
    assert tuple(head["1.weight"].shape) == (h["num_labels"], D)

    inputs = json.load(open(os.path.join(GOLDEN, "inputs.json")))
    ids, types, mask = (torch.tensor(inputs[k]) for k in ("input_ids", "token_type_ids", "attention_mask"))
    with torch.no_grad():
        hidden, pooled = forward(encoder_weights(), adapters, ACTIVATIONS[act], ids, types, mask)
        pooled_kind = h["head_type"] in ("classification", "multilabel_classification")
        # Without the pooler, a pooled head reads h[CLS].
        reads = (pooled if h["use_pooler"] else hidden[:, 0]) if pooled_kind else hidden
        logits = linear(reads, head, "1")
    return logits


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--read":
        for directory in sys.argv[2:]:
            json.dump({"logits": read_directory(directory).tolist()}, sys.stdout)
            sys.stdout.write("\n")
    else:
        main()
