#!/usr/bin/python3
"""Writes the torch.save fixtures of tests/model/torch_archive_test.cc.

Run with Debian's python3-torch (scripts/install-deps.sh installs it):
    /usr/bin/python3 tests/model/testdata/torch_archive/make_fixtures.py

Every float value is (k * 0.25 - 1) for the tensor's element k in row-major
order of the *original* tensor (before any view), so the test recomputes
what it expects without reading these files another way. Also writes the
golden test model (../golden/model/model.safetensors) as a
pytorch_model.bin, which tests/model/encoder_test.cc loads beside it. The outputs are
committed; running this again rewrites them (bit-identical with the same
PyTorch).
"""
import collections
import os
import sys

import torch

OUT = os.path.dirname(os.path.abspath(__file__))


def ramp(*shape, dtype=torch.float32):
    n = 1
    for s in shape:
        n *= s
    return (torch.arange(n, dtype=torch.float64) * 0.25 - 1).reshape(shape).to(dtype)


def save(name, obj, **kwargs):
    torch.save(obj, os.path.join(OUT, name), **kwargs)


def read_safetensors(path):
    """The tensors of a safetensors file (its spec: u64 LE header size, JSON
    header, data), without the safetensors package."""
    import json
    import struct
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = collections.OrderedDict()
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        assert entry["dtype"] == "F32", name
        begin, end = entry["data_offsets"]
        out[name] = torch.frombuffer(bytearray(body[begin:end]), dtype=torch.float32).reshape(entry["shape"]).clone()
    return out


class Evil:
    """What a hostile upload looks like: unpickling it runs a shell."""

    def __reduce__(self):
        return (os.system, ("echo owned",))


def main():
    torch.manual_seed(0)
    # A module's state dict: an OrderedDict with _metadata (a BUILD).
    module = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4))
    with torch.no_grad():
        module[0].weight.copy_(ramp(4, 3))
        module[0].bias.copy_(ramp(4))
        module[1].weight.copy_(ramp(4))
        module[1].bias.copy_(ramp(4))
    save("state_dict.bin", module.state_dict())
    # Every storage type the reader maps.
    save("dtypes.bin", collections.OrderedDict([
        ("f32", ramp(2, 3)),
        ("f64", ramp(2, 3, dtype=torch.float64)),
        ("f16", ramp(2, 3, dtype=torch.float16)),
        ("bf16", ramp(2, 3, dtype=torch.bfloat16)),
        ("i64", torch.arange(6, dtype=torch.int64).reshape(2, 3) - 2),
        ("i32", torch.arange(6, dtype=torch.int32).reshape(2, 3) - 2),
        ("i16", torch.arange(6, dtype=torch.int16).reshape(2, 3) - 2),
        ("i8", torch.arange(6, dtype=torch.int8).reshape(2, 3) - 2),
        ("u8", torch.arange(6, dtype=torch.uint8).reshape(2, 3)),
        ("bool", torch.arange(6).reshape(2, 3) % 2 == 1),
    ]))
    # Views: a transposed (strided) tensor, a row at a storage offset, a
    # scalar, an empty tensor and an nn.Parameter, sharing one storage.
    a = ramp(3, 4)
    save("views.bin", {
        "a": a,
        "a_t": a.t(),
        "row1": a[1],
        "col2": a[:, 2],
        "scalar": torch.tensor(3.5),
        "empty": torch.zeros(0, 3),
        "param": torch.nn.Parameter(ramp(2, 2)),
    })
    # Protocol 4: FRAME, SHORT_BINUNICODE, MEMOIZE, STACK_GLOBAL.
    save("protocol4.bin", {"w": ramp(2, 2)}, pickle_protocol=4)
    # Refused: the pre-1.6 format, a hostile global, a nested dict.
    save("legacy.bin", {"w": ramp(2, 2)}, _use_new_zipfile_serialization=False)
    save("evil.bin", {"w": ramp(2, 2), "x": Evil()})
    save("nested.bin", {"model": {"w": ramp(2, 2)}})
    # The golden test model (../golden/model) as HuggingFace's older
    # pytorch_model.bin: the same tensors under the same names.
    golden = read_safetensors(os.path.join(OUT, "..", "golden", "model", "model.safetensors"))
    save("golden_pytorch_model.bin", golden)
    print("torch", torch.__version__, "wrote", sorted(f for f in os.listdir(OUT) if f.endswith(".bin")), file=sys.stderr)


if __name__ == "__main__":
    main()
