#!/bin/bash
# Build an upstream kubelet to run side by side with ours (bench_kubelet.py --upstream).
#
#   bash scripts/upstream-kubelet.sh [DIR]      (default /var/tmp/upstream-kubelet)
#
# The only upstream source this machine can reach is Debian's: bookworm's `kubernetes`
# source package (Kubernetes 1.20.2, with its vendor tree), built with Debian's Go 1.19
# the way Debian builds kubectl from it (`make WHAT=cmd/kubelet` in GOPATH mode). When apt
# knows no source for it, adds deb-src twins of the machine's own configured deb sources;
# installs golang-go, rsync and dpkg-dev, and takes about 5 minutes on 2 cores. Prints the
# binary's path last. A 1.20 kubelet needs `--container-runtime=remote` (bench:
# --upstream-flag=--container-runtime=remote) and speaks CRI v1alpha2, which containerd
# 1.6 still serves.
set -euo pipefail

DIR=${1:-/var/tmp/upstream-kubelet}
SOURCES=/etc/apt/sources.list.d/upstream-kubelet-src
say() { echo "[upstream-kubelet] $*" >&2; }

# The machine's configured binary sources as source ones: each enabled deb822 stanza
# whose Types holds "deb" (into $SOURCES.sources), each one-line "deb" entry (into
# $SOURCES.list); mirrors, suites, components and keys unchanged.
source_twins() {
  python3 - "$SOURCES" <<'PY'
import glob, re, sys

def words(lines, name):
    for line in lines:
        key, _, value = line.partition(":")
        if key.strip().lower() == name:
            return value.lower().split()
    return []

stanzas, entries = [], []
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for stanza in re.split(r"\n[ \t]*\n", open(path).read()):
        lines = [l for l in stanza.splitlines() if l.strip() and not l.lstrip().startswith("#")]
        if "deb" in words(lines, "types") and words(lines, "enabled") != ["no"]:
            rest = [l for l in lines if l.partition(":")[0].strip().lower() != "types"]
            stanzas.append("\n".join(["Types: deb-src", *rest]))
for path in ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list"))]:
    try:
        lines = open(path).read().splitlines()
    except FileNotFoundError:
        continue
    entries += [re.sub(r"^\s*deb\s", "deb-src ", l) for l in lines if re.match(r"\s*deb\s", l)]
if not stanzas and not entries:
    sys.exit("no deb source is configured in /etc/apt")
if stanzas:
    open(sys.argv[1] + ".sources", "w").write("\n\n".join(stanzas) + "\n")
if entries:
    open(sys.argv[1] + ".list", "w").write("\n".join(entries) + "\n")
PY
}

mkdir -p "$DIR"
cd "$DIR"
if found=$(ls kubelet-* 2>/dev/null | head -1) && [ -n "$found" ]; then
  say "already built"
  echo "$DIR/$found"
  exit 0
fi
if [ -z "$(apt-cache showsrc kubernetes 2>/dev/null)" ]; then
  say "adding deb-src twins of the configured apt sources: $SOURCES.{sources,list}"
  source_twins
  apt-get -o DPkg::Lock::Timeout=300 update -qq
  [ -n "$(apt-cache showsrc kubernetes 2>/dev/null)" ] \
    || { say "the configured apt sources carry no kubernetes source package"; exit 1; }
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
