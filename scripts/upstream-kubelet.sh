#!/bin/bash
# Build an upstream kubelet to run side by side with ours (bench_kubelet.py --upstream).
#
#   bash scripts/upstream-kubelet.sh [DIR]      (default /var/tmp/upstream-kubelet)
#
# The only upstream source this machine can reach is Debian's: bookworm's `kubernetes`
# source package (Kubernetes 1.20.2, with its vendor tree), built with Debian's Go 1.19
# the way Debian builds kubectl from it (`make WHAT=cmd/kubelet` in GOPATH mode). Adds a
# deb-src entry for bookworm when apt has none, installs golang-go, rsync and dpkg-dev,
# and takes about 5 minutes on 2 cores. Prints the binary's path last. A 1.20 kubelet
# needs `--container-runtime=remote` (bench: --upstream-flag=--container-runtime=remote)
# and speaks CRI v1alpha2, which containerd 1.6 still serves.
set -euo pipefail

DIR=${1:-/var/tmp/upstream-kubelet}
SOURCES=/etc/apt/sources.list.d/upstream-kubelet-src.sources
say() { echo "[upstream-kubelet] $*" >&2; }

mkdir -p "$DIR"
cd "$DIR"
if found=$(ls kubelet-* 2>/dev/null | head -1) && [ -n "$found" ]; then
  say "already built"
  echo "$DIR/$found"
  exit 0
fi
if [ -z "$(apt-cache showsrc kubernetes 2>/dev/null)" ]; then
  say "adding deb-src for bookworm: $SOURCES"
  printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' >"$SOURCES"
  apt-get -o DPkg::Lock::Timeout=300 update -qq
fi
apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends golang-go rsync dpkg-dev >/dev/null
compgen -G "kubernetes-*/" >/dev/null || apt-get source -qq kubernetes >/dev/null 2>&1
SRC=$(ls -d "$DIR"/kubernetes-*/ | head -1)
say "building cmd/kubelet in $SRC"
cd "$SRC"
export GOPATH="$SRC/.go" CGO_ENABLED=0 HOME="$DIR/home" GOCACHE="$DIR/gocache"
mkdir -p "$GOPATH/src/k8s.io" "$HOME"
[ -L "$GOPATH/src/k8s.io/kubernetes" ] || ln -s ../../.. "$GOPATH/src/k8s.io/kubernetes"
make WHAT=cmd/kubelet >"$DIR/build.log" 2>&1 || { tail -20 "$DIR/build.log" >&2; exit 1; }
VERSION=$(_output/bin/kubelet --version | awk '{print $2}')
cp _output/bin/kubelet "$DIR/kubelet-$VERSION"
echo "$DIR/kubelet-$VERSION"
