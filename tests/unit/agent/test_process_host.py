"""The process's Host: the legacy log links' directory is /var/log/containers unless the
environment moves it (kubelets on FakeRuntime beside a kubelet on the real runtime)."""

from __future__ import annotations

from kubelet.agent import CONTAINERS_LOG_DIR_ENV, process_host


def test_links_go_to_var_log_containers_by_default() -> None:
    assert process_host({}).containers_log_dir == "/var/log/containers"
    assert process_host({CONTAINERS_LOG_DIR_ENV: ""}).containers_log_dir == "/var/log/containers"


def test_the_environment_moves_the_links() -> None:
    host = process_host({CONTAINERS_LOG_DIR_ENV: "/tmp/bench/containers"})
    assert host.containers_log_dir == "/tmp/bench/containers"
