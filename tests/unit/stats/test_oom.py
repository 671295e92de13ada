"""Kernel log records and OOM kills (cAdvisor oomparser_test.go cases, restated)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import trio

from kubelet.stats import oom
from kubelet.stats.oom import (
    KmsgRecord,
    OomInstance,
    OomParser,
    parse_records,
    pod_uid_of_cgroup,
    system_oom_message,
    watch_kmsg,
)

START = "ruby invoked oom-killer: gfp_mask=0x201da, order=0, oom_score_adj=0"
END = "Killed process 19667 (evil-program2) total-vm:1460016kB, anon-rss:1414008kB, file-rss:4kB"
LEGACY = "Task in /mem2 killed as a result of limit of /mem3"
CONTAINER_LINE = (
    "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=ef807430361e,mems_allowed=0,"
    "oom_memcg=/kubepods/burstable/podfbdfe8e3-1c87-4ff2-907 c-b2ec8e25d012,"
    "task_memcg=/kubepods/burstable/podfbdfe8e3-1c87-4ff2-907c-b2ec8e25d012/ef807430361e,"
    "task=manager,pid=966,uid=0"
)
KERNEL_6_MEMCG = (
    "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
    "oom_memcg=/kubepods/burstable/pod4a0e1b8c-7a34-4cf1-9b49-0123456789ab,"
    "task_memcg=/kubepods/burstable/pod4a0e1b8c-7a34-4cf1-9b49-0123456789ab/c1,"
    "task=stress,pid=4242,uid=0"
)
KERNEL_6_GLOBAL = (
    "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,"
    "task_memcg=/kubepods/besteffort/pod4a0e1b8c-7a34-4cf1-9b49-0123456789ab/c1,"
    "task=hog,pid=77,uid=0"
)


def rec(text: str, t: float = 1.0) -> KmsgRecord:
    return KmsgRecord(6, 1, t, text)


def feed(*lines: str) -> list[OomInstance]:
    parser = OomParser()
    out = []
    for i, line in enumerate(lines):
        done = parser.feed(rec(line, float(i)))
        if done is not None:
            out.append(done)
    return out


def test_legacy_cgroup_oom() -> None:
    # TestStreamOOMs case 1: a memcg OOM on an old kernel
    (kill,) = feed(
        "memorymonster invoked oom-killer: gfp_mask=0xd0, order=0, oom_score_adj=0",
        "memorymonster cpuset=/ mems_allowed=0",
        "Task in /mem2 killed as a result of limit of /mem2",
        "memory: usage 980kB, limit 980kB, failcnt 4152239",
        "Killed process 13536 (memorymonster) total-vm:33558652kB, anon-rss:920kB, file-rss:452kB",
    )
    assert kill == OomInstance(
        pid=13536,
        process_name="memorymonster",
        time=4.0,
        container="/mem2",
        victim_container="/mem2",
    )
    assert system_oom_message(kill) is None  # a container's own limit: no SystemOOM event


def test_legacy_system_oom() -> None:
    (kill,) = feed(START, "Out of memory: Kill process 1532 (badsysprogram) score 919", END)
    assert (kill.pid, kill.process_name, kill.container, kill.victim_container) == (
        19667,
        "evil-program2",
        "/",
        "/",
    )
    assert system_oom_message(kill) == (
        "System OOM encountered, victim process: evil-program2, pid: 19667"
    )


def test_kernel5_line_upstream_sample() -> None:
    (kill,) = feed(START, CONTAINER_LINE)
    assert kill.container == (
        "/kubepods/burstable/podfbdfe8e3-1c87-4ff2-907c-b2ec8e25d012/ef807430361e"
    )
    assert kill.victim_container == "/kubepods/burstable/podfbdfe8e3-1c87-4ff2-907"
    assert (kill.pid, kill.process_name, kill.constraint) == (966, "manager", "CONSTRAINT_MEMCG")


def test_kernel6_memcg_kill_is_not_a_system_oom() -> None:
    (kill,) = feed(
        START, KERNEL_6_MEMCG, "Memory cgroup out of memory: Killed process 4242 (stress)"
    )
    assert kill.victim_container == "/kubepods/burstable/pod4a0e1b8c-7a34-4cf1-9b49-0123456789ab"
    assert system_oom_message(kill) is None


def test_kernel6_global_kill_names_the_pod() -> None:
    (kill,) = feed(
        "hog invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0",
        KERNEL_6_GLOBAL,
        "Out of memory: Killed process 77 (hog) total-vm:9000kB, anon-rss:8000kB",
    )
    assert (kill.victim_container, kill.pid, kill.process_name) == ("/", 77, "hog")
    uid = pod_uid_of_cgroup(kill.task_cgroup)
    assert uid == "4a0e1b8c-7a34-4cf1-9b49-0123456789ab"
    assert system_oom_message(kill, "default/hog") == (
        "System OOM encountered, victim process: hog, pid: 77, pod: default/hog"
    )


@pytest.mark.parametrize(
    "name",
    [
        "foo",
        "python3.4",
        "foo-bar",
        "Plex Media Server",
        "x86_64-pc-linux-gnu-c++-5.4.0",
        "[",
        "()",
        '"with quotes"',
    ],
)
def test_last_line_process_names(name: str) -> None:
    line = (
        f"Jan 21 22:01:49 localhost kernel: [62279.421192] Killed process 1234 ({name}) "
        "total-vm:1460016kB, anon-rss:1414008kB, file-rss:4kB"
    )
    (kill,) = feed(START, line)
    assert (kill.pid, kill.process_name) == (1234, name)


def test_lines_before_a_start_are_ignored() -> None:
    assert feed(END, LEGACY, CONTAINER_LINE) == []


def test_message_without_process() -> None:
    assert system_oom_message(OomInstance()) == "System OOM encountered"


def test_systemd_cgroup_pod_uid() -> None:
    path = (
        "/kubepods.slice/kubepods-burstable.slice/"
        "kubepods-burstable-pod4a0e1b8c_7a34_4cf1_9b49_0123456789ab.slice/cri-containerd-1.scope"
    )
    assert pod_uid_of_cgroup(path) == "4a0e1b8c-7a34-4cf1-9b49-0123456789ab"
    assert pod_uid_of_cgroup("/system.slice/ssh.service") is None


def test_kmsg_records() -> None:
    data = (
        "6,339,5140900,-;NET: Registered protocol family 10\n"
        " SUBSYSTEM=net\n"
        " DEVICE=+net:lo\n"
        "3,340,6000000,-;hog invoked oom-killer: gfp_mask=0x0\n"
        "garbage without header\n"
    )
    records = list(parse_records(data, boot_time=1000.0))
    assert records == [
        KmsgRecord(
            6, 339, 1005.1409, "NET: Registered protocol family 10\n SUBSYSTEM=net\n DEVICE=+net:lo"
        ),
        KmsgRecord(3, 340, 1006.0, "hog invoked oom-killer: gfp_mask=0x0"),
    ]


async def test_watcher_reads_without_blocking_and_reports_kills(
    autojump_clock: trio.abc.Clock,
) -> None:
    read_fd, write_fd = os.pipe()
    path = f"/proc/self/fd/{read_fd}"
    kills: list[OomInstance] = []
    lines = [
        f"3,1,1000000,-;{START}",
        "4,2,1000100,-;Out of memory: Kill process 19667 (evil-program2) score 1",
        f"3,3,1000200,-;{END}",
    ]
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: watch_kmsg(kills.append, path, boot=100.0))
            await trio.sleep(0.1)
            for line in lines:
                os.write(write_fd, (line + "\n").encode())
                await trio.sleep(0.05)
            with trio.fail_after(5):
                while not kills:
                    await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
    finally:
        os.close(read_fd)
        os.close(write_fd)
    (kill,) = kills
    assert (kill.pid, kill.process_name, kill.time) == (19667, "evil-program2", 101.0002)


async def test_the_watcher_decodes_no_record_that_cannot_start_a_kill(
    autojump_clock: trio.abc.Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed: list[str] = []
    real = oom.parse_records

    def counting(data: str, boot_time: float) -> Iterator[KmsgRecord]:
        parsed.append(data)
        return real(data, boot_time)

    monkeypatch.setattr(oom, "parse_records", counting)
    read_fd, write_fd = os.pipe()
    kills: list[OomInstance] = []
    noise = [f"6,{i},{1000000 + i},-;eth0: port {i} entered forwarding state" for i in range(20)]
    lines = [*noise, f"3,30,1000300,-;{START}", f"3,31,1000400,-;{END}", *noise]
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: watch_kmsg(kills.append, f"/proc/self/fd/{read_fd}"))
            for line in lines:
                await trio.sleep(0.05)
                os.write(write_fd, (line + "\n").encode())
            with trio.fail_after(5):
                while not kills:
                    await trio.sleep(0.01)
            await trio.sleep(0.5)
            nursery.cancel_scope.cancel()
    finally:
        os.close(read_fd)
        os.close(write_fd)
    assert [k.pid for k in kills] == [19667]
    assert len(parsed) == 2  # the kill's start and the record after it, not the noise
