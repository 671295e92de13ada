"""A kubelet that no CSI driver registers with never loads the CSI protobuf or client."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CSI = ("kubelet.csi.csi_pb2", "kubelet.csi.csi_grpc", "kubelet.csi.client")


def test_a_kubelet_running_a_pod_without_csi_loads_no_csi_client() -> None:
    # a fresh interpreter: this one has loaded the CSI client for other tests
    test = "tests/integration/test_kubelet_lifecycle.py::test_static_pod_starts"
    code = (
        "import sys, pytest\n"
        f"rc = pytest.main(['-q', '-p', 'no:cacheprovider', {test!r}])\n"
        f"print(int(rc), sorted(m for m in {CSI!r} if m in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.stdout.splitlines()[-1] == "0 []", done.stdout + done.stderr
