#!/usr/bin/env bash
# Regenerate the CRI Python stubs from proto/cri_api.proto.
#
#   scripts/gen-proto.sh [OUT_DIR [PR_OUT_DIR]]
#   (default: kubelet/cri, kubelet/server/podresources, and kubelet/cm/dra and
#   kubelet/cm/devices for the DRA and device plugin APIs; with OUT_DIR, those go to
#   its podresources/, dra/ and devices/ subdirectories)
#
# Needs the dev extra (grpcio-tools, grpclib's protoc plugin). The stubs are committed;
# tests/unit/test_proto_stubs.py regenerates them into a temporary directory and fails if
# the committed ones differ, so run this after every change to the .proto file.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$ROOT/kubelet/cri}"
PY="${PYTHON:-python3}"
PLUGIN="$(dirname "$(command -v "$PY")")/protoc-gen-grpclib_python"
[ -x "$PLUGIN" ] || PLUGIN="$(command -v protoc-gen-grpclib_python)"
mkdir -p "$OUT"
"$PY" -m grpc_tools.protoc -I "$ROOT/proto" \
  --python_out="$OUT" --pyi_out="$OUT" \
  --plugin=protoc-gen-grpclib_python="$PLUGIN" --grpclib_python_out="$OUT" \
  "$ROOT/proto/cri_api.proto"
# grpclib's plugin writes a top-level import; the stubs live inside a package.
sed -i 's/^import cri_api_pb2$/from . import cri_api_pb2/' "$OUT/cri_api_grpc.py"
# The pod-resources API (package v1), served by kubelet/server/podresources/.
if [ -n "${2:-}" ]; then PR_OUT="$2"
elif [ -n "${1:-}" ]; then PR_OUT="$OUT/podresources"
else PR_OUT="$ROOT/kubelet/server/podresources"; fi
mkdir -p "$PR_OUT"
"$PY" -m grpc_tools.protoc -I "$ROOT/proto" \
  --python_out="$PR_OUT" --pyi_out="$PR_OUT" \
  --plugin=protoc-gen-grpclib_python="$PLUGIN" --grpclib_python_out="$PR_OUT" \
  "$ROOT/proto/podresources_api.proto"
sed -i 's/^import podresources_api_pb2$/from . import podresources_api_pb2/' "$PR_OUT/podresources_api_grpc.py"
# The DRA kubelet plugin API (v1 and v1beta1), spoken by kubelet/cm/dra/.
if [ -n "${1:-}" ]; then DRA_OUT="$OUT/dra"
else DRA_OUT="$ROOT/kubelet/cm/dra"; fi
mkdir -p "$DRA_OUT"
for v in v1 v1beta1; do
  "$PY" -m grpc_tools.protoc -I "$ROOT/proto" \
    --python_out="$DRA_OUT" --pyi_out="$DRA_OUT" \
    --plugin=protoc-gen-grpclib_python="$PLUGIN" --grpclib_python_out="$DRA_OUT" \
    "$ROOT/proto/dra_${v}_api.proto"
  sed -i "s/^import dra_${v}_api_pb2\$/from . import dra_${v}_api_pb2/" "$DRA_OUT/dra_${v}_api_grpc.py"
done
# The DRA device health API (package v1alpha1), watched by kubelet/cm/dra/.
"$PY" -m grpc_tools.protoc -I "$ROOT/proto" \
  --python_out="$DRA_OUT" --pyi_out="$DRA_OUT" \
  --plugin=protoc-gen-grpclib_python="$PLUGIN" --grpclib_python_out="$DRA_OUT" \
  "$ROOT/proto/dra_health_v1alpha1_api.proto"
sed -i 's/^import dra_health_v1alpha1_api_pb2$/from . import dra_health_v1alpha1_api_pb2/' \
  "$DRA_OUT/dra_health_v1alpha1_api_grpc.py"
# The device plugin API (package v1beta1), spoken by kubelet/cm/devices/.
if [ -n "${1:-}" ]; then DP_OUT="$OUT/devices"
else DP_OUT="$ROOT/kubelet/cm/devices"; fi
mkdir -p "$DP_OUT"
"$PY" -m grpc_tools.protoc -I "$ROOT/proto" \
  --python_out="$DP_OUT" --pyi_out="$DP_OUT" \
  --plugin=protoc-gen-grpclib_python="$PLUGIN" --grpclib_python_out="$DP_OUT" \
  "$ROOT/proto/deviceplugin_api.proto"
sed -i 's/^import deviceplugin_api_pb2$/from . import deviceplugin_api_pb2/' "$DP_OUT/deviceplugin_api_grpc.py"
# The plugin registration API (kubelet/pluginmanager/) and the CSI node API (kubelet/csi/).
gen_into() {  # gen_into PROTO_BASENAME DEFAULT_DIR SUBDIR
  local out
  if [ -n "${1:-}" ] && [ -n "$OUT_GIVEN" ]; then out="$OUT/$3"; else out="$2"; fi
  mkdir -p "$out"
  "$PY" -m grpc_tools.protoc -I "$ROOT/proto" \
    --python_out="$out" --pyi_out="$out" \
    --plugin=protoc-gen-grpclib_python="$PLUGIN" --grpclib_python_out="$out" \
    "$ROOT/proto/$1.proto"
  sed -i "s/^import $1_pb2\$/from . import $1_pb2/" "$out/$1_grpc.py"
}
OUT_GIVEN="${1:-}"
gen_into pluginregistration_api "$ROOT/kubelet/pluginmanager" pluginmanager
gen_into csi "$ROOT/kubelet/csi" csi
