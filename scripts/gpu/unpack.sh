#!/usr/bin/env bash
# Unpacks the Debian bookworm .debs that scripts/gpu/prepare.sh fetched into a
# private prefix and relocates it, so that adapterd builds against it on a
# machine that has none of those libraries (the GPU machine). Writes nothing
# outside PREFIX; needs no root and no network.
#
#   scripts/gpu/unpack.sh PREFIX [DEBDIR]     # DEBDIR: <repo>/.gpu/debs
#   source scripts/gpu/env.sh PREFIX          # then configure (see env.sh)
#
# PREFIX must be an absolute path without spaces or shell/sed special
# characters; it is created if missing. The prefix is only valid at the path it
# was unpacked to (CMake configs and .pc files name it): to move it, unpack again.
#
# What it does:
#   1. dpkg-deb -x of every DEBDIR/*.deb into PREFIX (ar + tar when there is no
#      dpkg-deb).
#   2. Absolute symlinks (libz.so -> /lib/x86_64-linux-gnu/libz.so.1.2.13) whose
#      target is in PREFIX become relative ones; the others (e.g. OpenSSL's
#      certs -> /etc/ssl/certs) are left to the system.
#   3. In every *.cmake and *.pc file, absolute /usr and /lib/x86_64-linux-gnu
#      paths (prefix=/usr, -I/usr/include, _realOrig "/usr/lib/...",
#      /usr/lib/x86_64-linux-gnu/libbz2.so, ...) become PREFIX/usr and
#      PREFIX/lib/x86_64-linux-gnu.
#   3b. The multiarch headers in usr/include/x86_64-linux-gnu (OpenSSL's
#      opensslconf.h, configuration.h; gmp.h), which GCC looks for only in the
#      system's /usr/include/<arch>, are linked into PREFIX/usr/include.
#   4. PREFIX/bin gets wrappers for protoc, grpc_cpp_plugin, pkg-config and
#      pkgconf that run the bookworm binaries with PREFIX's libraries
#      (LD_LIBRARY_PATH) and, for pkg-config, PREFIX's .pc files.
#   5. Checks: protoc and grpc_cpp_plugin run, no CMake/.pc file still points
#      at /usr, no symlink under the library directories dangles.
#
# Idempotent: PREFIX/.adapterd-gpu-prefix records the debs' MANIFEST it was
# made from; a second run with the same debs does nothing, a run with other
# debs (or after an interrupted run) unpacks afresh. A non-empty PREFIX that
# unpack.sh did not make is refused, never deleted.
set -euo pipefail

die() { echo "unpack.sh: error: $*" >&2; exit 1; }
log() { echo "unpack.sh: $*" >&2; }

[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: $0 PREFIX [DEBDIR]"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
prefix=$1
debdir=${2:-$here/../../.gpu/debs}
arch=x86_64-linux-gnu

case "$prefix" in
  /*) ;;
  *) die "PREFIX must be an absolute path, not '$prefix'" ;;
esac
[[ $prefix =~ ^/[A-Za-z0-9._/+-]*$ ]] || die "PREFIX '$prefix' may only contain letters, digits and . _ / + -"
prefix=${prefix%/}
[ -n "$prefix" ] && [ "$prefix" != /usr ] && [ "$prefix" != /usr/local ] || die "refusing PREFIX '$1'"
[ -d "$debdir" ] || die "no deb directory $debdir (run scripts/gpu/prepare.sh on the bookworm host, and carry .gpu)"
debdir=$(cd "$debdir" && pwd)
shopt -s nullglob
debs=("$debdir"/*.deb)
shopt -u nullglob
[ ${#debs[@]} -gt 0 ] || die "no .deb files in $debdir"
[ -f "$debdir/MANIFEST" ] || die "$debdir/MANIFEST missing (run scripts/gpu/prepare.sh)"
for t in sed find readlink realpath tar cmp sha256sum; do
  command -v "$t" >/dev/null || die "'$t' not found"
done

stamp=$prefix/.adapterd-gpu-prefix
partial=$prefix/.adapterd-gpu-partial
want="manifest $(sha256sum "$debdir/MANIFEST" | cut -d' ' -f1) prefix $prefix unpack-v3"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ ! -e "$partial" ]; then
  log "$prefix is already unpacked from these debs: nothing to do"
  exit 0
fi
if [ -d "$prefix" ] && [ -n "$(ls -A "$prefix")" ]; then
  if [ -f "$stamp" ] || [ -e "$partial" ]; then
    log "removing the previous unpack in $prefix"
    rm -rf "$prefix"
  else
    die "$prefix is not empty and was not made by unpack.sh: choose another PREFIX or empty it"
  fi
fi
mkdir -p "$prefix"
: >"$partial"

# 1. Unpack.
for deb in "${debs[@]}"; do
  if command -v dpkg-deb >/dev/null; then
    dpkg-deb -x "$deb" "$prefix" || die "dpkg-deb -x $deb failed"
  else
    command -v ar >/dev/null || die "neither dpkg-deb nor ar found: cannot unpack $deb"
    member=$(ar t "$deb" | grep '^data\.tar') || die "$deb has no data.tar member"
    case "$member" in
      *.xz) ar p "$deb" "$member" | tar -xJ -C "$prefix" ;;
      *.zst) ar p "$deb" "$member" | tar --zstd -x -C "$prefix" ;;
      *.gz) ar p "$deb" "$member" | tar -xz -C "$prefix" ;;
      *) ar p "$deb" "$member" | tar -x -C "$prefix" ;;
    esac || die "unpacking $deb failed"
  fi
done
log "unpacked ${#debs[@]} packages into $prefix"

# 2. Absolute symlinks -> relative, when the target is inside PREFIX.
n_rel=0
n_sys=0
while IFS= read -r -d '' link; do
  target=$(readlink "$link")
  if [ -e "$prefix$target" ] || [ -L "$prefix$target" ]; then
    rel=$(realpath -m -s --relative-to="$(dirname "$link")" "$prefix$target")
    ln -sfn "$rel" "$link"
    n_rel=$((n_rel + 1))
  else
    n_sys=$((n_sys + 1))
  fi
done < <(find "$prefix" -type l -lname '/*' -print0)
log "made $n_rel absolute symlinks relative; left $n_sys pointing at the system (e.g. /etc/ssl/certs)"

# 3. Absolute paths in CMake configs and .pc files.
# A path is absolute where "/usr" or "/lib/<arch>" starts the line or follows a
# quote, blank, '=', ';', '(', ':', or -I / -L / -isystem; PREFIX's own paths
# ("<prefix>/usr/...") never match, since a letter or digit precedes their /usr.
reloc_re="(^|[\"' 	=;(:]|-I|-L|-isystem)(/usr|/lib/$arch)([/\"' 	;):]|\$)"
n_files=0
while IFS= read -r -d '' f; do
  if grep -qE "$reloc_re" "$f"; then
    # Twice: two matches that share a delimiter ("/usr;/usr/...") need two passes.
    sed -i -E "s#$reloc_re#\\1$prefix\\2\\3#g; s#$reloc_re#\\1$prefix\\2\\3#g" "$f"
    n_files=$((n_files + 1))
  fi
done < <(find "$prefix" -type f \( -name '*.cmake' -o -name '*.pc' \) -print0)
log "relocated absolute paths in $n_files CMake/.pc files"

# 3b. Multiarch headers (usr/include/x86_64-linux-gnu: openssl/opensslconf.h,
# openssl/configuration.h, gmp.h) are found by Debian's and Ubuntu's GCC only in
# the system's /usr/include/<arch>, never in PREFIX's: link each into
# PREFIX/usr/include, at the same relative path.
n_ma=0
if [ -d "$prefix/usr/include/$arch" ]; then
  while IFS= read -r -d '' f; do
    rel=${f#"$prefix/usr/include/$arch/"}
    dst=$prefix/usr/include/$rel
    if [ -e "$dst" ] || [ -L "$dst" ]; then
      cmp -s "$f" "$dst" || die "multiarch header $rel exists in both usr/include and usr/include/$arch, and they differ"
      continue
    fi
    mkdir -p "$(dirname "$dst")"
    ln -s "$(realpath -m -s --relative-to="$(dirname "$dst")" "$f")" "$dst"
    n_ma=$((n_ma + 1))
  done < <(find "$prefix/usr/include/$arch" \( -type f -o -type l \) -print0)
fi
log "linked $n_ma multiarch headers into $prefix/usr/include"

# 4. Wrappers for the build-time tools.
libpath="$prefix/usr/lib/$arch:$prefix/lib/$arch:$prefix/usr/lib"
pcpath="$prefix/usr/lib/$arch/pkgconfig:$prefix/usr/share/pkgconfig:$prefix/usr/lib/pkgconfig"
mkdir -p "$prefix/bin"
# protoc and grpc_cpp_plugin only where they were carried (not in the model-only
# set: prepare.sh's ADAPTERD_GPU_PROFILE=model); pkgconf always.
for tool in protoc grpc_cpp_plugin pkgconf; do
  if [ "$tool" != pkgconf ] && [ ! -e "$prefix/usr/bin/$tool" ]; then continue; fi
  [ -x "$prefix/usr/bin/$tool" ] || die "$prefix/usr/bin/$tool missing: is its package in $debdir?"
  {
    echo '#!/bin/sh'
    echo "# Written by scripts/gpu/unpack.sh: bookworm's $tool with the libraries of $prefix."
    echo "LD_LIBRARY_PATH=\"$libpath\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}\""
    echo 'export LD_LIBRARY_PATH'
    if [ "$tool" = pkgconf ]; then
      echo "PKG_CONFIG_LIBDIR=\"\${PKG_CONFIG_LIBDIR:-$pcpath}\""
      echo 'export PKG_CONFIG_LIBDIR'
    fi
    echo "exec \"$prefix/usr/bin/$tool\" \"\$@\""
  } >"$prefix/bin/$tool"
  chmod 755 "$prefix/bin/$tool"
done
ln -sfn pkgconf "$prefix/bin/pkg-config"

# 5. Checks.
if [ -e "$prefix/bin/protoc" ]; then
  "$prefix/bin/protoc" --version >/dev/null 2>&1 ||
    die "$prefix/bin/protoc does not run: $("$prefix/bin/protoc" --version 2>&1 | head -n3)"
  # grpc_cpp_plugin reads a CodeGeneratorRequest on stdin: empty input is a valid
  # empty request, so it must exit 0.
  "$prefix/bin/grpc_cpp_plugin" </dev/null >/dev/null 2>&1 ||
    die "$prefix/bin/grpc_cpp_plugin does not run: $("$prefix/bin/grpc_cpp_plugin" </dev/null 2>&1 | head -n3)"
  "$prefix/bin/pkg-config" --modversion protobuf >/dev/null ||
    die "$prefix/bin/pkg-config does not run or finds no protobuf.pc"
else
  "$prefix/bin/pkg-config" --modversion libutf8proc >/dev/null ||
    die "$prefix/bin/pkg-config does not run or finds no libutf8proc.pc"
fi
left=$(find "$prefix" -type f \( -name '*.cmake' -o -name '*.pc' \) -exec grep -lE "(^|[\"' 	=;(]|-I|-L)/usr/(lib|include|bin|share)" {} + || true)
[ -z "$left" ] || die "still pointing at /usr after relocation: $left"
dangling=$(find "$prefix/usr/lib" "$prefix/lib" "$prefix/usr/bin" -xtype l 2>/dev/null || true)
[ -z "$dangling" ] || die "dangling symlinks: $dangling"
[ ! -d "$prefix/usr/include/$arch/openssl" ] || [ -e "$prefix/usr/include/openssl/opensslconf.h" ] ||
  die "openssl/opensslconf.h is not reachable from $prefix/usr/include"

echo "$want" >"$stamp"
rm -f "$partial"
log "done: $prefix ($(du -sh "$prefix" | cut -f1)); now: source $here/env.sh $prefix"
