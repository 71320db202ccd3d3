# shellcheck shell=bash
# Sourced, not run: sets up a shell to build and run adapterd against a prefix
# that scripts/gpu/unpack.sh made from the debs scripts/gpu/prepare.sh fetched.
#
#   scripts/gpu/unpack.sh /tmp/adapterd-prefix
#   source scripts/gpu/env.sh /tmp/adapterd-prefix
#   TORCH_PREFIX=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
#   cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
#     -DADAPTERD_WERROR=OFF -DADAPTERD_WITH_ONEDNN=OFF $ADAPTERD_GPU_CMAKE_ARGS \
#     -DCMAKE_PREFIX_PATH="$TORCH_PREFIX;$ADAPTERD_GPU_CMAKE_PREFIX_PATH"
#   cmake --build build-gpu
#   ./build-gpu/server/adapterd --help          # same shell: needs LD_LIBRARY_PATH
#
# Exports (PREFIX's library dirs are $P/usr/lib/x86_64-linux-gnu,
# $P/lib/x86_64-linux-gnu and $P/usr/lib):
#   ADAPTERD_GPU_PREFIX            PREFIX, absolute
#   ADAPTERD_GPU_LIBRARY_PATH      PREFIX's library dirs, ':'-separated
#   CMAKE_PREFIX_PATH              $P/usr:$P/usr/lib/x86_64-linux-gnu/cmake prepended
#                                  (':'-separated, as CMake reads it from the
#                                  environment)
#   ADAPTERD_GPU_CMAKE_PREFIX_PATH the same two, ';'-separated, for -DCMAKE_PREFIX_PATH=
#                                  (a -DCMAKE_PREFIX_PATH list does not replace the
#                                  environment's, which CMake searches after it)
#   PKG_CONFIG, PKG_CONFIG_LIBDIR, PKG_CONFIG_PATH
#                                  PREFIX's pkg-config (a wrapper) and .pc dirs only
#   LD_LIBRARY_PATH                PREFIX's library dirs prepended: protoc and
#                                  grpc_cpp_plugin at build time, and ld (it looks
#                                  there for the indirect .so dependencies of
#                                  libgrpc++ etc.); adapterd's binaries at run time
#   PATH                           $P/bin (protoc, grpc_cpp_plugin, pkg-config
#                                  wrappers only) prepended
#   ADAPTERD_GPU_CMAKE_ARGS        -DPKG_CONFIG_EXECUTABLE -DProtobuf_PROTOC_EXECUTABLE
#                                  (PREFIX's pkg-config and protoc wrappers),
#                                  (Protobuf before LibTorch: the top-level CMakeLists.txt)
#                                  -DCMAKE_{EXE,SHARED,MODULE}_LINKER_FLAGS=-Wl,-rpath-link,...
#                                  (unquoted use: PREFIX has no spaces)
# Sourcing twice with the same PREFIX adds nothing twice. Returns non-zero,
# without exiting the shell, when PREFIX is not an unpacked prefix.

_adapterd_gpu_env() {
  local p=${1:-}
  if [ -z "$p" ]; then
    echo "env.sh: usage: source scripts/gpu/env.sh PREFIX" >&2
    return 2
  fi
  if [ ! -f "$p/.adapterd-gpu-prefix" ] || [ -e "$p/.adapterd-gpu-partial" ]; then
    echo "env.sh: error: $p is not a prefix made by scripts/gpu/unpack.sh (run: scripts/gpu/unpack.sh $p)" >&2
    return 1
  fi
  p=$(cd "$p" && pwd)
  local made_at
  made_at=$(sed -n 's/.* prefix \([^ ]*\) .*/\1/p' "$p/.adapterd-gpu-prefix")
  if [ "$made_at" != "$p" ]; then
    echo "env.sh: error: $p was unpacked at $made_at and its CMake/.pc files name that path: unpack it again here" >&2
    return 1
  fi
  local arch=x86_64-linux-gnu
  local libs="$p/usr/lib/$arch:$p/lib/$arch:$p/usr/lib"
  local pcs="$p/usr/lib/$arch/pkgconfig:$p/usr/share/pkgconfig:$p/usr/lib/pkgconfig"

  # Prepend $2 to the ':'-list variable $1 unless it is there already.
  _adapterd_prepend() {
    local var=$1 add=$2 cur
    cur=${!var:-}
    case ":$cur:" in
      *":$add:"*) ;;
      *) printf -v "$var" '%s' "$add${cur:+:$cur}" ;;
    esac
    export "${var?}"
  }

  export ADAPTERD_GPU_PREFIX=$p
  export ADAPTERD_GPU_LIBRARY_PATH=$libs
  _adapterd_prepend CMAKE_PREFIX_PATH "$p/usr/lib/$arch/cmake"
  _adapterd_prepend CMAKE_PREFIX_PATH "$p/usr"
  export ADAPTERD_GPU_CMAKE_PREFIX_PATH="$p/usr;$p/usr/lib/$arch/cmake"
  _adapterd_prepend LD_LIBRARY_PATH "$p/usr/lib"
  _adapterd_prepend LD_LIBRARY_PATH "$p/lib/$arch"
  _adapterd_prepend LD_LIBRARY_PATH "$p/usr/lib/$arch"
  _adapterd_prepend PATH "$p/bin"
  export PKG_CONFIG="$p/bin/pkg-config"
  export PKG_CONFIG_LIBDIR=$pcs
  export PKG_CONFIG_PATH=$pcs
  export ADAPTERD_GPU_CMAKE_ARGS="-DPKG_CONFIG_EXECUTABLE=$p/bin/pkg-config -DProtobuf_PROTOC_EXECUTABLE=$p/bin/protoc -DCMAKE_EXE_LINKER_FLAGS=-Wl,-rpath-link,$libs -DCMAKE_SHARED_LINKER_FLAGS=-Wl,-rpath-link,$libs -DCMAKE_MODULE_LINKER_FLAGS=-Wl,-rpath-link,$libs"
  unset -f _adapterd_prepend
  echo "env.sh: using $p (ADAPTERD_GPU_CMAKE_ARGS, CMAKE_PREFIX_PATH, PKG_CONFIG*, LD_LIBRARY_PATH, PATH set)" >&2
}
_adapterd_gpu_env "$@"
