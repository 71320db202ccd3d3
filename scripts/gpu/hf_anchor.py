#!/usr/bin/env python3
"""The same encoder in PyTorch's own eager BertModel, timed and profiled on the GPU.

An anchor for G1 (docs/PERFORMANCE.md, "GPU"): transformers' BertModel in bf16
(SDPA attention) over the same HuggingFace directory, batch x seq tokens, the
median of timed forwards (CUDA events) after warm-ups; then one forward under
torch.profiler, its CUDA time per kernel class (matrix products, attention,
elementwise/normalisation), which is where adapterd's bare encoder, the same
math in the same eager style, spends its time too.

    hf_anchor.py MODEL_DIR [--batch 1000] [--seq 128]
"""
import argparse
import sys

import torch
from transformers import BertModel


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--iters", type=int, default=5)
    args = ap.parse_args()
    model = BertModel.from_pretrained(args.model_dir, attn_implementation="sdpa").to("cuda", torch.bfloat16).eval()
    ids = torch.randint(5, model.config.vocab_size, (args.batch, args.seq), device="cuda")
    mask = torch.ones_like(ids)
    with torch.inference_mode():
        for _ in range(2):
            model(input_ids=ids, attention_mask=mask)
        times = []
        for _ in range(args.iters):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            model(input_ids=ids, attention_mask=mask)
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e) / 1e3)
        t = sorted(times)[len(times) // 2]
        print(f"RESULT anchor.hf_bert_bf16.seq_per_s {args.batch / t:.1f}")
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            model(input_ids=ids, attention_mask=mask)
            torch.cuda.synchronize()
    total = 0.0
    classes = {"matrix products (gemm)": 0.0, "attention": 0.0, "other (elementwise, norm, copies)": 0.0}
    rows = []
    for ev in prof.key_averages():
        us = getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0.0)
        if ev.key.startswith("aten::") or us <= 0:
            continue  # operator-level rows repeat their kernels' time
        total += us
        name = ev.key.lower()
        if "gemm" in name or "cutlass" in name or "sm90_xmma" in name or "nvjet" in name:
            classes["matrix products (gemm)"] += us
        elif "attention" in name or "fmha" in name or "flash" in name or "cudnn" in name:
            classes["attention"] += us
        else:
            classes["other (elementwise, norm, copies)"] += us
        rows.append((us, ev.key[:110], ev.count))
    print(f"one forward: {total / 1e3:.1f} ms of kernels")
    for k, v in classes.items():
        print(f"  {k:36s} {v / 1e3:8.2f} ms  {100 * v / max(total, 1e-9):5.1f}%")
        print(f"RESULT anchor.kernel_share.{k.split()[0]} {v / max(total, 1e-9):.4f}")
    for us, key, n in sorted(rows, reverse=True)[:12]:
        print(f"  {us / 1e3:8.2f} ms  x{n:<4d} {key}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
