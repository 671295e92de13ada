"""A Kubernetes node agent (kubelet) written as one Trio structured-concurrency program."""

from kubelet.lazyinit import defer_package_init as _defer_package_init

__version__ = "0.1.0"

_defer_package_init("prometheus_client")
