#!/usr/bin/env bash
# Prepares, on a Debian bookworm (amd64) host with network access to its apt
# mirror, everything an offline GPU machine needs to build adapterd that it does
# not have itself: gRPC, Protobuf (+ protoc and grpc_cpp_plugin), Abseil,
# RocksDB, CLI11, nlohmann-json, utf8proc, libmicrohttpd, GTest/GMock, Google
# Benchmark, OpenSSL and zlib headers, pkgconf. LibTorch, the compiler, glibc,
# libstdc++, CMake, Ninja, CUDA and Python come from the GPU machine.
#
# Contract
#   ./scripts/gpu/prepare.sh            # writes .gpu/ (git-ignored), checks it
#   ADAPTERD_GPU_DIR=DIR                # write there instead of <repo>/.gpu
#   ADAPTERD_GPU_MAX_MIB=40             # fail if the carried .gpu is larger
#   ADAPTERD_GPU_PROFILE=model          # only what the model-only build needs
#                                       # (-DADAPTERD_MODEL_ONLY=ON: common,
#                                       # server/model, tools; e.g. adapterd-pretrain,
#                                       # scripts/gpu/pretrain.sh): Abseil, glog,
#                                       # OpenSSL, utf8proc, nlohmann-json, CLI11,
#                                       # pkgconf; default .gpu-model/, ~5 MiB, which
#                                       # leaves the device call's 64 MiB for data
#
# Output (the one path to carry to the GPU machine: .gpu, 37.1 MiB in 66 .debs
# for bookworm as of this writing, under the 40 MiB budget):
#   .gpu/debs/*.deb          the Debian bookworm .deb files themselves, as
#                            downloaded (compressed; carried as they are and
#                            unpacked there with dpkg -x: no trimmed prefix)
#   .gpu/debs/MANIFEST       one "package version size" line per .deb
# The set is the dependency closure of ROOTS below, resolved by apt against a
# private, fake dpkg status in which the packages the GPU machine brings itself
# (glibc, the GCC toolchain and its runtimes, perl, python3, debconf, dpkg and
# the other Essential packages; DENY_RE) count as installed: apt neither
# downloads them nor follows their dependencies. Packages nothing in the build
# needs (DROP_RE: documentation, googletest's sources) are left out too.
#
# On the GPU machine (no network, no root needed, nothing written outside PREFIX):
#   scripts/gpu/unpack.sh /tmp/adapterd-prefix      # dpkg -x + relocation
#   source scripts/gpu/env.sh /tmp/adapterd-prefix  # CMAKE_PREFIX_PATH, PKG_CONFIG*,
#                                                   # LD_LIBRARY_PATH, PATH,
#                                                   # ADAPTERD_GPU_CMAKE_ARGS
#   cmake -S . -B build-gpu -G Ninja ... $ADAPTERD_GPU_CMAKE_ARGS \
#     -DCMAKE_PREFIX_PATH="$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)');$ADAPTERD_GPU_CMAKE_PREFIX_PATH"
#
# Idempotent: .deb files already there (same name, intact) are not fetched
# again; stale ones (not in the closure any more) are removed. At the end the
# debs are unpacked into a temporary prefix with unpack.sh and checked (protoc,
# grpc_cpp_plugin and pkg-config run from it; every .pc module resolves; no
# CMake config or .pc file points outside it; no dangling symlink), and the
# size of .gpu is checked against ADAPTERD_GPU_MAX_MIB.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
profile=${ADAPTERD_GPU_PROFILE:-full}
case "$profile" in
  full) out=${ADAPTERD_GPU_DIR:-$repo/.gpu} ;;
  model) out=${ADAPTERD_GPU_DIR:-$repo/.gpu-model} ;;
  *) echo "prepare.sh: error: ADAPTERD_GPU_PROFILE must be full or model, not '$profile'" >&2; exit 2 ;;
esac
max_mib=${ADAPTERD_GPU_MAX_MIB:-40}

die() { echo "prepare.sh: error: $*" >&2; exit 1; }
log() { echo "prepare.sh: $*" >&2; }

# What the GPU build needs (scripts/install-deps.sh's BUILD_PACKAGES and the
# test/bench frameworks, without the toolchain and LibTorch).
ROOTS=(
  libabsl-dev libssl-dev libgoogle-glog-dev
  libprotobuf-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc
  librocksdb-dev
  libutf8proc-dev nlohmann-json3-dev libcli11-dev libmicrohttpd-dev libxxhash-dev libzip-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  pkgconf zlib1g-dev
)
if [ "$profile" = model ]; then
  ROOTS=(libabsl-dev libssl-dev libgoogle-glog-dev libutf8proc-dev libxxhash-dev libzip-dev nlohmann-json3-dev libcli11-dev pkgconf
    zlib1g-dev)
fi
# Brought by the GPU machine itself: glibc, GCC and binutils with their
# runtimes, perl, python, debconf, dpkg (plus every Essential: yes package,
# added below). Counted as installed, so their dependencies are not followed.
DENY_RE='^(libc6|libc6-dev|libc-dev-bin|libc-bin|libc-l10n|locales|linux-libc-dev|libcrypt1|libcrypt-dev|libnsl2|libnsl-dev|libtirpc[0-9]*|libtirpc-(dev|common)|rpcsvc-proto|libgcc-s1|libgcc-[0-9]+-dev|libstdc\+\+6|libstdc\+\+-[0-9]+-dev|gcc(-[0-9]+)?(-base)?|g\+\+(-[0-9]+)?|cpp(-[0-9]+)?|binutils(-.*)?|libbinutils|libctf.*|libgprofng[0-9]*|lib(asan|lsan|tsan|ubsan|hwasan|itm|quadmath|atomic|gomp|cc)[0-9]+|libisl[0-9]+|libmpc[0-9]+|libmpfr[0-9]+|libjansson[0-9]+|make|perl|perl-base|perl-modules-.*|libperl[0-9.]+|python3.*|libpython3.*|debconf|debconf-.*|dpkg|dpkg-dev|libdpkg-perl|tar|coreutils|base-files|base-passwd|bash|sensible-utils)$'
# Not needed by the build at all.
DROP_RE='(-doc|-doc-.*)$|^googletest$'

command -v apt-get >/dev/null || die "apt-get not found: run this on Debian bookworm"
command -v dpkg-deb >/dev/null || die "dpkg-deb not found: run this on Debian bookworm"
. /etc/os-release
[ "${VERSION_CODENAME:-}" = bookworm ] || die "this host is ${PRETTY_NAME:-unknown}, not Debian bookworm: the .debs must be bookworm's"
[ "$(dpkg --print-architecture)" = amd64 ] || die "host architecture is $(dpkg --print-architecture), not amd64"
[ -x "$here/unpack.sh" ] || die "$here/unpack.sh missing or not executable"
[ -f "$here/env.sh" ] || die "$here/env.sh missing"

work=$(mktemp -d "${TMPDIR:-/tmp}/adapterd-gpu-prepare.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/dpkg" "$work/archives/partial" "$work/lists-unused"
: >"$work/dpkg/status"

# apt against a private dpkg status: nothing of the host's is read or changed.
apt_opts=(
  -o "Dir::State::status=$work/dpkg/status"
  -o "Dir::Cache::archives=$work/archives"
  -o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache="
  -o "APT::Architectures=amd64" -o "APT::Architecture=amd64"
  -o "APT::Install-Recommends=false" -o "APT::Install-Suggests=false"
  -o "Debug::NoLocking=true"
)

# Every root must have a candidate (else the apt lists are missing or stale).
for p in "${ROOTS[@]}"; do
  cand=$(apt-cache policy "$p" 2>/dev/null | awk '/Candidate:/{print $2}')
  if [ -z "$cand" ] || [ "$cand" = "(none)" ]; then
    die "no candidate for $p: run 'apt-get update' (as root) first"
  fi
done

# "Inst pkg [old] (version ...)" lines of a simulated install -> "pkg version".
simulate() {
  apt-get -s "${apt_opts[@]}" install "${ROOTS[@]}" >"$work/sim.out" 2>"$work/sim.err" || {
    cat "$work/sim.err" "$work/sim.out" >&2
    die "apt could not resolve the closure of: ${ROOTS[*]}"
  }
  sed -n 's/^Inst \([^ ]*\) \(\[[^]]*\] \)\{0,1\}(\([^ ]*\) .*/\1 \3/p' "$work/sim.out"
}

# Pass 1: the whole closure from nothing.
simulate >"$work/full"
[ -s "$work/full" ] || die "empty closure (apt output: $work/sim.out)"

# Which of it the GPU machine brings: DENY_RE, or Essential: yes.
# "pkg version essential filename size sha256" for each "pkg version" on stdin
# (one apt-cache call for all: apt-cache is slow to start).
describe() {
  local args=()
  while read -r pkg ver; do args+=("$pkg=$ver"); done
  [ ${#args[@]} -gt 0 ] || return 0
  apt-cache show "${args[@]}" | awk '
    function flush() { if (p != "" && !(p in seen)) { seen[p] = 1; print p, v, (e == "" ? "no" : e), f, s, h } p = v = e = f = s = h = "" }
    /^Package:/ { p = $2 } /^Version:/ { v = $2 } /^Essential:/ { e = $2 }
    /^Filename:/ { f = $2 } /^Size:/ { s = $2 } /^SHA256:/ { h = $2 }
    /^$/ { flush() } END { flush() }'
}
describe <"$work/full" >"$work/full.info"
[ "$(wc -l <"$work/full.info")" -eq "$(wc -l <"$work/full")" ] || die "apt-cache show did not describe every package of the closure"
: >"$work/deny"
while read -r pkg ver ess _; do
  if [[ $pkg =~ $DENY_RE ]] || [ "$ess" = yes ]; then echo "$pkg $ver" >>"$work/deny"; fi
done <"$work/full.info"

# Pass 2: the denied packages as installed (their Depends dropped, Provides kept).
if [ -s "$work/deny" ]; then
  args=()
  while read -r pkg ver; do args+=("$pkg=$ver"); done <"$work/deny"
  apt-cache show "${args[@]}" | awk '
    /^Package:/ { skip = ($2 in seen); seen[$2] = 1; in_stanza = 1 }
    /^$/ { if (in_stanza && !skip) { print "Status: install ok installed"; print "" } in_stanza = 0; next }
    !skip && /^(Package|Version|Architecture|Multi-Arch|Provides|Priority|Section|Essential):/ { print }
    END { if (in_stanza && !skip) { print "Status: install ok installed"; print "" } }'
fi >"$work/dpkg/status"
simulate >"$work/closure"

: >"$work/want"
while read -r pkg ver; do
  if [[ $pkg =~ $DENY_RE ]] || grep -qx "$pkg $ver" "$work/deny"; then
    die "$pkg is denied but still in the closure (fake dpkg status not honoured?)"
  fi
  [[ $pkg =~ $DROP_RE ]] && continue
  echo "$pkg $ver" >>"$work/want"
done <"$work/closure"
sort -o "$work/want" "$work/want"

for p in "${ROOTS[@]}"; do
  grep -q "^$p " "$work/want" || die "root package $p is not in the closure"
done

# Download what is missing into $out/debs; drop .debs that are not wanted.
mkdir -p "$out/debs"
describe <"$work/want" >"$work/want.info"
[ "$(wc -l <"$work/want.info")" -eq "$(wc -l <"$work/want")" ] || die "apt-cache show did not describe every wanted package"
declare -A keep=()
missing=()
while read -r pkg ver _ fname size sha; do
  [ -n "$fname" ] && [ -n "$size" ] && [ -n "$sha" ] || die "no Filename/Size/SHA256 for $pkg=$ver"
  base=${fname##*/}
  keep[$base]=1
  if [ ! -f "$out/debs/$base" ] || [ "$(sha256sum "$out/debs/$base" | cut -d' ' -f1)" != "$sha" ]; then
    rm -f "$out/debs/$base"
    missing+=("$pkg=$ver")
  fi
done <"$work/want.info"
if [ ${#missing[@]} -gt 0 ]; then
  log "downloading ${#missing[@]} packages"
  dl_opts=()
  [ "$(id -u)" -ne 0 ] || dl_opts=(-o APT::Sandbox::User=root)
  (cd "$work/archives" && apt-get -q "${dl_opts[@]}" download "${missing[@]}" >"$work/download.log" 2>&1) || {
    cat "$work/download.log" >&2; die "apt-get download failed (is the mirror reachable?)"; }
fi
: >"$work/manifest"
while read -r pkg ver _ fname size sha; do
  base=${fname##*/}
  if [ ! -f "$out/debs/$base" ]; then
    # apt-get download names a file by its version with the epoch ("1%3a1.2.13..."),
    # the archive's Filename without it.
    if [ ! -f "$work/archives/$base" ] && [[ $ver == *:* ]]; then
      epoch_name="${pkg}_${ver/:/%3a}_${base##*_}"
      [ -f "$work/archives/$epoch_name" ] && mv "$work/archives/$epoch_name" "$work/archives/$base"
    fi
    [ -f "$work/archives/$base" ] || die "apt-get download produced no $base for $pkg=$ver"
    [ "$(sha256sum "$work/archives/$base" | cut -d' ' -f1)" = "$sha" ] ||
      die "$base: SHA256 does not match the archive's"
    mv "$work/archives/$base" "$out/debs/$base"
  fi
  dpkg-deb --info "$out/debs/$base" >/dev/null || die "$out/debs/$base is not a valid .deb"
  echo "$pkg $ver $size $base" >>"$work/manifest"
done <"$work/want.info"
for f in "$out/debs"/*.deb; do
  [ -e "$f" ] || continue
  [ -n "${keep[${f##*/}]:-}" ] || { log "removing stale ${f##*/}"; rm -f "$f"; }
done
awk '{print $1, $2, $3}' "$work/manifest" >"$out/debs/MANIFEST"

echo "== packages carried (.gpu/debs):"
awk '{printf "  %-28s %-24s %8.1f KiB\n", $1, $2, $3/1024; t+=$3} END {printf "  %d packages, %.2f MiB of .deb files\n", NR, t/1048576}' "$work/manifest"
echo "== left to the GPU machine (not carried):"
awk '{print $1}' "$work/deny" | sort | tr '\n' ' ' | fold -s -w 100 | sed 's/^/  /'; echo
dropped=$(awk '{print $1}' "$work/closure" | grep -E "$DROP_RE" | tr '\n' ' ' || true)
echo "== dropped as not needed: ${dropped:-none}"

# Proof: unpack into a throwaway prefix exactly as the GPU machine will, then
# check it with env.sh's environment.
log "checking: unpack.sh into a temporary prefix"
"$here/unpack.sh" "$work/prefix" "$out/debs" >"$work/unpack.log" 2>&1 || {
  cat "$work/unpack.log" >&2; die "unpack.sh failed"; }
(
  set +u
  # shellcheck source=/dev/null
  . "$here/env.sh" "$work/prefix" || exit 1
  set -u
  p=$ADAPTERD_GPU_PREFIX
  modules="libutf8proc libxxhash libzip openssl zlib absl_strings"
  if [ "$profile" = model ]; then
    for m in $modules; do
      "$PKG_CONFIG" --cflags --libs "$m" >/dev/null || { echo "pkg-config cannot resolve $m" >&2; exit 1; }
    done
    [ -f "$p/usr/lib/x86_64-linux-gnu/cmake/CLI11/CLI11Config.cmake" ] || [ -n "$(find "$p" -name CLI11Config.cmake)" ] ||
      { echo "no CLI11Config.cmake" >&2; exit 1; }
    exit 0
  fi
  "$p/bin/protoc" --version | grep -q '^libprotoc 3\.21\.' || { echo "protoc does not run" >&2; exit 1; }
  printf 'syntax = "proto3"; package t; message M { int32 a = 1; } service S { rpc R(M) returns (M); }\n' >"$work/t.proto"
  mkdir -p "$work/gen"
  "$p/bin/protoc" -I"$work" --cpp_out="$work/gen" --grpc_out="$work/gen" \
    --plugin=protoc-gen-grpc="$p/usr/bin/grpc_cpp_plugin" "$work/t.proto" ||
    { echo "protoc + grpc_cpp_plugin failed" >&2; exit 1; }
  [ -s "$work/gen/t.grpc.pb.cc" ] || { echo "grpc_cpp_plugin produced nothing" >&2; exit 1; }
  for m in grpc++ protobuf libmicrohttpd gtest gmock benchmark $modules; do
    "$PKG_CONFIG" --cflags --libs "$m" >/dev/null || { echo "pkg-config cannot resolve $m" >&2; exit 1; }
  done
  [ "$("$PKG_CONFIG" --variable=prefix grpc++)" = "$p/usr" ] || { echo "grpc++.pc not relocated" >&2; exit 1; }
) || die "the unpacked prefix does not work (see above)"

size=$(du -sb "$out" | cut -f1)
awk -v o="$out" -v s="$size" -v m="$max_mib" 'BEGIN { printf "== carried: %s = %d bytes = %.2f MiB (limit %s MiB)\n", o, s, s / 1048576, m }'
[ "$size" -le $((max_mib * 1048576)) ] || die "$out is larger than $max_mib MiB"
echo "prepare.sh: OK. Carry '${out#"$repo"/}'; on the GPU machine: scripts/gpu/unpack.sh PREFIX && source scripts/gpu/env.sh PREFIX"
