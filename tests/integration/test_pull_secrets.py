"""Image pull credentials through the whole kubelet: FakeApiServer, FakeRuntime, fake clock.

FakeRuntime's registry refuses private repositories without the right AuthConfig; the
kubelet reads the pod's pull secrets from the API, matches them to the registry and
tries them in order. No credential may reach a log line, an event or the pod's status.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from kubelet.cri import api
from kubelet.testing import FakeRuntime

from .cluster_harness import Cluster, running_cluster
from .kubelet_harness import KUBELET_IMAGES

PRIVATE = "registry.example/team/app:1"
PASSWORD = "s3cr3t-Pa55word"


@pytest.fixture
def fake_images() -> tuple[str, ...]:
    return KUBELET_IMAGES


@pytest.fixture
def fake_setup() -> Callable[[FakeRuntime], None]:
    def private_repository(fake: FakeRuntime) -> None:
        fake.require_auth("registry.example/team/app", "robot", PASSWORD)

    return private_repository


def dockerconfigjson(auths: dict[str, dict[str, str]]) -> dict[str, Any]:
    return {".dockerconfigjson": _b64(json.dumps({"auths": auths}).encode())}


def basic(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def secret(
    c: Cluster, name: str, data: dict[str, Any], kind: str = "kubernetes.io/dockerconfigjson"
) -> None:
    c.api.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": "default"},
            "type": kind,
            "data": data,
        }
    )


def registry_secret(c: Cluster, name: str, key: str, user: str, password: str) -> None:
    secret(c, name, dockerconfigjson({key: {"auth": basic(user, password)}}))


def status_of(c: Cluster, name: str) -> dict[str, Any]:
    return dict((c.pod(name) or {}).get("status") or {})


def waiting(c: Cluster, name: str) -> dict[str, Any]:
    for cs in status_of(c, name).get("containerStatuses") or []:
        return dict((cs.get("state") or {}).get("waiting") or {})
    return {}


def events(c: Cluster, reason: str | None = None) -> list[dict[str, Any]]:
    found = c.api.list("events", "default")
    return [e for e in found if reason is None or e.get("reason") == reason]


def pulls(fake: FakeRuntime, image: str = PRIVATE) -> list[tuple[str, str] | None]:
    """(username, password) of every PullImage of ``image``; None for anonymous."""
    out: list[tuple[str, str] | None] = []
    for ref, auth in fake.pull_auths:
        if ref == image:
            out.append(None if auth is None else (auth.username, auth.password))
    return out


# the transport libraries the kubelet itself keeps at WARNING (agent.run): their debug
# lines show raw HTTP/2 headers, a runtime's error text among them
QUIET = ("httpx", "httpcore", "hpack", "h2", "hypercorn.access")


def kubelet_log(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING or not r.name.startswith(QUIET)
    ]


def assert_no_secret(c: Cluster, caplog: pytest.LogCaptureFixture, *secrets: str) -> None:
    texts = [json.dumps(c.api.objects("Pod")), json.dumps(events(c))]
    texts += kubelet_log(caplog)
    for value in secrets:
        for text in texts:
            assert value not in text


async def test_pod_pulls_a_private_image_with_its_dockerconfigjson_secret(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        registry_secret(c, "regcred", "https://registry.example", "robot", PASSWORD)
        c.create_pod("private", image=PRIVATE, imagePullSecrets=[{"name": "regcred"}])
        await c.wait_for(lambda: c.phase("private") == "Running")
        ((_ref, auth),) = [(r, a) for r, a in fake.pull_auths if r == PRIVATE]
        # as upstream fills it for a Secret's credentials: username and password only
        assert auth == api.AuthConfig(username="robot", password=PASSWORD)
        secret_reads = c.api.requests_of("get", "secrets")
        assert [r.name for r in secret_reads] == ["regcred"]


async def test_dockercfg_secrets_work_too(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        cfg = {"registry.example": {"username": "robot", "password": PASSWORD, "email": "x@y"}}
        secret(c, "old", {".dockercfg": _b64(json.dumps(cfg).encode())}, "kubernetes.io/dockercfg")
        c.create_pod("private", image=PRIVATE, imagePullSecrets=[{"name": "old"}])
        await c.wait_for(lambda: c.phase("private") == "Running")
        assert pulls(fake) == [("robot", PASSWORD)]


async def test_wrong_credentials_fail_without_showing_them(
    fake: FakeRuntime,
    short_tmp: Path,
    autojump_clock: trio.abc.Clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    fake.leak_credentials = True  # a runtime that quotes the password in its errors
    wrong = "not-the-Right-one"
    async with running_cluster(fake, short_tmp) as c:
        registry_secret(c, "regcred", "registry.example", "robot", wrong)
        c.create_pod("private", image=PRIVATE, imagePullSecrets=[{"name": "regcred"}])
        await c.wait_for(lambda: waiting(c, "private").get("reason") == "ErrImagePull")
        message = waiting(c, "private")["message"]
        assert "401 Unauthorized" in message
        assert "<redacted>" in message
        await c.wait_for(lambda: waiting(c, "private").get("reason") == "ImagePullBackOff")
        assert waiting(c, "private")["message"].startswith(
            f'Back-off pulling image "{PRIVATE}": ErrImagePull: '
        )
        failed = [e["message"] for e in events(c, "Failed")]
        assert f'Failed to pull image "{PRIVATE}": ' in failed[0]
        assert "Error: ErrImagePull" in failed
        assert pulls(fake) == [("robot", wrong)]
        # the secret is read for each attempt (10 s, 20 s apart), never while backing off
        await trio.sleep(45)
        assert len(pulls(fake)) == 3
        assert len(c.api.requests_of("get", "secrets")) == 3
        assert_no_secret(c, caplog, wrong, basic("robot", wrong))


async def test_missing_secret_gives_an_event_and_an_anonymous_pull(
    fake: FakeRuntime,
    short_tmp: Path,
    autojump_clock: trio.abc.Clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="kubelet")
    fake.pullable.add("registry.example/public:1")
    async with running_cluster(fake, short_tmp) as c:
        c.create_pod(
            "public",
            image="registry.example/public:1",
            imagePullSecrets=[{"name": "gone"}, {"name": ""}, {"name": "also-gone"}],
        )
        await c.wait_for(lambda: c.phase("public") == "Running")
        (event,) = events(c, "FailedToRetrieveImagePullSecret")
        assert event["type"] == "Warning"
        assert event["message"] == (
            "Unable to retrieve some image pull secrets (gone, also-gone); attempting to pull "
            "the image may not succeed."
        )
        assert event["involvedObject"]["kind"] == "Pod"
        assert "fieldPath" not in event["involvedObject"]
        assert pulls(fake, "registry.example/public:1") == [None]
        logged = [r.getMessage() for r in caplog.records]
        assert any(
            "Unable to retrieve pull secret, the image pull may not succeed." in m
            and 'secret="default/gone"' in m
            for m in logged
        )


async def test_several_credentials_are_tried_in_order_until_one_pulls(
    fake: FakeRuntime,
    short_tmp: Path,
    autojump_clock: trio.abc.Clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        # the longer match (registry.example/team) first, then the host, then a glob;
        # a secret for another registry is never sent
        registry_secret(c, "host", "registry.example", "robot", "wrong-2")
        registry_secret(c, "team", "https://registry.example/v2/team", "robot", "wrong-1")
        registry_secret(c, "glob", "*.example", "robot", PASSWORD)
        registry_secret(c, "other", "quay.io", "robot", "never-sent")
        c.create_pod(
            "private",
            image=PRIVATE,
            imagePullSecrets=[{"name": n} for n in ("other", "glob", "host", "team")],
        )
        await c.wait_for(lambda: c.phase("private") == "Running")
        assert pulls(fake) == [
            ("robot", "wrong-1"),
            ("robot", "wrong-2"),
            ("robot", PASSWORD),
        ]
        assert_no_secret(c, caplog, PASSWORD, "wrong-1", "wrong-2", "never-sent")


async def test_all_credentials_failing_report_every_failure_once(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        registry_secret(c, "a", "registry.example", "robot", "wrong-a")
        registry_secret(c, "b", "registry.example/team", "robot", "wrong-b")
        c.create_pod("private", image=PRIVATE, imagePullSecrets=[{"name": "a"}, {"name": "b"}])
        await c.wait_for(lambda: waiting(c, "private").get("reason") == "ErrImagePull")
        assert pulls(fake) == [("robot", "wrong-b"), ("robot", "wrong-a")]
        # both attempts failed the same way: upstream's aggregate prints that once
        message = waiting(c, "private")["message"]
        assert message.startswith(f'failed to pull and unpack image "{PRIVATE}"')
        assert not message.startswith("[")


async def test_no_matching_credential_pulls_anonymously(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with running_cluster(fake, short_tmp) as c:
        registry_secret(c, "quay", "quay.io", "robot", PASSWORD)
        c.create_pod("private", image=PRIVATE, imagePullSecrets=[{"name": "quay"}])
        await c.wait_for(lambda: waiting(c, "private").get("reason") == "ErrImagePull")
        # the secret was read, held nothing for this registry: anonymous
        assert [r.name for r in c.api.requests_of("get", "secrets")] == ["quay"]
        assert pulls(fake) == [None]


async def test_a_malformed_secret_fails_the_pull_as_upstream(
    fake: FakeRuntime,
    short_tmp: Path,
    autojump_clock: trio.abc.Clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Upstream's keyring refuses a pod whose pull secret is not a docker config: the
    image is not pulled (not even with the pod's other, good secret) until it is fixed."""
    caplog.set_level(logging.DEBUG)
    async with running_cluster(fake, short_tmp) as c:
        bad_auth = base64.b64encode(b"robot-no-colon-" + PASSWORD.encode()).decode()
        secret(c, "broken", dockerconfigjson({"registry.example": {"auth": bad_auth}}))
        registry_secret(c, "good", "registry.example", "robot", PASSWORD)
        c.create_pod(
            "private", image=PRIVATE, imagePullSecrets=[{"name": "broken"}, {"name": "good"}]
        )
        await c.wait_for(lambda: waiting(c, "private").get("reason") == "ErrImagePull")
        assert "pull secret default/broken" in waiting(c, "private")["message"]
        await c.wait_for(lambda: waiting(c, "private").get("reason") == "ImagePullBackOff")
        assert pulls(fake) == []
        assert_no_secret(c, caplog, PASSWORD, bad_auth)
        # fixed: the next attempt after the back-off pulls
        c.api.delete("secrets", "default", "broken")
        registry_secret(c, "broken", "registry.example", "robot", PASSWORD)
        await c.wait_for(lambda: c.phase("private") == "Running", timeout=30)
        assert pulls(fake) == [("robot", PASSWORD)]


async def test_service_account_pull_secrets_arrive_through_admission(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """As upstream: the API server copies the account's imagePullSecrets into a pod
    created without any; the kubelet reads only the pod's."""
    async with running_cluster(fake, short_tmp) as c:
        registry_secret(c, "regcred", "registry.example", "robot", PASSWORD)
        c.api.create(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "builder", "namespace": "default"},
                "imagePullSecrets": [{"name": "regcred"}],
            }
        )
        c.create_pod("with-sa", image=PRIVATE, serviceAccountName="builder")
        created = c.pod("with-sa")
        assert created is not None
        assert created["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
        await c.wait_for(lambda: c.phase("with-sa") == "Running")
        assert pulls(fake) == [("robot", PASSWORD)]
        assert c.api.requests_of("get", "serviceaccounts") == []

        # an account's secret added after the pod was created is not used, as upstream
        c.create_pod("late", image="registry.example/team/app:2", serviceAccountName="late")
        c.api.create(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "late", "namespace": "default"},
                "imagePullSecrets": [{"name": "regcred"}],
            }
        )
        await c.wait_for(lambda: waiting(c, "late").get("reason") == "ErrImagePull")
        assert pulls(fake, "registry.example/team/app:2") == [None]


async def test_an_image_pulled_with_credentials_is_not_lent_to_pods_without_them(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """KubeletEnsureSecretPulledImages (on by default in 1.36), policy
    NeverVerifyPreloadedImages."""
    async with running_cluster(fake, short_tmp) as c:
        registry_secret(c, "regcred", "registry.example", "robot", PASSWORD)
        registry_secret(c, "same-creds", "registry.example", "robot", PASSWORD)
        c.create_pod(
            "owner",
            image=PRIVATE,
            imagePullSecrets=[{"name": "regcred"}],
            containers=[{"name": "app", "image": PRIVATE, "imagePullPolicy": "IfNotPresent"}],
        )
        await c.wait_for(lambda: c.phase("owner") == "Running")
        assert pulls(fake) == [("robot", PASSWORD)]
        records = list((short_tmp / "root" / "image_manager" / "pulled").iterdir())
        assert len(records) == 1
        assert PASSWORD not in records[0].read_text()

        # IfNotPresent without credentials: the kubelet asks the registry again
        c.create_pod(
            "thief",
            containers=[{"name": "app", "image": PRIVATE, "imagePullPolicy": "IfNotPresent"}],
        )
        await c.wait_for(lambda: waiting(c, "thief").get("reason") == "ErrImagePull")
        assert pulls(fake) == [("robot", PASSWORD), None]

        # Never without credentials: as if the image were absent
        c.create_pod(
            "never",
            containers=[{"name": "app", "image": PRIVATE, "imagePullPolicy": "Never"}],
        )
        await c.wait_for(lambda: waiting(c, "never").get("reason") == "ErrImageNeverPull")
        assert waiting(c, "never")["message"] == (
            f'Container image "{PRIVATE}" is not present with pull policy of Never'
        )

        # the same credentials in another Secret: used from the node, no pull
        c.create_pod(
            "friend",
            imagePullSecrets=[{"name": "same-creds"}],
            containers=[{"name": "app", "image": PRIVATE, "imagePullPolicy": "Never"}],
        )
        await c.wait_for(lambda: c.phase("friend") == "Running")
        assert len(pulls(fake)) == 2
        accessible = [e for e in events(c, "Pulled") if e["involvedObject"]["name"] == "friend"]
        assert accessible[0]["message"] == (
            f'Container image "{PRIVATE}" already present on machine and can be accessed by the pod'
        )

        # an image the kubelet never pulled (preloaded) needs no credentials
        c.create_pod("preloaded", image="busybox:1.35")
        await c.wait_for(lambda: c.phase("preloaded") == "Running")


async def test_a_pull_with_credentials_is_not_shared_with_a_pod_without(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    fake.faults.delay("PullImage", 5)
    async with running_cluster(fake, short_tmp) as c:
        registry_secret(c, "regcred", "registry.example", "robot", PASSWORD)
        c.create_pod("owner", image=PRIVATE, imagePullSecrets=[{"name": "regcred"}])
        c.create_pod("other", image=PRIVATE)
        await c.wait_for(lambda: c.phase("owner") == "Running")
        await c.wait_for(lambda: waiting(c, "other").get("reason") == "ErrImagePull")
        # two PullImage calls at once, one each: the anonymous one was not served by the
        # other's authenticated pull
        first_two = pulls(fake)[:2]
        assert sorted(first_two, key=str) == sorted([("robot", PASSWORD), None], key=str)


async def test_node_config_json_serves_every_pod_after_the_pods_own(
    fake: FakeRuntime, short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    """Upstream's node keyring: ``<root-dir>/config.json``; its credentials are tried
    after the pod's, and an image they pulled is open to every pod on the node."""
    async with running_cluster(fake, short_tmp) as c:
        node_config = {"auths": {"registry.example": {"auth": basic("robot", PASSWORD)}}}
        (short_tmp / "root").mkdir(exist_ok=True)
        (short_tmp / "root" / "config.json").write_text(json.dumps(node_config))
        registry_secret(c, "stale", "registry.example", "robot", "stale-password")
        c.create_pod(
            "first",
            imagePullSecrets=[{"name": "stale"}],
            containers=[{"name": "app", "image": PRIVATE, "imagePullPolicy": "IfNotPresent"}],
        )
        await c.wait_for(lambda: c.phase("first") == "Running")
        assert pulls(fake) == [("robot", "stale-password"), ("robot", PASSWORD)]
        c.create_pod(
            "second",
            containers=[{"name": "app", "image": PRIVATE, "imagePullPolicy": "Never"}],
        )
        await c.wait_for(lambda: c.phase("second") == "Running")
        assert len(pulls(fake)) == 2
