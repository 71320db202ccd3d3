"""Build step of the adapterd client: generates the gRPC stubs into the build tree.

The stubs (``adapterd/v1/adapterd_service_pb2*.py``) are generated from
proto/adapterd/v1/adapterd_service.proto every time the package is built and
are never committed. The proto is found at ``$ADAPTERD_PROTO_DIR``, at
``proto/`` beside this file (an sdist carries a copy), or at ``../../proto``
(the repository checkout, which pip >= 21.3 builds in place). Everything else
is in pyproject.toml.
"""

import importlib.util
import os
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent


def _codegen():
    # Loaded by path: importing the adapterd package would need grpc, which a
    # build environment need not have.
    spec = importlib.util.spec_from_file_location("adapterd_codegen", HERE / "adapterd" / "_codegen.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildPyWithStubs(build_py):
    """build_py, then protoc into build_lib, so that adapterd/v1/ ships in the wheel."""

    def run(self):
        super().run()
        codegen = _codegen()
        try:
            proto_dir = codegen.find_proto_dir(HERE)
            generated = codegen.generate(Path(self.build_lib), proto_dir)
        except codegen.CodegenError as error:
            raise SystemExit(f"adapterd: {error}") from None
        for path in generated:
            self.announce(f"generated {path}", level=2)

    def find_package_modules(self, package, package_dir):
        # adapterd.v1 has no sources in the tree: it is generated in run().
        if package == "adapterd.v1":
            return []
        return super().find_package_modules(package, package_dir)

    def check_package(self, package, package_dir):
        if package == "adapterd.v1":
            return None
        return super().check_package(package, package_dir)


class SdistWithProto(sdist):
    """sdist that carries the service's .proto under proto/, so the sdist builds on its own."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        codegen = _codegen()
        proto_dir = codegen.find_proto_dir(HERE)
        target = Path(base_dir) / "proto" / codegen.PROTO_FILE
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(proto_dir / codegen.PROTO_FILE, target)


# $ADAPTERD_BUILD_DIR moves the build tree and the egg-info out of the
# source directory (the tests build from a read-only point of view).
_build_dir = os.environ.get("ADAPTERD_BUILD_DIR")
_options = {"build": {"build_base": _build_dir}, "egg_info": {"egg_base": _build_dir}} if _build_dir else {}

setup(
    cmdclass={"build_py": BuildPyWithStubs, "sdist": SdistWithProto},
    package_dir={"adapterd.v1": os.path.join("adapterd", "v1")},
    options=_options,
)
