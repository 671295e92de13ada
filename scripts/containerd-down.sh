#!/usr/bin/env bash
# Stop the containerd started by scripts/containerd-up.sh.
#
#   sudo scripts/containerd-down.sh [--purge]
#
# 1. removes CRI pods and containers: first through scripts/cri-cleanup.py (when it and the
#    project venv exist, so CNI DEL releases pod IPs and netns), then with ctr for leftovers;
# 2. stops containerd by the PID in /run/containerd/containerd.pid only, after checking that
#    the PID really is containerd (never by process name);
# 3. --purge also deletes containerd's state and images (/var/lib/containerd, /run/containerd),
#    pod logs (/var/log/pods/*), the config files containerd-up.sh wrote and bridge cni0.
#    Packages stay installed. A log outside /run/containerd (CONTAINERD_LOG) is kept.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE=/run/containerd
SOCK=$STATE/containerd.sock
PIDFILE=$STATE/containerd.pid
PURGE=0
case ${1:-} in
  "") ;;
  --purge) PURGE=1 ;;
  -h|--help) sed -n '2,13s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
  *) echo "usage: $0 [--purge]" >&2; exit 2 ;;
esac
say() { echo "[containerd-down] $*"; }

[ "$(id -u)" = 0 ] || { say "ERROR: must run as root" >&2; exit 1; }

# Recorded PID, accepted only if it is a live containerd process.
pid=""
if [ -f "$PIDFILE" ]; then
  p=$(cat "$PIDFILE" 2>/dev/null || true)
  bin=$(command -v containerd 2>/dev/null || true)
  if [ -n "$p" ] && [ -n "$bin" ] && [ "$(readlink "/proc/$p/exe" 2>/dev/null)" = "$(readlink -f "$bin")" ]; then
    pid=$p
  else
    say "stale PID file (${p:-empty}), containerd not running"
  fi
else
  say "no PID file, containerd not running"
fi

if [ -n "$pid" ] && ctr --address "$SOCK" version >/dev/null 2>&1; then
  # CRI-level cleanup, if the project provides it
  if [ -x "$ROOT/.venv/bin/python" ] && [ -f "$ROOT/scripts/cri-cleanup.py" ]; then
    timeout 120 "$ROOT/.venv/bin/python" "$ROOT/scripts/cri-cleanup.py" \
      || say "cri-cleanup.py failed, falling back to ctr"
  fi
  # whatever is left in namespace k8s.io
  CTR=(ctr --address "$SOCK" -n k8s.io)
  tasks=$("${CTR[@]}" tasks ls -q 2>/dev/null || true)
  for t in $tasks; do "${CTR[@]}" tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true; done
  for t in $tasks; do
    for _ in $(seq 20); do "${CTR[@]}" tasks delete "$t" >/dev/null 2>&1 && break; sleep 0.1; done
  done
  for c in $("${CTR[@]}" containers ls -q 2>/dev/null || true); do
    "${CTR[@]}" containers delete "$c" >/dev/null 2>&1 || say "could not delete container $c"
  done
  [ -z "$tasks" ] || say "removed $(wc -w <<<"$tasks") leftover task(s) with ctr"
fi

if [ -n "$pid" ]; then
  say "stopping containerd pid $pid"
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 100); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
  if [ -d "/proc/$pid" ]; then
    say "pid $pid still alive after 10s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
fi
rm -f "$PIDFILE" "$SOCK" "$SOCK.ttrpc"

# network namespaces of pods the CRI could not remove
for ns in "$STATE"/io.containerd.grpc.v1.cri/netns/*; do
  [ -e "$ns" ] || continue
  umount "$ns" 2>/dev/null
  rm -f "$ns" && say "removed leftover netns $ns"
done

if [ "$PURGE" = 1 ]; then
  say "purging state, images, pod logs and config"
  # unmount leftover overlay/shm mounts first, deepest first, or rm -rf fails
  awk '$2 ~ "^/(run|var/lib)/containerd/" {print $2}' /proc/mounts | sort -r |
    while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
  rm -rf /var/lib/containerd /run/containerd /var/log/pods/* /etc/containerd/config.toml \
    /etc/cni/net.d/10-kubelet-test.conflist /etc/cni/net.d/99-loopback.conf
  if ip link show cni0 >/dev/null 2>&1; then ip link delete cni0 && say "deleted bridge cni0"; fi
fi
say "done"
