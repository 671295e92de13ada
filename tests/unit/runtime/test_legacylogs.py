"""Making and removing a container's legacy log symlink; failures are only logged."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from kubelet.runtime.legacylogs import link_container_log, unlink_container_log

CID = "0123456789abcdef"


def test_link_points_at_the_log_and_unlink_removes_it(tmp_path: Path) -> None:
    log_file = tmp_path / "pods" / "0.log"
    log_file.parent.mkdir()
    log_file.write_text("hello\n")
    links = tmp_path / "containers"
    links.mkdir()
    link_container_log(str(links), CID, "app", "web", "default", str(log_file))
    link = links / f"web_default_app-{CID}.log"
    assert os.readlink(link) == str(log_file)
    assert link.read_text() == "hello\n"
    labels = {
        "io.kubernetes.pod.name": "web",
        "io.kubernetes.pod.namespace": "default",
        "io.kubernetes.container.name": "app",
    }
    unlink_container_log(str(links), CID, labels)
    assert not link.is_symlink()
    unlink_container_log(str(links), CID, labels)  # already gone: fine


def test_unlink_falls_back_to_the_given_names(tmp_path: Path) -> None:
    link = tmp_path / f"web_default_app-{CID}.log"
    link.symlink_to(tmp_path / "gone.log")
    unlink_container_log(str(tmp_path), CID, {}, container_name="app", pod_name="web",
                         namespace="default")  # fmt: skip
    assert not link.is_symlink()


def test_no_link_to_a_log_that_does_not_exist(tmp_path: Path) -> None:
    link_container_log(str(tmp_path), CID, "app", "web", "default", str(tmp_path / "none.log"))
    assert list(tmp_path.iterdir()) == []


def test_a_failed_link_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log_file = tmp_path / "0.log"
    log_file.write_text("")
    with caplog.at_level(logging.ERROR):
        link_container_log(str(tmp_path / "missing"), CID, "app", "web", "ns", str(log_file))
    assert "Failed to create legacy symbolic link" in caplog.text


def test_no_directory_no_link(tmp_path: Path) -> None:
    log_file = tmp_path / "0.log"
    log_file.write_text("")
    link_container_log("", CID, "app", "web", "ns", str(log_file))
    unlink_container_log("", CID, {})
    assert [p.name for p in tmp_path.iterdir()] == ["0.log"]
