"""``--config-dir``: drop-ins merged over ``--config`` in lexical order, flags winning."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelet.config import ConfigError, Options, encode, resolve
from kubelet.config.dropins import merge_patch

HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


def run(*argv: str) -> Options:
    return resolve(list(argv), hostname=lambda: "node")


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    config = tmp_path / "kubelet.yaml"
    config.write_text(
        HEADER + "maxPods: 50\nclusterDNS: [10.0.0.10, 10.0.0.11]\n"
        "evictionHard: {memory.available: 100Mi}\nfeatureGates: {KubeletPSI: false}\n"
    )
    drop = tmp_path / "kubelet.conf.d"
    drop.mkdir()
    return config, drop


def test_dropins_merge_in_lexical_order_over_the_file(layout: tuple[Path, Path]) -> None:
    config, drop = layout
    (drop / "20-pods.conf").write_text(HEADER + "maxPods: 70\n")
    (drop / "10-pods.conf").write_text(HEADER + "maxPods: 60\nsyncFrequency: 30s\n")
    (drop / "30-dns.conf").write_text(HEADER + "clusterDNS: [10.0.0.12]\n")
    (drop / "40-maps.conf").write_text(
        HEADER + "evictionHard: {nodefs.available: 5%}\nfeatureGates: {KubeletPSI: true}\n"
    )
    (drop / "50-ignored.yaml").write_text(HEADER + "maxPods: 1\n")  # not *.conf
    options = run(f"--config={config}", f"--config-dir={drop}")
    assert options.config.max_pods == 70  # 20- after 10-
    assert options.config.sync_frequency == 30.0
    assert options.config.cluster_dns == ("10.0.0.12",)  # lists are replaced
    assert options.config.eviction_hard == {"memory.available": "100Mi", "nodefs.available": "5%"}
    assert options.config.feature_gates == {"KubeletPSI": True}
    assert encode(options.config)["maxPods"] == 70  # /configz serves the merged result


def test_flags_win_over_dropins(layout: tuple[Path, Path]) -> None:
    config, drop = layout
    (drop / "10.conf").write_text(HEADER + "maxPods: 60\n")
    options = run(f"--config={config}", f"--config-dir={drop}", "--max-pods=80")
    assert options.config.max_pods == 80


def test_subdirectories_are_walked_in_lexical_order(layout: tuple[Path, Path]) -> None:
    config, drop = layout
    (drop / "a").mkdir()
    (drop / "a" / "10.conf").write_text(HEADER + "maxPods: 10\nrunOnce: false\n")
    (drop / "b.conf").write_text(HEADER + "maxPods: 20\n")
    (drop / "c").mkdir()
    (drop / "c" / "x.conf").write_text(HEADER + "maxPods: 30\n")
    assert run(f"--config={config}", f"--config-dir={drop}").config.max_pods == 30
    (drop / "c" / "x.conf").unlink()
    assert run(f"--config={config}", f"--config-dir={drop}").config.max_pods == 20


def test_dropins_without_a_config_file_apply_over_the_flag_defaults(tmp_path: Path) -> None:
    (tmp_path / "10.conf").write_text(HEADER + "maxPods: 12\nstaticPodPath: manifests\n")
    options = run(f"--config-dir={tmp_path}")
    assert options.config.max_pods == 12
    assert options.config.read_only_port == 10255  # the legacy flag default stays
    assert options.config.static_pod_path == str(tmp_path / "manifests")  # relative to it


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\nmaxPods: 3\n",
         "apiVersion: no kind"),
        ("kind: KubeletConfiguration\nmaxPods: 3\n", "apiVersion: must be"),
        (HEADER + "maxPod: 3\n", "maxPod: unknown field"),
        (HEADER + "maxPods: many\n", "maxPods: expected an integer"),
        ("", "the config file is empty"),
    ],
)  # fmt: skip
def test_a_bad_dropin_is_named(layout: tuple[Path, Path], body: str, expected: str) -> None:
    config, drop = layout
    (drop / "10.conf").write_text(body)
    with pytest.raises(ConfigError) as exc:
        run(f"--config={config}", f"--config-dir={drop}")
    assert str(exc.value).startswith(f"{drop / '10.conf'}: {expected}"), str(exc.value)


def test_a_missing_directory_stops_start_up(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        run(f"--config-dir={tmp_path / 'nope'}")
    assert "cannot read the drop-in directory" in str(exc.value)


def test_a_merged_value_that_does_not_validate_names_both(layout: tuple[Path, Path]) -> None:
    config, drop = layout
    (drop / "10.conf").write_text(HEADER + "imageGCLowThresholdPercent: 90\n")
    with pytest.raises(ConfigError) as exc:
        run(f"--config={config}", f"--config-dir={drop}")
    assert str(exc.value).startswith(f"{config} + {drop}: imageGCLowThresholdPercent"), str(
        exc.value
    )


def test_merge_patch_is_rfc_7386() -> None:
    assert merge_patch({"a": {"b": 1, "c": 2}, "l": [1]}, {"a": {"b": None, "d": 3}, "l": [2]}) == {
        "a": {"c": 2, "d": 3},
        "l": [2],
    }
    assert merge_patch({"a": 1}, {"a": {"b": 2}}) == {"a": {"b": 2}}
