"""Kubernetes API objects the kubelet reads and writes, and the one converter for them."""

from .converter import converter, from_wire, to_wire

__all__ = ["converter", "from_wire", "to_wire"]
