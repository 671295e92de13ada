"""``kubelet pods``: the pods on this node as the runtime holds them.

Reads the runtime only (no kubelet needs to be running): one line per pod with its
sandbox state and each container's state and restart count, newest instances.
"""

from __future__ import annotations

import sys

import trio
import trio_asyncio

from kubelet.cri import ContainerRunState, CriError, RuntimePodStatus, connect
from kubelet.pleg import RuntimeView
from kubelet.tables import age, table


def pod_row(status: RuntimePodStatus) -> list[str]:
    sandbox = status.sandboxes[0] if status.sandboxes else None
    seen: dict[str, str] = {}
    for c in status.containers:  # newest first: the first of each name is current
        if c.name not in seen:
            seen[c.name] = f"{c.name}={c.state.value}"
            if c.state is ContainerRunState.EXITED:
                seen[c.name] += f"({c.exit_code})"
            if c.restart_count:
                seen[c.name] += f"/{c.restart_count}"
    return [
        f"{status.namespace}/{status.name}",
        status.uid[:8],
        sandbox.state.value if sandbox else "-",
        sandbox.ip if sandbox and sandbox.ip else "-",
        " ".join(sorted(seen.values())) or "-",
        age(sandbox.created_at) if sandbox else "-",
    ]


async def list_pods(endpoint: str) -> str:
    async with trio_asyncio.open_loop(), connect(endpoint, request_timeout=30) as (runtime, _):
        view = RuntimeView(runtime)
        uids = await view.pod_identities()
        statuses = [await view.pod_status(uid) for uid in uids]
    rows = sorted(pod_row(s) for s in statuses)
    header = ("POD", "UID", "SANDBOX", "IP", "CONTAINERS (state(exit)/restarts)", "CREATED")
    return table(header, rows)


def main(endpoint: str) -> int:
    try:
        print(trio.run(list_pods, endpoint))
    except CriError as exc:
        print(f"kubelet pods: {exc}", file=sys.stderr)
        return 1
    return 0
