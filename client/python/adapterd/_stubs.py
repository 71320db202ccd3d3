"""The generated protobuf and gRPC modules of adapterd.v1, imported once.

They are generated at build time (adapterd/_codegen.py) and never committed:
an installed package holds them as ``adapterd/v1/``; a source checkout needs
them generated into a directory on ``sys.path`` (see _codegen.py). A missing
module raises ImportError saying how to get it.
"""

from __future__ import annotations

try:
    from adapterd.v1 import adapterd_service_pb2 as pb  # noqa: F401
    from adapterd.v1 import adapterd_service_pb2_grpc as pb_grpc  # noqa: F401
except ImportError as error:  # pragma: no cover - exercised by a broken install only
    raise ImportError(
        "adapterd's generated gRPC stubs (adapterd.v1.adapterd_service_pb2) are missing: install the package "
        "with `pip install ./client/python` (it generates them), or generate them with `python3 "
        "client/python/adapterd/_codegen.py --out DIR` and put DIR on PYTHONPATH after client/python "
        f"({error})"
    ) from error

__all__ = ["pb", "pb_grpc"]
