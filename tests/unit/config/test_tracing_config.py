"""The ``tracing`` settings: read from the file, checked as component-base checks them."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from kubelet.config import (
    KubeletConfiguration,
    TracingConfiguration,
    load_config_file,
    resolve,
    validate,
)

HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


def _with(endpoint: str | None = None, rate: int | None = None) -> KubeletConfiguration:
    return attrs.evolve(KubeletConfiguration(), tracing=TracingConfiguration(endpoint, rate))


def test_the_file_sets_tracing_and_no_warning_names_it(tmp_path: Path) -> None:
    path = tmp_path / "kubelet.yaml"
    path.write_text(
        HEADER + "tracing:\n  endpoint: otel.example:4317\n  samplingRatePerMillion: 250\n"
    )
    assert load_config_file(path).config.tracing == TracingConfiguration("otel.example:4317", 250)
    options = resolve(["--config", str(path)], hostname=lambda: "n")
    assert not any("tracing" in warning for warning in options.warnings)


def test_no_tracing_section_means_off() -> None:
    assert KubeletConfiguration().tracing is None


@pytest.mark.parametrize(
    ("endpoint", "rate", "expected"),
    [
        ("localhost:4317", 0, []),
        ("unix:///run/otel.sock", 1_000_000, []),
        ("unix-abstract:otel", None, []),
        (None, -1, [("tracing.samplingRatePerMillion", "sampling rate must be positive")]),
        (
            None,
            1_000_001,
            [
                (
                    "tracing.samplingRatePerMillion",
                    "sampling rate per million must be less than or equal to one million",
                )
            ],
        ),
        (
            "http://collector:4318",
            None,
            [
                (
                    "tracing.endpoint",
                    "unsupported scheme: http.  Options are none, dns, unix, or unix-abstract."
                    "  See https://github.com/grpc/grpc/blob/master/doc/naming.md",
                )
            ],
        ),
    ],
)
def test_validation_as_upstream(
    endpoint: str | None, rate: int | None, expected: list[tuple[str, str]]
) -> None:
    assert validate(_with(endpoint, rate)) == expected
