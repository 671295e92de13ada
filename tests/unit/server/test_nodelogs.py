"""``/logs/``: the node's log files, listings, and the node log query with its file
fallback (no journald here), as upstream's kubelet answers them."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import pytest

from kubelet.server.asgi import Request, Response, StreamResponse
from kubelet.server.nodelogs import NodeLogs, Query, journal_args


async def fetch(logs: NodeLogs, path: str, query: str = "") -> tuple[int, str, bytes]:
    params: dict[str, list[str]] = {}
    for part in filter(None, query.split("&")):
        key, _, value = part.partition("=")
        params.setdefault(key, []).append(value)
    response = await logs.handle(Request("GET", path, params, {}))
    if isinstance(response, Response):
        location = dict(response.headers).get("Location", "")
        return response.status, location or response.content_type, response.body
    assert isinstance(response, StreamResponse)
    chunks: list[bytes] = []

    async def write(chunk: bytes) -> None:
        chunks.append(chunk)

    await response.produce(write)
    return response.status, response.content_type, b"".join(chunks)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    root = tmp_path / "var-log"
    (root / "containers").mkdir(parents=True)
    (root / "kubelet.log").write_text("kubelet line 1\nkubelet line 2\n")
    (root / "syslog").write_text("sys\n")
    (root / "containerd").mkdir()
    (root / "containerd" / "containerd.log").write_text("containerd says hi\n")
    (tmp_path / "secret").write_text("s3cr3t\n")
    os.symlink(tmp_path / "secret", root / "escape")
    os.symlink("../secret", root / "escape-relative")
    os.symlink("syslog", root / "messages")
    return root


async def test_files_and_listings(log_dir: Path) -> None:
    logs = NodeLogs(str(log_dir), journalctl=None)
    assert await fetch(logs, "/logs/kubelet.log") == (
        200, "text/plain; charset=utf-8", b"kubelet line 1\nkubelet line 2\n"
    )  # fmt: skip
    status, kind, body = await fetch(logs, "/logs/")
    assert (status, kind) == (200, "text/html; charset=utf-8")
    assert body.decode().splitlines() == [
        "<!doctype html>",
        '<meta name="viewport" content="width=device-width">',
        "<pre>",
        '<a href="containerd/">containerd/</a>',
        '<a href="containers/">containers/</a>',
        '<a href="escape">escape</a>',
        '<a href="escape-relative">escape-relative</a>',
        '<a href="kubelet.log">kubelet.log</a>',
        '<a href="messages">messages</a>',
        '<a href="syslog">syslog</a>',
        "</pre>",
    ]
    assert (await fetch(logs, "/logs/containerd"))[:2] == (301, "containerd/")
    assert (await fetch(logs, "/logs/messages"))[2] == b"sys\n"  # a link that stays inside


async def test_symlinks_out_of_the_log_directory_are_not_followed(log_dir: Path) -> None:
    logs = NodeLogs(str(log_dir), query_enabled=True, journalctl=None)
    for path in ("/logs/escape", "/logs/escape-relative", "/logs/../secret"):
        status, _, body = await fetch(logs, path)
        assert status == 404 and b"s3cr3t" not in body
    status, _, body = await fetch(logs, "/logs/", "query=/escape")
    assert status == 406 and b"s3cr3t" not in body


async def test_a_query_without_journald_reads_the_service_log_files(log_dir: Path) -> None:
    logs = NodeLogs(str(log_dir), query_enabled=True, journalctl=None)
    assert (await fetch(logs, "/logs/", "query=kubelet"))[2] == b"kubelet line 1\nkubelet line 2\n"
    # /var/log/<svc> is a directory: /var/log/<svc>/<svc>.log
    assert (await fetch(logs, "/logs/", "query=containerd"))[2] == b"containerd says hi\n"
    assert (await fetch(logs, "/logs/", "query=nothing"))[2] == b"\nlog not found for nothing\n"
    assert (await fetch(logs, "/logs/", "query=kubelet&tailLines=5"))[2] == (
        b"\noptions present and query resolved to log files for [kubelet]\n"
        b"try without specifying options\n"
    )
    assert (await fetch(logs, "/logs/", "query=/kubelet.log"))[2].startswith(b"kubelet line 1")


@pytest.mark.parametrize(
    ("path", "query", "status", "message"),
    [
        ("/logs/", "query=kubelet&sinceTime=yesterday", 400,
         'sinceTime: Invalid value: "yesterday": invalid time format'),
        ("/logs/", "query=", 400, 'query: Invalid value: []string{""}: query cannot be empty'),
        ("/logs/x", "query=kubelet", 406, "path not allowed in query mode"),
        ("/logs/", "query=/kubelet.log&tailLines=3", 406,
         'query: Invalid value: []string{"/kubelet.log"}: cannot specify file with options'),
        ("/logs/", "query=a;rm", 406, 'query: Invalid value: "a;rm": input contains unsafe '
         "characters"),
        ("/logs/", "query=kubelet&boot=1", 406, "boot: Invalid value: 1: must be less than 1"),
        ("/logs/", "query=kubelet&tailLines=100001", 406,
         "tailLines: Invalid value: 100001: must be between 0 and 100000, inclusive"),
        ("/logs/", "query=a&query=b&query=c&query=d&query=e", 406,
         "query: Too many: 5: must have at most 4 items"),
        ("/logs/", "tailLines=4", 406, "query: Required value: cannot be empty with options"),
    ],
)  # fmt: skip
async def test_query_errors(
    log_dir: Path, path: str, query: str, status: int, message: str
) -> None:
    logs = NodeLogs(str(log_dir), query_enabled=True, journalctl=None)
    assert await fetch(logs, path, query) == (
        status, "text/plain; charset=utf-8", message.encode() + b"\n"
    )  # fmt: skip


async def test_without_the_query_the_parameters_are_ignored(log_dir: Path) -> None:
    logs = NodeLogs(str(log_dir), query_enabled=False, journalctl=None)
    assert (await fetch(logs, "/logs/", "query=kubelet"))[1] == "text/html; charset=utf-8"


def test_journalctl_arguments_as_upstream() -> None:
    since = datetime.datetime(2026, 3, 5, 7, 8, 9, tzinfo=datetime.UTC)
    q = Query(services=("kubelet",), since=since, tail_lines=10, boot=-1, pattern="err")
    assert journal_args(q, ["kubelet", "containerd"]) == [
        "journalctl", "--utc", "--no-pager", "--output=short-precise",
        "--since=2026-3-5 7:8:9", "--pager-end", "--lines=10",
        "--unit=kubelet", "--unit=containerd", "--grep=err", "--boot", "-1",
    ]  # fmt: skip


async def test_a_listing_escapes_names_as_gos_file_server(tmp_path: Path) -> None:
    (tmp_path / "a&b'\"<c>.log").write_text("x\n")
    status, _, body = await fetch(NodeLogs(str(tmp_path), journalctl=None), "/logs/")
    assert status == 200
    assert body.decode().splitlines()[3] == (
        '<a href="a%26b%27%22%3Cc%3E.log">a&amp;b&#39;&#34;&lt;c&gt;.log</a>'
    )
