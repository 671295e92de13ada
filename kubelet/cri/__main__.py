"""``python -m kubelet.cri``: a small crictl built on our own CRI clients.

It exists so a runtime can be inspected (and cleared after tests) with exactly the
client code the kubelet uses, on machines where crictl is not installed::

    python -m kubelet.cri [--endpoint unix:///run/containerd/containerd.sock] COMMAND

Commands: ``version``, ``status``, ``pods``, ``ps [-a]``, ``images`` and
``cleanup [--kubelet-only] [--timeout S]``. A failed CRI call (runtime not reachable,
...) exits 1 with a one-line message on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence

import attrs
import trio
import trio_asyncio

from kubelet.cri import labels
from kubelet.tables import age, table

from . import ImageClient, NotFound, RuntimeClient, api, connect
from .endpoint import DEFAULT_RUNTIME_ENDPOINT, socket_path
from .errors import CriError

POD_UID_LABEL = labels.POD_UID
POD_NAME_LABEL = labels.POD_NAME
POD_NAMESPACE_LABEL = labels.POD_NAMESPACE

ENDPOINT_ENV = "CONTAINER_RUNTIME_ENDPOINT"
"""Same variable crictl reads, so one setting serves both tools."""

DEFAULT_STOP_TIMEOUT = 1
"""Grace seconds for StopContainer during cleanup: teardown must be quick, not gentle."""

_PARALLEL = 8
"""Concurrent stop/remove calls during cleanup (containerd serialises per object anyway)."""

Command = Callable[[RuntimeClient, ImageClient, argparse.Namespace], Awaitable[int]]


# -- formatting ----------------------------------------------------------------------------


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f}{unit}" if unit == "B" else f"{value:.3g}{unit}"
        value /= 1000
    return f"{n}B"  # pragma: no cover - loop always returns


def _short(ident: str) -> str:
    return ident.removeprefix("sha256:")[:13]


def _sandbox_state(state: int) -> str:
    return api.PodSandboxState.Name(state).removeprefix("SANDBOX_")


def _container_state(state: int) -> str:
    return api.ContainerState.Name(state).removeprefix("CONTAINER_")


# -- read-only commands -------------------------------------------------------------------


async def cmd_version(runtime: RuntimeClient, images: ImageClient, args: argparse.Namespace) -> int:
    resp = await runtime.version()
    print(f"Version:           {resp.version}")
    print(f"RuntimeName:       {resp.runtime_name}")
    print(f"RuntimeVersion:    {resp.runtime_version}")
    print(f"RuntimeApiVersion: {resp.runtime_api_version}")
    return 0


async def cmd_status(runtime: RuntimeClient, images: ImageClient, args: argparse.Namespace) -> int:
    resp = await runtime.status()
    rows = [
        (c.type, str(c.status).lower(), c.reason or "-", c.message or "-")
        for c in resp.status.conditions
    ]
    print(table(("CONDITION", "STATUS", "REASON", "MESSAGE"), rows))
    handlers = [h.name or "(default)" for h in resp.runtime_handlers]
    if handlers:
        print(f"runtime handlers: {', '.join(handlers)}")
    return 0


async def cmd_pods(runtime: RuntimeClient, images: ImageClient, args: argparse.Namespace) -> int:
    sandboxes = sorted(await runtime.list_pod_sandbox(), key=lambda s: -s.created_at)
    rows = [
        (
            _short(s.id),
            _sandbox_state(s.state),
            f"{s.metadata.namespace}/{s.metadata.name}",
            str(s.metadata.attempt),
            age(s.created_at),
        )
        for s in sandboxes
    ]
    print(table(("POD ID", "STATE", "NAMESPACE/NAME", "ATTEMPT", "CREATED"), rows))
    return 0


async def cmd_ps(runtime: RuntimeClient, images: ImageClient, args: argparse.Namespace) -> int:
    state = None if args.all else api.CONTAINER_RUNNING
    containers = sorted(await runtime.list_containers(state=state), key=lambda c: -c.created_at)
    sandboxes = {s.id: s for s in await runtime.list_pod_sandbox()}
    # containerd reports the image a container was created from as given, often an id.
    names = {i.id: i.repo_tags[0] for i in await images.list_images() if i.repo_tags}
    rows = []
    for c in containers:
        sb = sandboxes.get(c.pod_sandbox_id)
        ns = c.labels.get(POD_NAMESPACE_LABEL) or (sb.metadata.namespace if sb else "?")
        pod = c.labels.get(POD_NAME_LABEL) or (sb.metadata.name if sb else "?")
        image = c.image.image
        rows.append(
            (
                _short(c.id),
                _container_state(c.state),
                c.metadata.name,
                str(c.metadata.attempt),
                f"{ns}/{pod}",
                names.get(image, image),
            )
        )
    print(table(("CONTAINER", "STATE", "NAME", "ATTEMPT", "POD", "IMAGE"), rows))
    return 0


async def cmd_images(runtime: RuntimeClient, images: ImageClient, args: argparse.Namespace) -> int:
    rows = []
    for image in sorted(await images.list_images(), key=lambda i: list(i.repo_tags)):
        for ref in list(image.repo_tags) or ["<none>"]:
            rows.append((ref, _short(image.id), _size(image.size)))
    print(table(("IMAGE", "ID", "SIZE"), rows))
    return 0


# -- cleanup ---------------------------------------------------------------------------------


@attrs.define
class CleanupReport:
    """What ``cleanup`` did; ``errors`` holds one line per call that failed."""

    containers: int = 0
    sandboxes: int = 0
    errors: list[str] = attrs.Factory(list)


async def cleanup(
    runtime: RuntimeClient,
    *,
    kubelet_only: bool = False,
    labels: Mapping[str, str] | None = None,
    stop_timeout: int = DEFAULT_STOP_TIMEOUT,
) -> CleanupReport:
    """Stop and remove every container and sandbox (or only the selected ones).

    ``labels`` selects by exact label values (a test passes its pod uid);
    ``kubelet_only`` keeps only objects carrying ``io.kubernetes.pod.uid``, i.e. made by
    a kubelet. Containers inside a selected sandbox go with it. Order matters for a
    clean teardown: containers are stopped first (short grace), then sandboxes stopped
    (CNI releases the pod IP), then containers and sandboxes removed. Already-gone
    objects count as done; other failures are collected, not raised, so one stuck
    container does not leave the rest behind.
    """
    report = CleanupReport()
    wanted = dict(labels or {})

    def chosen(obj_labels: Mapping[str, str]) -> bool:
        if kubelet_only and POD_UID_LABEL not in obj_labels:
            return False
        return all(obj_labels.get(k) == v for k, v in wanted.items())

    sandboxes = [s for s in await runtime.list_pod_sandbox(labels=wanted) if chosen(s.labels)]
    sandbox_ids = {s.id for s in sandboxes}
    # one unfiltered list: containers inside a chosen sandbox go too, labelled or not
    containers = [
        c
        for c in await runtime.list_containers()
        if c.pod_sandbox_id in sandbox_ids or chosen(c.labels)
    ]

    limiter = trio.CapacityLimiter(_PARALLEL)

    async def each(what: str, ids: Iterable[str], call: Callable[[str], Awaitable[None]]) -> None:
        async def one(ident: str) -> None:
            async with limiter:
                try:
                    await call(ident)
                except NotFound:
                    pass
                except CriError as exc:
                    report.errors.append(f"{what} {_short(ident)}: {exc}")

        async with trio.open_nursery() as nursery:
            for ident in ids:
                nursery.start_soon(one, ident)

    running = [c.id for c in containers if c.state == api.CONTAINER_RUNNING]

    async def stop_container(cid: str) -> None:
        await runtime.stop_container(cid, stop_timeout)

    await each("stop container", running, stop_container)
    await each("stop sandbox", sandbox_ids, runtime.stop_pod_sandbox)
    before = len(report.errors)
    await each("remove container", [c.id for c in containers], runtime.remove_container)
    report.containers = len(containers) - (len(report.errors) - before)
    before = len(report.errors)
    await each("remove sandbox", sandbox_ids, runtime.remove_pod_sandbox)
    report.sandboxes = len(sandbox_ids) - (len(report.errors) - before)
    return report


async def cmd_cleanup(runtime: RuntimeClient, images: ImageClient, args: argparse.Namespace) -> int:
    report = await cleanup(runtime, kubelet_only=args.kubelet_only, stop_timeout=args.timeout)
    for line in report.errors:
        print(f"error: {line}", file=sys.stderr)
    print(f"removed {report.containers} container(s), {report.sandboxes} sandbox(es)")
    return 1 if report.errors else 0


# -- entry point -------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m kubelet.cri",
        description="Inspect or clear a CRI runtime through the kubelet's own CRI clients.",
    )
    default = os.environ.get(ENDPOINT_ENV) or DEFAULT_RUNTIME_ENDPOINT
    parser.add_argument(
        "--endpoint", default=default, help=f"CRI endpoint (default: ${ENDPOINT_ENV} or {default})"
    )
    # accepted after the command too; SUPPRESS keeps the subparser from resetting it
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--endpoint", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, func: Command, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, parents=[common], help=help_text, description=help_text)
        p.set_defaults(func=func)
        return p

    add("version", cmd_version, "runtime name, version and CRI API version")
    add("status", cmd_status, "runtime conditions (RuntimeReady, NetworkReady)")
    add("pods", cmd_pods, "list pod sandboxes")
    ps = add("ps", cmd_ps, "list containers (running ones unless -a)")
    ps.add_argument("-a", "--all", action="store_true", help="include exited and created ones")
    add("images", cmd_images, "list images")
    clean = add("cleanup", cmd_cleanup, "stop and remove every container and sandbox")
    clean.add_argument(
        "--kubelet-only",
        "--namespace-label-only",
        dest="kubelet_only",
        action="store_true",
        help=f"only sandboxes/containers labelled {POD_UID_LABEL} (made by a kubelet)",
    )
    clean.add_argument(
        "--timeout",
        type=int,
        default=DEFAULT_STOP_TIMEOUT,
        help=f"StopContainer grace seconds (default {DEFAULT_STOP_TIMEOUT})",
    )
    return parser


async def _run(args: argparse.Namespace) -> int:
    func: Command = args.func
    async with trio_asyncio.open_loop():
        try:
            async with connect(args.endpoint, request_timeout=30.0) as (runtime, images):
                return await func(runtime, images, args)
        except CriError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        socket_path(args.endpoint)
    except ValueError as exc:
        parser.error(str(exc))
    result: int = trio.run(_run, args)
    return result


if __name__ == "__main__":
    sys.exit(main())
