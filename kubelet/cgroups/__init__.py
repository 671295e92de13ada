"""Resource management with cgroups: names, values, the filesystem layer, the manager.

Upstream's container manager (pkg/kubelet/cm) keeps every pod in a cgroup tree under
``cgroupRoot``: ``kubepods`` (capped at node allocatable when ``enforceNodeAllocatable``
has "pods"), ``kubepods/burstable`` and ``kubepods/besteffort`` (cpu shares following the
pods in them), and ``pod<uid>`` per pod (Guaranteed pods directly in ``kubepods``) with
the pod's cpu shares, CFS quota, memory limit, hugetlb and ``podPidsLimit``. Sandboxes
and containers are created with the pod cgroup as parent, so the runtime nests them.

Here, as modules with one job each:

- ``names``: a cgroup's components, spelled for the cgroupfs or systemd driver;
- ``requests``: a pod's summed requests and limits (init containers, sidecars, overhead,
  pod-level resources), the one definition admission, eviction and the memory volumes read;
- ``values``: the values of every cgroup of the tree, and their v1/v2 file spellings;
- ``layout``: which hierarchies the host mounts (v1, hybrid, v2);
- ``fs``: the only code touching ``/sys/fs/cgroup`` (a root a test points at a tree);
- ``manager``: create/update/remove over ``fs``, the periodic QoS update, the orphan scan.

``run`` is the component's entry (``run_cgroups``): the tree set up at start, the
minute loop, and ``PodCgroups``, which the pod driver (a pod's cgroup before its
sandbox, removed after its teardown) and housekeeping (the orphan sweep) call.

The systemd driver: ``slices`` (unit names and properties, pure), ``systemd`` (systemd's
D-Bus API: StartTransientUnit, SetUnitProperties, StopUnit, JobRemoved) and ``driver``
(the runtime's cgroup driver, from CRI RuntimeConfig, wins over the configured one).
"""
