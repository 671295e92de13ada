#!/usr/bin/env bash
# Start a local CRI runtime for the kubelet: containerd + runc + a CNI bridge, on Debian
# without systemd and without any image registry. Safe to re-run: when everything is
# already in place it only re-checks (a second or two).
#
#   sudo scripts/containerd-up.sh [--log FILE]
#
# Environment:
#   POD_CIDR=10.88.0.0/16    pod subnet on bridge cni0 (no default route, no masquerade)
#   CONTAINERD_LOG=FILE      containerd's log (default /run/containerd/containerd.log);
#                            --log FILE wins over it. Only used when containerd is started.
#   SKIP_APT=1               fail instead of apt-installing missing packages
#
# Provides: socket /run/containerd/containerd.sock, PID in /run/containerd/containerd.pid,
# images registry.k8s.io/pause:3.9 (+:3.6) and docker.io/library/busybox:latest (+:1.35),
# built locally, in containerd namespace k8s.io. Stop with scripts/containerd-down.sh.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STATE=/run/containerd
SOCK=$STATE/containerd.sock
PIDFILE=$STATE/containerd.pid
LOG=${CONTAINERD_LOG:-$STATE/containerd.log}
CONF=/etc/containerd/config.toml
CNI_CONF_DIR=/etc/cni/net.d
CNI_CONF=$CNI_CONF_DIR/10-kubelet-test.conflist
CNI_BIN_DIR=/usr/lib/cni   # Debian's containernetworking-plugins; not /opt/cni/bin
POD_CIDR=${POD_CIDR:-10.88.0.0/16}
PAUSE_IMAGE=registry.k8s.io/pause:3.9
BUSYBOX_IMAGE=docker.io/library/busybox:latest
# dbus-daemon: the graceful-shutdown tests run a private bus with a fake logind
PKGS=(containerd runc containernetworking-plugins busybox-static gcc libc6-dev iproute2 dbus-daemon)
MARK='# written by scripts/containerd-up.sh'

usage() { sed -n '2,16s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }
while [ $# -gt 0 ]; do
  case $1 in
    --log) [ $# -ge 2 ] || { usage >&2; exit 2; }; LOG=$2; shift 2 ;;
    --log=*) LOG=${1#--log=}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done

T0=$EPOCHREALTIME
say() { printf '[containerd-up %5.1fs] %s\n' "$(awk -v a="$T0" -v b="$EPOCHREALTIME" 'BEGIN{print b-a}')" "$*"; }
die() { say "ERROR: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root"

# --- packages -------------------------------------------------------------------------
missing=()
for p in "${PKGS[@]}"; do
  [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" = "install ok installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  [ "${SKIP_APT:-0}" = 1 ] && die "missing packages: ${missing[*]} (SKIP_APT=1)"
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=300 update -qq
  # The postinst cannot start a service without systemd; we start containerd below.
  apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v containerd >/dev/null || die "containerd not installed"
[ -x "$CNI_BIN_DIR/bridge" ] || die "no CNI plugins in $CNI_BIN_DIR"
CONTAINERD_BIN=$(readlink -f "$(command -v containerd)")
say "packages ok: containerd $(containerd --version | awk '{print $3}'), runc $(runc --version | awk 'NR==1{print $3}')"

# --- kernel ---------------------------------------------------------------------------
# PID 1 is not systemd, so the cgroupfs driver is used on either cgroup version.
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then cgv=v2; else cgv=v1; fi
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || die "overlayfs unavailable"
say "cgroup $cgv, driver cgroupfs"

# --- configuration --------------------------------------------------------------------
mkdir -p /etc/containerd "$CNI_CONF_DIR" "$STATE" /var/log/pods
changed=0
# install_if_changed DEST MODE: copy stdin to DEST unless identical; sets changed=1
install_if_changed() {
  local tmp; tmp=$(mktemp)
  cat >"$tmp"
  if ! cmp -s "$tmp" "$1"; then install -m "$2" "$tmp" "$1"; changed=1; fi
  rm -f "$tmp"
}

# Keep one copy of the distribution's config, never of our own.
if [ -f "$CONF" ] && ! head -n1 "$CONF" | grep -qF "$MARK" && [ ! -f "$CONF.orig" ]; then
  cp "$CONF" "$CONF.orig"
fi
install_if_changed "$CONF" 0644 <<EOF
$MARK -- local CRI runtime, no registry
version = 2
root = "/var/lib/containerd"
state = "$STATE"

[grpc]
  address = "$SOCK"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  enable_selinux = false
  netns_mounts_under_state_dir = true
  # No CAP_SYS_RESOURCE here: a negative oom_score_adj (pause asks for -998) makes runc
  # fail with "can't get final child's PID from pipe: EOF". Clamp to containerd's own.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN_DIR"
    conf_dir = "$CNI_CONF_DIR"
    max_conf_num = 1
EOF

# Pods reach only the pod subnet and the host: no default route, no masquerading.
install_if_changed "$CNI_CONF" 0644 <<EOF
{
  "cniVersion": "1.0.0",
  "name": "kubelet-test",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$POD_CIDR"}]],
        "routes": [{"dst": "$POD_CIDR"}],
        "dataDir": "/var/lib/containerd/cni-ipam"
      }
    }
  ]
}
EOF
# Loopback needs no change tracking (the CRI plugin sets up lo itself anyway).
echo '{"cniVersion": "1.0.0", "name": "lo", "type": "loopback"}' >"$CNI_CONF_DIR/99-loopback.conf"
say "config ok (changed=$changed)"

# --- containerd -----------------------------------------------------------------------
# our_pid: print the recorded PID if it is a live containerd process, else fail.
our_pid() {
  local pid
  pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$CONTAINERD_BIN" ] || return 1
  echo "$pid"
}
answers() { [ -S "$SOCK" ] && ctr --address "$SOCK" version >/dev/null 2>&1; }
log_tail_die() { tail -n 30 "$LOG" >&2 || true; die "$1 (log: $LOG)"; }

if [ "$changed" = 1 ] && pid=$(our_pid); then
  say "config changed, restarting containerd pid $pid"
  kill -TERM "$pid"
  for _ in $(seq 50); do [ -d "/proc/$pid" ] || break; sleep 0.2; done
  [ ! -d "/proc/$pid" ] || kill -KILL "$pid"
  rm -f "$PIDFILE"
fi
if pid=$(our_pid); then
  say "containerd already running, pid $pid"
else
  answers && die "$SOCK is served by a containerd not started by this script; stop it first"
  rm -f "$SOCK" "$PIDFILE"
  mkdir -p "$(dirname "$LOG")"
  # setsid detaches containerd from our session; the inner shell records its own PID and
  # then execs containerd, so the PID file holds containerd's PID exactly.
  # Descriptors above 2 are closed first: started under `flock` (the e2e lock), containerd
  # would otherwise inherit the lock's descriptor and hold the lock for its whole life.
  setsid bash -c 'echo $$ >"$1"
    for fd in /proc/$$/fd/*; do fd=${fd##*/}; if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi; done
    exec containerd --config "$2" --log-level info' _ \
    "$PIDFILE" "$CONF" </dev/null >>"$LOG" 2>&1 &
  for _ in $(seq 50); do [ -s "$PIDFILE" ] && break; sleep 0.1; done
  pid=$(cat "$PIDFILE" 2>/dev/null) || die "containerd did not record its PID"
  say "started containerd pid $pid, log $LOG"
fi
for _ in $(seq 150); do
  answers && break
  our_pid >/dev/null || log_tail_die "containerd exited"
  sleep 0.2
done
answers || log_tail_die "no answer on $SOCK after 30s"
# Captured first: with pipefail, `ctr | grep -q` can fail when grep closes the pipe early.
plugins=$(ctr --address "$SOCK" plugins ls)
grep -q 'io.containerd.grpc.v1 *cri .*ok' <<<"$plugins" || log_tail_die "CRI plugin not ok"
say "socket $SOCK answers, CRI plugin ok"

# --- images ---------------------------------------------------------------------------
CTR=(ctr --address "$SOCK" -n k8s.io)
have_image() { local refs; refs=$("${CTR[@]}" images ls -q) && grep -qxF "$1" <<<"$refs"; }
BUILD=$(mktemp -d /tmp/containerd-up.XXXXXX)
trap 'rm -rf "$BUILD"' EXIT

if ! have_image "$PAUSE_IMAGE"; then
  say "building $PAUSE_IMAGE"
  cat >"$BUILD/pause.c" <<'EOF'
/* Pod sandbox process: wait for SIGINT/SIGTERM, reap children meanwhile. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
static void on_term(int s) { (void)s; _exit(0); }
static void on_child(int s) { (void)s; while (waitpid(-1, NULL, WNOHANG) > 0) {} }
int main(int argc, char **argv) {
  struct sigaction sa;
  if (argc > 1 && strcmp(argv[1], "-v") == 0) { puts("pause (local build)"); return 0; }
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_term;
  if (sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGTERM, &sa, NULL) < 0) return 1;
  sa.sa_handler = on_child;
  sa.sa_flags = SA_NOCLDSTOP;
  if (sigaction(SIGCHLD, &sa, NULL) < 0) return 2;
  for (;;) pause();
}
EOF
  gcc -static -O2 -s -o "$BUILD/pause" "$BUILD/pause.c"
  python3 "$HERE/oci_build.py" --out "$BUILD/pause.tar" \
    --name "$PAUSE_IMAGE" --name registry.k8s.io/pause:3.6 \
    --file "$BUILD/pause:/pause:0755" --entrypoint '["/pause"]' --user 65535:65535
  "${CTR[@]}" images import "$BUILD/pause.tar" >/dev/null
  # pinned, as the CRI does for the sandbox image, so image GC leaves it alone
  "${CTR[@]}" images label "$PAUSE_IMAGE" io.cri-containerd.pinned=pinned >/dev/null 2>&1 || true
fi

if ! have_image "$BUSYBOX_IMAGE"; then
  say "building $BUSYBOX_IMAGE"
  args=(--file /bin/busybox:/bin/busybox:0755)
  # one symlink per applet at its usual path (bin/sh, usr/bin/nc, ...)
  while read -r applet; do
    [ "$applet" = bin/busybox ] || args+=(--symlink "/$applet:/bin/busybox")
  done < <(/bin/busybox --list-full)
  python3 "$HERE/oci_build.py" --out "$BUILD/busybox.tar" \
    --name "$BUSYBOX_IMAGE" --name docker.io/library/busybox:1.35 "${args[@]}" \
    --dir /tmp:1777 --dir /root:0700 --dir /var/www:0755 --dir /proc --dir /sys --dir /dev \
    --text '/etc/passwd:0644:root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n' \
    --text '/etc/group:0644:root:x:0:\nnogroup:x:65534:\n' \
    --cmd '["sh"]'
  "${CTR[@]}" images import "$BUILD/busybox.tar" >/dev/null
fi

have_image "$PAUSE_IMAGE" && have_image "$BUSYBOX_IMAGE" || die "images missing after import"
refs=$("${CTR[@]}" images ls -q)
say "images: $(grep -E 'pause|busybox' <<<"$refs" | tr '\n' ' ')"

pid=$(our_pid) || die "containerd is not running"
say "containerd up: pid $pid, socket $SOCK"
echo "CONTAINERD_PID=$pid"
echo "CONTAINERD_SOCK=$SOCK"
