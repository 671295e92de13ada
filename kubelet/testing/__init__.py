"""Test doubles that speak the real protocols: FakeRuntime (CRI over grpclib)."""

from . import wschannels
from .certs import CertPair, TestCA
from .cgroupfs import TreeCgroupFs, v1_tree
from .fakeapiserver import FakeApiServer
from .fakedeviceplugin import FakeDevicePlugin
from .fakedra import DraCall, FakeDevice, FakeDraPlugin
from .fakelogind import private_bus
from .fakeruntime import (
    BUSYBOX_IMAGE,
    PAUSE_IMAGE,
    CallRecord,
    ContainerBehaviour,
    ExecResult,
    FakeRuntime,
)
from .fakesystemd import FakeSystemd
from .faults import FaultPlan
from .h2client import H2Client
from .hostile import ManifestServer, hostile_files, make_fifo, many_maps_manifest, serve_manifests
from .wschannels import ChannelClient, HandshakeRefused

__all__ = [
    "BUSYBOX_IMAGE",
    "PAUSE_IMAGE",
    "CallRecord",
    "CertPair",
    "ChannelClient",
    "ContainerBehaviour",
    "DraCall",
    "ExecResult",
    "FakeApiServer",
    "FakeDevice",
    "FakeDevicePlugin",
    "FakeDraPlugin",
    "FakeRuntime",
    "FakeSystemd",
    "FaultPlan",
    "H2Client",
    "HandshakeRefused",
    "ManifestServer",
    "TestCA",
    "TreeCgroupFs",
    "hostile_files",
    "make_fifo",
    "many_maps_manifest",
    "private_bus",
    "serve_manifests",
    "v1_tree",
    "wschannels",
]
