#!/usr/bin/python3
"""Writes AdapterHub-format adapter directories for tests/model/adapterhub_test.cc.

What AdapterHub's `adapters` library (1.x) writes with `save_adapter(dir, name)`:
adapter_config.json (build_full_config: model_type, hidden_size, model_name,
model_class, name, version and BnConfig.to_dict() under "config") and
pytorch_adapter.bin, a torch.save of a plain dict of the adapter's tensors
under the library's names. Written here with Debian's python3-torch, without
the library (it is not packaged), for a tiny BERT (hidden 32, 2 layers):

    houlsby/   DoubleSeqBnConfig (both sites, swish, reduction_factor 16: m = 2)
               and a pf-* style head (head_config.json, pytorch_model_head.bin)
    pfeiffer/  SeqBnConfig (FFN site, relu), leave_out [1], adapter-transformers
               v1 tensor names (layer_text_task_adapters), no "bert." prefix and
               no "version" (an older library's file)

Tensor k of the file (in the order written) holds 0.01 * j + k for its
element j in row-major order, so the test recomputes what it expects.
Run: /usr/bin/python3 tests/model/testdata/adapterhub/make_fixtures.py
"""
import json
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
HIDDEN, LAYERS, M = 32, 2, 2


def bn_config(pfeiffer):
    return {
        "architecture": "bottleneck", "mh_adapter": not pfeiffer, "output_adapter": True,
        "reduction_factor": 16, "non_linearity": "relu" if pfeiffer else "swish",
        "original_ln_before": pfeiffer, "original_ln_after": True, "ln_before": False, "ln_after": False,
        "init_weights": "bert", "init_weights_seed": None, "is_parallel": False, "scaling": 1.0,
        "use_gating": False, "residual_before_ln": True, "adapter_residual_before_ln": False,
        "inv_adapter": None, "inv_adapter_reduction_factor": None, "cross_adapter": False,
        "leave_out": [1] if pfeiffer else [], "dropout": 0.0, "phm_layer": False, "phm_dim": 4,
        "factorized_phm_W": True, "shared_W_phm": False, "shared_phm_rule": True,
        "factorized_phm_rule": False, "phm_c_init": "normal", "phm_init_range": 0.0001, "learn_phm": True,
        "hypercomplex_nonlinearity": "glorot-uniform", "phm_rank": 1, "phm_bias": True,
        "stochastic_depth": 0.0,
    }


def write(dirname, pfeiffer):
    out = os.path.join(HERE, dirname)
    os.makedirs(out, exist_ok=True)
    full = {"model_type": "bert", "hidden_size": HIDDEN, "model_name": "tiny-bert",
            "model_class": "BertAdapterModel", "name": "task", "config": bn_config(pfeiffer)}
    if not pfeiffer:
        full["version"] = "adapters.1.1.0"
    with open(os.path.join(out, "adapter_config.json"), "w") as f:
        json.dump(full, f, indent=2, sort_keys=True)
        f.write("\n")
    state = {}
    shapes = [("adapter_down.0.weight", (M, HIDDEN)), ("adapter_down.0.bias", (M,)),
              ("adapter_up.weight", (HIDDEN, M)), ("adapter_up.bias", (HIDDEN,))]
    for layer in range(LAYERS):
        if layer in full["config"]["leave_out"]:
            continue
        sites = ["output"] if pfeiffer else ["attention.output", "output"]
        for site in sites:
            kind = ("attention_text_task_adapters" if site.startswith("attention") else "layer_text_task_adapters") \
                if pfeiffer else "adapters"
            prefix = "" if pfeiffer else "bert."
            for name, shape in shapes:
                n = 1
                for s in shape:
                    n *= s
                k = len(state)
                state[f"{prefix}encoder.layer.{layer}.{site}.{kind}.task.{name}"] = (
                    torch.arange(n, dtype=torch.float32) * 0.01 + k).reshape(shape)
    torch.save(state, os.path.join(out, "pytorch_adapter.bin"))
    if pfeiffer:
        return
    # The head every AdapterHub pf-* adapter has: ClassificationHead, two
    # layers with tanh between them, on h[CLS] (use_pooler false); its
    # Linears are modules 1 and 4 of Dropout, Linear, Tanh, Dropout, Linear.
    head = {"model_type": "bert", "hidden_size": HIDDEN, "model_name": "tiny-bert",
            "model_class": "BertAdapterModel", "name": "task", "version": "adapters.1.1.0",
            "config": {"head_type": "classification", "num_labels": 3, "layers": 2,
                       "activation_function": "tanh", "label2id": {"neg": 0, "neu": 1, "pos": 2},
                       "use_pooler": False, "bias": True, "dropout_prob": None}}
    with open(os.path.join(out, "head_config.json"), "w") as f:
        json.dump(head, f, indent=2, sort_keys=True)
        f.write("\n")
    head_state = {}
    for name, shape in [("1.weight", (HIDDEN, HIDDEN)), ("1.bias", (HIDDEN,)), ("4.weight", (3, HIDDEN)),
                        ("4.bias", (3,))]:
        n = 1
        for s in shape:
            n *= s
        k = len(head_state)
        head_state[f"heads.task.{name}"] = (torch.arange(n, dtype=torch.float32) * 0.01 + k).reshape(shape)
    torch.save(head_state, os.path.join(out, "pytorch_model_head.bin"))


def main():
    write("houlsby", pfeiffer=False)
    write("pfeiffer", pfeiffer=True)


if __name__ == "__main__":
    main()
