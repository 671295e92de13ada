"""Which inotify events are read at once and which wait for the burst to end."""

from __future__ import annotations

import inotify_simple

from kubelet.sources.fileevents import Batch, sort_out

IN = inotify_simple.flags


def ev(mask: int, name: str = "") -> inotify_simple.Event:
    return inotify_simple.Event(1, mask, 0, name)


def wanted(name: str) -> bool:
    return not name.startswith(".")


def test_closed_after_writing_or_moved_in_is_ready() -> None:
    events = [ev(IN.CREATE, "a"), ev(IN.MODIFY, "a"), ev(IN.CLOSE_WRITE, "a"), ev(IN.MOVED_TO, "b")]
    assert sort_out(events, wanted) == Batch(frozenset({"a", "b"}))


def test_a_name_counts_by_its_last_event() -> None:
    events = [ev(IN.MOVED_TO, "a"), ev(IN.DELETE, "a"), ev(IN.DELETE, "b"), ev(IN.CLOSE_WRITE, "b")]
    assert sort_out(events, wanted) == Batch(frozenset({"b"}), unsettled=True)


def test_still_open_removed_or_changed_mode_waits() -> None:
    for mask in (IN.CREATE, IN.MODIFY, IN.DELETE, IN.MOVED_FROM, IN.ATTRIB):
        assert sort_out([ev(mask, "a")], wanted) == Batch(unsettled=True)


def test_dot_files_are_not_wanted_and_the_directory_itself_settles() -> None:
    assert sort_out([ev(IN.CLOSE_WRITE, ".a.tmp"), ev(IN.MODIFY, ".a.tmp")], wanted) == Batch()
    assert sort_out([ev(IN.ATTRIB | IN.ISDIR)], wanted) == Batch(unsettled=True)


def test_the_watch_going_away_or_lost_events() -> None:
    for mask in (IN.DELETE_SELF, IN.MOVE_SELF, IN.IGNORED, IN.Q_OVERFLOW):
        assert sort_out([ev(mask), ev(IN.MOVED_TO, "a")], wanted) == Batch(
            frozenset({"a"}), unsettled=True, gone=True
        )
