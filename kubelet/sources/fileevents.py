"""What a batch of inotify events asks of the file source: read some files now, or wait.

A manifest that was closed after writing (``IN_CLOSE_WRITE``) or moved into the
directory (``IN_MOVED_TO``) is complete: it is read at once. Every other event (a file
created, written to but still open, deleted, moved away, its mode changed; the directory
itself changed) may be the middle of something (``rm`` then ``cp``, an editor's rename
dance), so it is settled by a scan of the whole directory once the burst of events is
over. A name counts by its last event in the batch: ``MOVED_TO`` then ``DELETE`` waits.

Reading a finished file at once never removes a pod (see
:meth:`~kubelet.sources.file.FileSource.read_now`): only the settling scan, after the
burst, may find a manifest gone. So a burst still ends as one change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import attrs
import inotify_simple

_IN = inotify_simple.flags

READY = _IN.CLOSE_WRITE | _IN.MOVED_TO
"""The file is complete: read it now."""

GONE = _IN.DELETE_SELF | _IN.MOVE_SELF | _IN.IGNORED | _IN.UNMOUNT | _IN.Q_OVERFLOW
"""The watched directory itself went away, or events were lost: rescan and rewatch."""


@attrs.frozen
class Batch:
    """One read of the inotify descriptor, sorted out."""

    ready: frozenset[str] = frozenset()
    """Names whose last event says they are complete: read them now."""
    unsettled: bool = False
    """Something else changed that we care about: scan everything after the burst."""
    gone: bool = False
    """The watch itself is over (see :data:`GONE`)."""


def sort_out(events: Iterable[inotify_simple.Event], wanted: Callable[[str], bool]) -> Batch:
    """Sort a batch of events into what to read now and whether to settle later."""
    last: dict[str, int] = {}
    gone = False
    for event in events:
        if event.mask & GONE:
            gone = True
        elif wanted(event.name):
            last[event.name] = event.mask
    ready = frozenset(name for name, mask in last.items() if name and mask & READY)
    unsettled = gone or len(ready) < len(last)
    return Batch(ready, unsettled, gone)
