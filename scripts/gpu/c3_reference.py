#!/usr/bin/env python3
"""C3 of the GPU issue: adapterd's fp32 logits against an independent reference.

The reference is transformers' BertModel loaded from the same HuggingFace
directory, with the task's Houlsby adapters written here in PyTorch as forward
hooks (Adapter(x) = x + U act(D x + b_D) + b_U after the attention output
projection and after the FFN output projection, before each residual +
LayerNorm), the task's LayerNorm affines copied into the model's LayerNorms,
and the head on the pooled output: docs/ARCHITECTURE.md's math, not
adapterd's code.

    c3_reference.py MODEL_DIR C3_DIR [--device cuda] [--out result.json]

C3_DIR is what adapterd-gpu-checks wrote: adapter.safetensors (the task, in
adapterd's adapter format) and adapterd_fp32.json (inputs, logits, pooled).
Prints "RESULT c3.<name> <value>" lines and exits 0 when the logits agree
within 1e-4, 1 otherwise.
"""
import argparse
import json
import sys

import torch
from safetensors import safe_open
from transformers import BertModel

ACTIVATIONS = {
    "gelu": lambda x: torch.nn.functional.gelu(x),  # exact (erf), as adapterd's
    "relu": torch.relu,
    "tanh": torch.tanh,
    "silu": torch.nn.functional.silu,
    "gelu_new": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("c3_dir")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", default="")
    ap.add_argument("--tolerance", type=float, default=1e-4)
    args = ap.parse_args()

    # Plain fp32 products (no TF32), whatever this PyTorch's default.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device(args.device)

    with safe_open(f"{args.c3_dir}/adapter.safetensors", framework="pt") as f:
        meta = f.metadata() or {}
        task = {k: f.get_tensor(k).to(device, torch.float32) for k in f.keys()}
    act = ACTIVATIONS[meta.get("activation", "gelu")]
    ref = json.load(open(f"{args.c3_dir}/adapterd_fp32.json"))

    model = BertModel.from_pretrained(args.model_dir, attn_implementation="eager").to(device).float().eval()
    if model.pooler is None:
        raise SystemExit("c3: the checkpoint has no pooler; adapterd's pooled output would be h[CLS]")

    def adapter(prefix):
        down_w, down_b = task[f"{prefix}.down.weight"], task[f"{prefix}.down.bias"]
        up_w, up_b = task[f"{prefix}.up.weight"], task[f"{prefix}.up.bias"]

        def hook(_module, _inputs, out):
            return out + act(out @ down_w.T + down_b) @ up_w.T + up_b

        return hook

    with torch.no_grad():
        def set_ln(ln, name):
            ln.weight.copy_(task[f"{name}.weight"])
            ln.bias.copy_(task[f"{name}.bias"])

        set_ln(model.embeddings.LayerNorm, "embeddings.layer_norm")
        for i, layer in enumerate(model.encoder.layer):
            layer.attention.output.dense.register_forward_hook(adapter(f"layers.{i}.attention_adapter"))
            layer.output.dense.register_forward_hook(adapter(f"layers.{i}.ffn_adapter"))
            set_ln(layer.attention.output.LayerNorm, f"layers.{i}.attention_layer_norm")
            set_ln(layer.output.LayerNorm, f"layers.{i}.output_layer_norm")

        as_long = lambda k: torch.tensor(ref[k], dtype=torch.float64).round().long().to(device)
        out = model(input_ids=as_long("input_ids"), token_type_ids=as_long("token_type_ids"),
                    attention_mask=as_long("attention_mask"))
        pooled = out.pooler_output.double()
        logits = (out.pooler_output @ task["head.weight"].T + task["head.bias"]).double()

    want_logits = torch.tensor(ref["logits"], dtype=torch.float64, device=device)
    want_pooled = torch.tensor(ref["pooled"], dtype=torch.float64, device=device)
    result = {
        "c3.logits_max_abs_diff": (logits - want_logits).abs().max().item(),
        "c3.pooled_max_abs_diff": (pooled - want_pooled).abs().max().item(),
        "c3.logits_max_abs": want_logits.abs().max().item(),
        "c3.rows": int(want_logits.shape[0]),
    }
    for k, v in result.items():
        print(f"RESULT {k} {v:.6g}")
    ok = result["c3.logits_max_abs_diff"] <= args.tolerance
    print(f"C3 {'PASS' if ok else 'MISS'}: adapterd ({ref.get('device')}) vs transformers "
          f"{__import__('transformers').__version__} BertModel + PyTorch adapters on {device}: "
          f"logits max |diff| {result['c3.logits_max_abs_diff']:.3g} (target <= {args.tolerance:g})")
    if args.out:
        json.dump(result, open(args.out, "w"), indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
