"""Usage figures for eviction and garbage collection, read at the edge with an injectable root.

- ``summary``: the typed figures decisions read (a subset of stats/v1alpha1), and a
  reader of the ``/stats/summary`` JSON;
- ``cgroupfs``: memory working set, CPU and PIDs from cgroup v1 or v2 files;
- ``fs``: filesystem capacity/available/inodes (statvfs) and bounded directory usage
  (emptyDir volumes), the walk run off the event loop;
- ``kmsg`` and ``oom``: kernel log records and the OOM-kill lines in them.
"""
