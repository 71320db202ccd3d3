#!/usr/bin/env bash
# Makes sure the local base image debian:bookworm-slim exists for podman.
# Base images cannot be pulled here, so it is built with debootstrap
# (--variant=minbase) and imported. The rootfs tarball is cached under
# $ADAPTERD_CACHE (default /var/cache/adapterd-ci) so that a rerun on a machine
# whose podman storage was wiped only re-imports it (seconds).
#
#   tests/deploy/image/ensure-base-image.sh            # idempotent
#   BASE_IMAGE=debian:bookworm-slim MIRROR=http://deb.debian.org/debian ...
set -euo pipefail

BASE_IMAGE=${BASE_IMAGE:-debian:bookworm-slim}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
CACHE=${ADAPTERD_CACHE:-/var/cache/adapterd-ci}
TARBALL="$CACHE/debian-bookworm-minbase.tar"

if podman image exists "$BASE_IMAGE"; then
  echo "ensure-base-image: $BASE_IMAGE present"
  exit 0
fi

mkdir -p "$CACHE"
if [[ ! -s "$TARBALL" ]]; then
  if [[ "$(id -u)" -ne 0 ]]; then
    echo "ensure-base-image: debootstrap needs root" >&2
    exit 1
  fi
  work=$(mktemp -d "$CACHE/rootfs.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  echo "ensure-base-image: debootstrap --variant=minbase bookworm ($MIRROR)"
  debootstrap --variant=minbase bookworm "$work/rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1 || {
    tail -n 30 "$work/debootstrap.log" >&2
    exit 1
  }
  # Slim it like the official -slim image: no apt lists, docs, man pages or
  # caches (the Dockerfiles run apt-get update themselves).
  rm -rf "$work/rootfs/var/lib/apt/lists/"* "$work/rootfs/var/cache/apt/"*.bin \
         "$work/rootfs/var/cache/apt/archives/"*.deb \
         "$work/rootfs/usr/share/doc/"* "$work/rootfs/usr/share/man/"* \
         "$work/rootfs/usr/share/info/"* "$work/rootfs/var/log/"*.log
  tar --numeric-owner -C "$work/rootfs" -cf "$TARBALL.tmp" .
  mv "$TARBALL.tmp" "$TARBALL"
fi

echo "ensure-base-image: importing $TARBALL as $BASE_IMAGE"
podman import --change 'CMD ["/bin/bash"]' "$TARBALL" "$BASE_IMAGE" >/dev/null
podman image exists "$BASE_IMAGE"
echo "ensure-base-image: $BASE_IMAGE imported"
