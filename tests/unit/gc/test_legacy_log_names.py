"""The legacy log symlink's name: upstream's format and its 251-character cut."""

from __future__ import annotations

import random
import string

from kubelet.gc import legacy_log_symlink
from kubelet.gc.logs import container_id_of_symlink


def _random(n: int, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(string.ascii_letters) for _ in range(n))


def test_name_is_pod_namespace_container_id() -> None:
    path = legacy_log_symlink("/var/log/containers", "abc123def456", "app", "web-node1", "kube")
    assert path == "/var/log/containers/web-node1_kube_app-abc123def456.log"
    assert container_id_of_symlink(path) == "abc123def456"


def test_long_names_are_cut_to_fit_an_ext4_file_name() -> None:
    # upstream's case: pod 128, namespace 10, container 70, ID 80 characters
    cid, container, pod, namespace = _random(80, 1), _random(70, 2), _random(128, 3), _random(10, 4)
    path = legacy_log_symlink("/foo/bar", cid, container, pod, namespace)
    full = f"{pod}_{namespace}_{container}-{cid}"
    assert path == "/foo/bar/" + full[:251] + ".log"
    assert len(path.rsplit("/", 1)[1]) == 255


def test_a_name_of_exactly_251_characters_is_kept_whole() -> None:
    pod = "p" * (251 - len("_ns_c-") - 64)
    path = legacy_log_symlink("/d", "i" * 64, "c", pod, "ns")
    assert path == f"/d/{pod}_ns_c-{'i' * 64}.log"
    assert path.endswith("i.log")
    longer = legacy_log_symlink("/d", "i" * 65, "c", pod, "ns")
    assert longer == path  # one more character is cut
