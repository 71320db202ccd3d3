"""Generates the gRPC stubs of adapterd.v1 from the service's .proto.

This module is standalone (standard library only): ``setup.py`` loads it by
path at build time, before the ``adapterd`` package (which needs grpc) can be
imported, and CMake runs it as a script. It never writes into the source tree
unless told to.

Layout: ``protoc --python_out=OUT`` writes ``OUT/adapterd/v1/
adapterd_service_pb2.py`` and the gRPC plugin ``OUT/adapterd/v1/
adapterd_service_pb2_grpc.py``, whose generated import line is ``from
adapterd.v1 import adapterd_service_pb2``. That module path is the proto
package's own name, and ``adapterd.v1`` is a real subpackage of the client
package, so the generated code is used unmodified: an installed package holds
it inside ``adapterd/``; a source checkout puts ``OUT`` on ``sys.path`` after
the package source, and ``adapterd/__init__.py`` extends its ``__path__``
(``pkgutil.extend_path``) so that ``adapterd.v1`` is found there.

Compilers, in order: ``$ADAPTERD_PROTOC`` if set, then ``/usr/bin/protoc``
(or ``protoc`` on ``PATH``) with the gRPC Python plugin
(``$ADAPTERD_GRPC_PYTHON_PLUGIN``, ``/usr/bin/grpc_python_plugin`` or
``grpc_python_plugin`` on ``PATH``); when either is missing,
``python -m grpc_tools.protoc`` (pip package grpcio-tools).

Usage as a script::

    python3 _codegen.py --out DIR [--proto-dir DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List, Optional, Sequence

#: The service's .proto, relative to the proto root (the -I directory).
PROTO_FILE = "adapterd/v1/adapterd_service.proto"
#: Where the generated modules land, relative to the output root.
GENERATED_PACKAGE_DIR = Path("adapterd") / "v1"
GENERATED_MODULES = ("adapterd_service_pb2.py", "adapterd_service_pb2_grpc.py")

_INIT_TEXT = '"""Generated from proto/adapterd/v1/adapterd_service.proto at build time; do not edit."""\n'


class CodegenError(RuntimeError):
    """The proto could not be found or compiled."""


def find_proto_dir(package_root: Path, explicit: Optional[str] = None) -> Path:
    """The directory holding ``adapterd/v1/adapterd_service.proto``.

    Looks, in order, at ``explicit``, ``$ADAPTERD_PROTO_DIR``, ``package_root/
    proto`` (an sdist carries a copy there) and ``package_root/../../proto``
    (the repository checkout). Raises CodegenError naming every place tried.
    """
    candidates: List[Path] = []
    if explicit:
        candidates.append(Path(explicit))
    env = os.environ.get("ADAPTERD_PROTO_DIR")
    if env:
        candidates.append(Path(env))
    candidates.append(package_root / "proto")
    candidates.append(package_root.parent.parent / "proto")
    for candidate in candidates:
        if (candidate / PROTO_FILE).is_file():
            return candidate.resolve()
    tried = ", ".join(str(c / PROTO_FILE) for c in candidates)
    raise CodegenError(
        "cannot find the adapterd service definition (tried: " + tried + "). Build the package from the "
        "adapterd repository (pip install ./client/python), or set ADAPTERD_PROTO_DIR to the directory that "
        "holds " + PROTO_FILE + "."
    )


def _which(env_var: str, default: str, name: str) -> Optional[str]:
    value = os.environ.get(env_var)
    if value:
        return value
    if os.access(default, os.X_OK):
        return default
    return shutil.which(name)


def _compiler_commands(proto_dir: Path, out: Path) -> List[List[str]]:
    """The commands to try, best first."""
    inputs = ["-I", str(proto_dir), "--python_out", str(out), "--grpc_python_out", str(out), PROTO_FILE]
    commands: List[List[str]] = []
    protoc = _which("ADAPTERD_PROTOC", "/usr/bin/protoc", "protoc")
    plugin = _which("ADAPTERD_GRPC_PYTHON_PLUGIN", "/usr/bin/grpc_python_plugin", "grpc_python_plugin")
    if protoc and plugin:
        commands.append([protoc, "--plugin=protoc-gen-grpc_python=" + plugin] + inputs)
    commands.append([sys.executable, "-m", "grpc_tools.protoc"] + inputs)
    return commands


def generate(out: Path, proto_dir: Path) -> List[Path]:
    """Compiles the service's proto into ``out`` (created if needed).

    Returns the generated module paths. Adds ``__init__.py`` to ``out/adapterd/
    v1`` (not to ``out/adapterd``, which stays a plain directory so that it can
    extend an installed or source ``adapterd`` package). Raises CodegenError
    with the compiler's output when no compiler succeeds.
    """
    out.mkdir(parents=True, exist_ok=True)
    failures: List[str] = []
    for command in _compiler_commands(proto_dir, out):
        try:
            result = subprocess.run(command, capture_output=True, text=True, check=False)
        except OSError as error:
            failures.append(f"{command[0]}: {error}")
            continue
        if result.returncode == 0:
            break
        failures.append(f"{' '.join(command)}: exit {result.returncode}: {result.stderr.strip()}")
    else:
        raise CodegenError("could not generate the gRPC stubs:\n  " + "\n  ".join(failures))
    package_dir = out / GENERATED_PACKAGE_DIR
    (package_dir / "__init__.py").write_text(_INIT_TEXT)
    generated = [package_dir / name for name in GENERATED_MODULES]
    missing = [str(path) for path in generated if not path.is_file()]
    if missing:
        raise CodegenError("the compiler did not write " + ", ".join(missing))
    return generated


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="output root; the modules land in OUT/adapterd/v1/")
    parser.add_argument("--proto-dir", default=None, help="directory holding " + PROTO_FILE)
    args = parser.parse_args(argv)
    try:
        proto_dir = find_proto_dir(Path(__file__).resolve().parent.parent, args.proto_dir)
        for path in generate(Path(args.out), proto_dir):
            print(path)
    except CodegenError as error:
        print(f"_codegen.py: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
