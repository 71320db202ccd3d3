#!/usr/bin/env bash
# Builds the installed Debian abseil, from Debian's own source package of the
# same version, with -fsanitize=thread, for the ThreadSanitizer run
# (scripts/sanitize.sh thread). Prints the directory holding the instrumented
# shared libraries; put it on LD_LIBRARY_PATH to replace Debian's copies.
#
#   scripts/tsan-abseil.sh DIR     # work and output under DIR (DIR/lib)
#
# Why: every adapterd lock is an absl::Mutex, and Debian's libabsl is built
# without TSan, so its lock and unlock are invisible: TSan then reports every
# field guarded by an absl::Mutex as a data race (two threads incrementing an
# int under one absl::MutexLock are reported). Built with -fsanitize=thread,
# absl::Mutex annotates itself (ABSL_TSAN_MUTEX_*), as upstream intends. The
# libraries keep Debian's SONAMEs (libabsl_*.so.20220623), so the instrumented
# copies also serve gRPC and protobuf, which link Debian's abseil.
#
# The source comes through apt (deb-src lines made from the machine's own
# debian.sources, in a private apt directory: the system's configuration is
# not touched), so its checksums are verified against Debian's signed
# indexes; dpkg-source applies Debian's patches (the SONAME, the inline
# namespace and the options that fix the ABI). All 64 libraries are built
# (about 250 files, under a minute on 2 cores), so that no abseil code in the
# process is uninstrumented. A stamp with the version makes later calls free.
set -euo pipefail
OUT=${1:?usage: $0 DIR}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

VERSION=$(dpkg-query -W -f='${Version}' libabsl-dev 2>/dev/null || true)
[ -n "$VERSION" ] || { echo "tsan-abseil: libabsl-dev is not installed (scripts/install-deps.sh)" >&2; exit 1; }
if [ -f "$OUT/lib/.version" ] && [ "$(cat "$OUT/lib/.version")" = "$VERSION" ]; then
  echo "$OUT/lib"
  exit 0
fi

APT_DIR="$OUT/apt"
rm -rf "$APT_DIR" "$OUT/src" "$OUT/build" "$OUT/lib"
mkdir -p "$APT_DIR/sources.list.d" "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial" "$OUT/src"
found=0
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  # deb822 stanzas: the same URIs, suites and keys, as source indexes.
  sed 's/^Types:.*$/Types: deb-src/' "$f" > "$APT_DIR/sources.list.d/$(basename "$f")"
  found=1
done
if [ -f /etc/apt/sources.list ]; then
  sed -n 's/^deb /deb-src /p' /etc/apt/sources.list > "$APT_DIR/sources.list.d/from-sources.list"
  [ -s "$APT_DIR/sources.list.d/from-sources.list" ] && found=1
fi
[ "$found" = 1 ] || { echo "tsan-abseil: no apt sources found under /etc/apt" >&2; exit 1; }
APT=(apt-get -q -o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$APT_DIR/sources.list.d"
     -o "Dir::State::Lists=$APT_DIR/lists" -o "Dir::Cache=$APT_DIR/cache" -o APT::Sandbox::User=root)
"${APT[@]}" update >&2
(cd "$OUT/src" && "${APT[@]}" source --download-only "abseil=$VERSION" >&2)
(cd "$OUT/src" && dpkg-source -x --no-check ./abseil_*.dsc abseil >&2)

# Debian builds it as C++17 (debian/rules); the same here, so that the
# options baked into the headers match the installed ones. -O1 (the level
# TSan recommends, and adapterd's own under TSan) with line tables: 79 s
# against 98 s at RelWithDebInfo's -O2 -g on 2 cores, the same stacks.
cmake -S "$OUT/src/abseil" -B "$OUT/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_CXX_STANDARD=17 -DBUILD_SHARED_LIBS=ON -DABSL_ENABLE_INSTALL=ON \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" >&2
cmake --build "$OUT/build" -j "${JOBS:-$(nproc)}" >&2
mkdir -p "$OUT/lib"
# The SONAME links (libabsl_X.so.20220623) are the only links named *.so.*.
find "$OUT/build" -name 'libabsl_*.so.*' -type l -exec cp -L {} "$OUT/lib/" \;
# Every library Debian installs must have its instrumented twin: a process
# that mixed the two would run template code (absl's call_once, containers)
# from whichever copy the loader binds first, instrumented or not.
n=$(find "$OUT/lib" -name 'libabsl_*.so.*' | wc -l)
for lib in /usr/lib/*/libabsl_*.so."${VERSION%%.*}"; do
  [ -f "$OUT/lib/$(basename "$lib")" ] || { echo "tsan-abseil: $(basename "$lib") was not built" >&2; exit 1; }
done
echo "$VERSION" > "$OUT/lib/.version"
echo "tsan-abseil: $n instrumented libraries of abseil $VERSION in $OUT/lib" >&2
echo "$OUT/lib"
