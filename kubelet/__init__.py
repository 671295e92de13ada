"""A Kubernetes node agent (kubelet) written as one Trio structured-concurrency program."""

__version__ = "0.1.0"
