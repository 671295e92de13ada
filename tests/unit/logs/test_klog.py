"""klog text and JSON output, -v levels, -vmodule, structured and task-wide pod fields."""

from __future__ import annotations

import datetime
import io
import json
import logging
import os
import re
from collections.abc import Iterator

import pytest
import trio
import trio.lowlevel

from kubelet.api import ObjectMeta, Pod
from kubelet.config import LoggingConfiguration, VModuleItem
from kubelet.logs import get_logger, log_fields, pod_fields, set_pod_fields, setup_logging
from kubelet.logs.klog import format_value, quote
from kubelet.logs.setup import root_level

POD = Pod(metadata=ObjectMeta(name="web", namespace="default", uid="uid-1"))
HEADER = re.compile(r"^([IWEF])(\d{4} \d\d:\d\d:\d\d\.\d{6}) +(\d+) (\S+:\d+)\] (.*)$")


@pytest.fixture
def capture() -> Iterator[tuple[io.StringIO, list[logging.Handler]]]:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    buf = io.StringIO()
    yield buf, root.handlers
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])


def lines(buf: io.StringIO) -> list[str]:
    return buf.getvalue().splitlines()


def test_text_header_and_fields(capture: tuple[io.StringIO, list[logging.Handler]]) -> None:
    buf, _ = capture
    setup_logging(LoggingConfiguration(), buf)
    get_logger("kubelet.t").info("Started container", container="app", restarts=2, ok=True)
    [line] = lines(buf)
    m = HEADER.match(line)
    assert m is not None, line
    severity, _, pid, caller, rest = m.groups()
    assert severity == "I" and int(pid) == os.getpid()
    assert caller.startswith("test_klog.py:")
    assert rest == '"Started container" container="app" restarts=2 ok=true'
    # pid right-aligned in 7 columns after one space, as klog
    assert line[21:29] == f" {os.getpid():7d}"


def test_severities_and_errors(capture: tuple[io.StringIO, list[logging.Handler]]) -> None:
    buf, _ = capture
    setup_logging(LoggingConfiguration(), buf)
    log = logging.getLogger("kubelet.t")
    log.warning("careful %s", "now")
    try:
        raise ValueError("bad value")
    except ValueError:
        log.exception("it broke")
    log.critical("fatal")
    out = lines(buf)
    assert out[0][0] == "W" and out[0].endswith('] "careful now"')
    assert out[1][0] == "E" and out[1].endswith('] "it broke" err="ValueError: bad value"')
    assert out[-1][0] == "F"


def test_quoting() -> None:
    assert quote('say "hi"\nbye') == r'"say \"hi\"\nbye"'
    assert format_value(None) == "null"
    assert format_value(1.5) == "1.5"
    assert format_value(ValueError("x")) == '"x"'


def test_verbosity_levels(capture: tuple[io.StringIO, list[logging.Handler]]) -> None:
    buf, _ = capture
    setup_logging(LoggingConfiguration(verbosity=2), buf)
    log = get_logger("kubelet.t")
    log.v(2).info("two")
    log.v(3).info("three")
    logging.getLogger("kubelet.t").debug("debug is v4")
    assert [line.rsplit("] ", 1)[1] for line in lines(buf)] == ['"two"']
    assert log.v(2).enabled() and not log.v(3).enabled()


def test_vmodule(capture: tuple[io.StringIO, list[logging.Handler]]) -> None:
    buf, _ = capture
    config = LoggingConfiguration(verbosity=0, vmodule=(VModuleItem("test_klog", 4),))
    setup_logging(config, buf)
    logging.getLogger("anything").debug("shown: this file is at v4")
    assert len(lines(buf)) == 1
    assert root_level(0, config.vmodule) == logging.DEBUG
    assert root_level(0) == logging.INFO and root_level(2) == logging.INFO - 2
    assert root_level(12) == 1


def test_pod_fields_follow_the_task(capture: tuple[io.StringIO, list[logging.Handler]]) -> None:
    buf, _ = capture
    setup_logging(LoggingConfiguration(), buf)
    log = logging.getLogger("kubelet.t")
    with pod_fields(POD):
        log.info("inside")
    log.info("outside")
    out = lines(buf)
    assert out[0].endswith('"inside" pod="default/web"')
    assert out[1].endswith('"outside"')


def test_pod_uid_from_v4(capture: tuple[io.StringIO, list[logging.Handler]]) -> None:
    buf, _ = capture
    setup_logging(LoggingConfiguration(verbosity=4), buf)
    with pod_fields(POD), log_fields(container="app"):
        get_logger("kubelet.t").info("x", attempt=1)
    assert lines(buf)[0].endswith('"x" pod="default/web" podUID="uid-1" container="app" attempt=1')


async def test_fields_are_per_task(capture: tuple[io.StringIO, list[logging.Handler]]) -> None:
    """A pod task's fields reach its children, never its siblings."""
    buf, _ = capture
    setup_logging(LoggingConfiguration(), buf)
    log = logging.getLogger("kubelet.t")

    async def pod_task(pod: Pod) -> None:
        set_pod_fields(pod)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(child)

    async def child() -> None:
        await trio.lowlevel.checkpoint()
        log.info("from child")

    async def other() -> None:
        await trio.lowlevel.checkpoint()
        log.info("sibling")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(pod_task, POD)
        nursery.start_soon(other)
    out = sorted(lines(buf), key=lambda line: "sibling" in line)
    assert out[0].endswith('"from child" pod="default/web"')
    assert out[1].endswith('"sibling"')


def test_json_format(capture: tuple[io.StringIO, list[logging.Handler]]) -> None:
    buf, _ = capture
    setup_logging(LoggingConfiguration(format="json", verbosity=1), buf)
    log = get_logger("kubelet.t")
    with pod_fields(POD):
        log.v(1).info("Synced pod", took=0.5)
    log.error("Failed", exc_info=RuntimeError("boom"))
    first, second = (json.loads(line) for line in lines(buf))
    assert list(first) == ["ts", "caller", "msg", "v", "pod", "took"]
    assert first["msg"] == "Synced pod" and first["v"] == 1
    assert first["pod"] == {"name": "web", "namespace": "default"}
    assert first["caller"].startswith("test_klog.py:")
    assert first["ts"] > 1e12  # milliseconds
    assert "v" not in second and second["err"] == "RuntimeError: boom"


def test_header_formats_each_second_as_strftime_would() -> None:
    # The header's "mmdd hh:mm:ss" is formatted once a second: across second boundaries,
    # microsecond carries and going back in time it must still be what strftime says.
    from kubelet.logs.klog import header

    base = 1_700_000_000.0
    stamps = [base + i * 0.37 for i in range(20)] + [base + 5.9999996, base + 5.0, base + 86400]
    for created in stamps:
        record = logging.LogRecord("k", logging.INFO, "/x/kubelet/pods/a.py", 7, "m", (), None)
        record.created = created
        when = datetime.datetime.fromtimestamp(created)
        want = f"I{when:%m%d %H:%M:%S}.{when.microsecond:06d} {record.process:7d} a.py:7] "
        assert header(record) == want


def test_quote_is_json_without_ascii_escapes() -> None:
    for text in ["", "plain", 'q"b\\s', "tab\tnl\n\x00\x1f", "é ü 中 \u2028 😀", "</script>"]:
        assert quote(text) == json.dumps(text, ensure_ascii=False)


def test_verbosity_change_after_setup_is_honoured(
    capture: tuple[io.StringIO, list[logging.Handler]],
) -> None:
    # The filter remembers each file's limit; raising -v on the live filter must count.
    from kubelet.logs.setup import VerbosityFilter

    buf, handlers = capture
    setup_logging(LoggingConfiguration(verbosity=0), buf)
    logging.getLogger().setLevel(1)
    log = get_logger("kubelet.t")
    log.v(2).info("hidden")
    (flt,) = [f for h in handlers for f in h.filters if isinstance(f, VerbosityFilter)]
    flt.verbosity = 2
    log.v(2).info("shown")
    assert [line.rsplit("] ", 1)[1] for line in lines(buf)] == ['"shown"']
