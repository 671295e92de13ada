"""Probe requests, verdicts and messages without any network (upstream's HTTP and exec rules)."""

from __future__ import annotations

from collections.abc import Iterable

import attrs
import pytest
from grpclib.const import Status

from kubelet.api import (
    Container,
    ContainerPort,
    ExecAction,
    HTTPGetAction,
    ObjectFieldSelector,
    ObjectMeta,
    Pod,
    PodSpec,
    Probe,
    TCPSocketAction,
    format_pod,
)
from kubelet.api.pod import EnvVar, EnvVarSource, HTTPHeader
from kubelet.cri import CriError, DeadlineExceeded, NotFound
from kubelet.goformat import format_duration, go_quote
from kubelet.handlers import ProbeError, ProbeOutcome, ProbeResult, ProbeTarget, build_request
from kubelet.handlers import exec as exec_probe
from kubelet.handlers.http import (
    HttpGetRequest,
    HttpGetResponse,
    follow_redirect,
    judge,
    resolve_container_port,
    user_agent,
)
from kubelet.prober import ActionProber, ProbeKind, Result
from kubelet.prober.probes import ProbeEvent, ProbeVerdict, run_probe, verdict_of

CONTAINER = Container(
    name="app",
    ports=(ContainerPort(container_port=8080, name="http"), ContainerPort(container_port=9090)),
)
POD = Pod(
    metadata=ObjectMeta(name="web", namespace="default", uid="u1"),
    spec=PodSpec(containers=(CONTAINER,)),
)


def headers(request: HttpGetRequest) -> dict[str, str]:
    return dict(request.headers)


# -- HTTP request building ---------------------------------------------------------------------


def test_defaults_pod_ip_user_agent_and_accept() -> None:
    request = build_request(HTTPGetAction(port=8080, path="/healthz"), CONTAINER, "10.88.0.5")
    assert request.url == "http://10.88.0.5:8080/healthz"
    assert request.headers == (("User-Agent", "kube-probe/1.36"), ("Accept", "*/*"))
    assert user_agent("lifecycle") == "kube-lifecycle/1.36"


def test_scheme_host_named_port_query_and_relative_path() -> None:
    action = HTTPGetAction(port="http", path="ready?full=1", host="example.test", scheme="HTTPS")
    assert build_request(action, CONTAINER, "10.0.0.1").url == (
        "https://example.test:8080/ready?full=1"
    )
    assert build_request(HTTPGetAction(port=80), CONTAINER, "fd00::5").url == "http://[fd00::5]:80"


def test_supplied_headers_win_and_an_empty_accept_is_dropped() -> None:
    action = HTTPGetAction(
        port=8080,
        http_headers=(
            HTTPHeader(name="user-agent", value="mine"),
            HTTPHeader(name="accept", value=""),
            HTTPHeader(name="X-Custom", value="a"),
            HTTPHeader(name="X-Custom", value="b"),
            HTTPHeader(name="host", value="virtual.example"),
        ),
    )
    request = build_request(action, CONTAINER, "10.0.0.1")
    assert request.headers == (
        ("Host", "virtual.example"),
        ("User-Agent", "mine"),
        ("X-Custom", "a"),
        ("X-Custom", "b"),
    )
    assert request.header("host") == "virtual.example"
    kept = build_request(
        HTTPGetAction(port=8080, http_headers=(HTTPHeader(name="Accept", value="text/plain"),)),
        CONTAINER,
        "10.0.0.1",
    )
    assert headers(kept)["Accept"] == "text/plain"


def test_follow_redirect_keeps_the_headers_and_a_custom_host_only_when_relative() -> None:
    given = (("Host", "virtual.test"), ("Authorization", "x"), ("X-Token", "t"))
    request = HttpGetRequest("http://10.0.0.1:8080/a/b?q=1", given)
    assert follow_redirect(request, 200, "/elsewhere") is None
    assert follow_redirect(request, 302, None) is None
    assert follow_redirect(request, 304, "/c") is None
    same = follow_redirect(request, 302, "c")
    assert same == HttpGetRequest("http://10.0.0.1:8080/a/c", given)
    rooted = follow_redirect(request, 307, "//10.0.0.1:9090/d")  # no scheme: relative
    assert rooted == HttpGetRequest("http://10.0.0.1:9090/d", given)
    for code in (301, 303, 308):
        moved = follow_redirect(request, code, "https://10.0.0.1:8443/e")
        assert moved == HttpGetRequest(
            "https://10.0.0.1:8443/e", (("Authorization", "x"), ("X-Token", "t"))
        )


def test_request_rewrites_for_the_hooks_https_fallback() -> None:
    action = HTTPGetAction(
        port=443, scheme="HTTPS", http_headers=(HTTPHeader(name="Authorization", value="x"),)
    )
    request = build_request(action, CONTAINER, "10.0.0.1", "lifecycle")
    plain = request.with_scheme("http").without_header("authorization")
    assert plain.url == "http://10.0.0.1:443"
    assert "Authorization" not in headers(plain) and headers(plain)["User-Agent"].startswith(
        "kube-lifecycle/"
    )


@pytest.mark.parametrize(
    ("port", "expected"),
    [(8080, 8080), ("http", 8080), ("9090", 9090), ("+81", 81)],
)
def test_resolve_container_port(port: int | str, expected: int) -> None:
    assert resolve_container_port(port, CONTAINER) == expected


@pytest.mark.parametrize(
    ("port", "message"),
    [
        ("metrics", 'strconv.Atoi: parsing "metrics": invalid syntax'),
        (" 80", 'strconv.Atoi: parsing " 80": invalid syntax'),
        (0, "invalid port number: 0"),
        (70000, "invalid port number: 70000"),
    ],
)
def test_unresolvable_ports_are_errors(port: int | str, message: str) -> None:
    with pytest.raises(ProbeError, match=message):
        resolve_container_port(port, CONTAINER)


def test_no_host_is_an_error() -> None:
    with pytest.raises(ProbeError):
        build_request(HTTPGetAction(port=80), CONTAINER, "")


@pytest.mark.parametrize(
    ("code", "result", "output"),
    [
        (200, ProbeResult.SUCCESS, "ok"),
        (204, ProbeResult.SUCCESS, "ok"),
        (302, ProbeResult.WARNING, "Probe terminated redirects, Response body: ok"),
        (399, ProbeResult.WARNING, "Probe terminated redirects, Response body: ok"),
        (400, ProbeResult.FAILURE, "HTTP probe failed with statuscode: 400"),
        (503, ProbeResult.FAILURE, "HTTP probe failed with statuscode: 503"),
        (199, ProbeResult.FAILURE, "HTTP probe failed with statuscode: 199"),
    ],
)
def test_judge(code: int, result: ProbeResult, output: str) -> None:
    assert judge(HttpGetResponse(code, "http://x", b"ok")) == ProbeOutcome(result, output)


# -- verdicts, retries, messages --------------------------------------------------------------


def test_verdicts_and_events() -> None:
    kind = ProbeKind.READINESS
    assert verdict_of(kind, ProbeOutcome(ProbeResult.SUCCESS, "x"), None) == ProbeVerdict(
        Result.SUCCESS
    )
    assert verdict_of(kind, ProbeOutcome(ProbeResult.WARNING, "moved"), None) == ProbeVerdict(
        Result.SUCCESS,
        event=ProbeEvent("Warning", "ProbeWarning", "Readiness probe warning: moved"),
    )
    assert verdict_of(kind, ProbeOutcome(ProbeResult.FAILURE, "503"), None) == ProbeVerdict(
        Result.FAILURE, event=ProbeEvent("Warning", "Unhealthy", "Readiness probe failed: 503")
    )
    assert verdict_of(kind, ProbeOutcome(ProbeResult.UNKNOWN), None) == ProbeVerdict(Result.FAILURE)
    errored = verdict_of(ProbeKind.STARTUP, ProbeOutcome(ProbeResult.UNKNOWN), ProbeError("e"))
    assert errored.error == "e"
    assert errored.event == ProbeEvent(
        "Warning", "Unhealthy", "Startup probe errored and resulted in unknown state: e"
    )


async def test_run_probe_retries_errors_up_to_three_times() -> None:
    attempts: list[int] = []

    async def flaky(kind: ProbeKind, probe: Probe, target: ProbeTarget) -> ProbeOutcome:
        attempts.append(1)
        if len(attempts) < 3:
            raise ProbeError("not yet")
        return ProbeOutcome(ProbeResult.SUCCESS)

    target = ProbeTarget(POD, CONTAINER, "c1", "10.0.0.1")
    verdict = await run_probe(flaky, ProbeKind.LIVENESS, Probe(), target)
    assert (len(attempts), verdict.result, verdict.error) == (3, Result.SUCCESS, None)

    async def broken(kind: ProbeKind, probe: Probe, target: ProbeTarget) -> ProbeOutcome:
        attempts.append(1)
        raise ProbeError("down")

    attempts.clear()
    verdict = await run_probe(broken, ProbeKind.LIVENESS, Probe(), target)
    assert (len(attempts), verdict.error) == (3, "down")


def test_text_helpers() -> None:
    assert format_pod(POD) == "web_default(u1)"
    assert go_quote('say "hi"\n') == '"say \\"hi\\"\\n"'
    assert [format_duration(s) for s in (1, 2.5, 60, 90, 90.5, 3600)] == [
        "1s",
        "2.5s",
        "1m0s",
        "1m30s",
        "1m30.5s",
        "1h0m0s",
    ]


# -- exec ------------------------------------------------------------------------------------


@attrs.define
class Reply:
    stdout: bytes = b""
    stderr: bytes = b""
    exit_code: int = 0


@attrs.define
class FakeExec:
    reply: Reply | Exception = attrs.field(factory=Reply)
    calls: list[tuple[str, list[str], int]] = attrs.field(factory=list)

    async def exec_sync(self, container_id: str, cmd: Iterable[str], timeout: int = 0) -> Reply:
        self.calls.append((container_id, list(cmd), timeout))
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


def exec_spec(*cmd: str, timeout: int = 1) -> Probe:
    return Probe(exec=ExecAction(command=cmd), timeout_seconds=timeout)


async def test_exec_probe_outcomes() -> None:
    target = ProbeTarget(POD, CONTAINER, "c1", "10.0.0.1")
    runner = FakeExec(Reply(stdout=b"fine\n"))
    outcome = await exec_probe.probe(runner, exec_spec("cat", "/ok", timeout=3), target)
    assert outcome == ProbeOutcome(ProbeResult.SUCCESS, "fine\n")
    assert runner.calls == [("c1", ["cat", "/ok"], 3)]

    runner.reply = Reply(stdout=b"out ", stderr=b"err", exit_code=2)
    outcome = await exec_probe.probe(runner, exec_spec("false"), target)
    assert outcome == ProbeOutcome(ProbeResult.FAILURE, "out err")

    runner.reply = Reply(stdout=b"x" * 20_000, exit_code=1)
    outcome = await exec_probe.probe(runner, exec_spec("false"), target)
    assert len(outcome.output) == 10 * 1024

    runner.reply = DeadlineExceeded("ExecSync", "deadline exceeded", Status.DEADLINE_EXCEEDED)
    outcome = await exec_probe.probe(runner, exec_spec("sleep", "5"), target)
    assert outcome == ProbeOutcome(ProbeResult.FAILURE, 'command "sleep 5" timed out')

    runner.reply = NotFound("ExecSync", "container not found", Status.NOT_FOUND)
    with pytest.raises(ProbeError, match="rpc error: code = NotFound desc = container not found"):
        await exec_probe.probe(runner, exec_spec("true"), target)


async def test_exec_commands_expand_only_literal_env() -> None:
    container = attrs.evolve(
        CONTAINER,
        env=(
            EnvVar(name="PORT", value="8080"),
            EnvVar(
                name="NODE",
                value_from=EnvVarSource(field_ref=ObjectFieldSelector(field_path="spec.nodeName")),
            ),
        ),
    )
    runner = FakeExec()
    target = ProbeTarget(POD, container, "c1", "")
    await exec_probe.probe(
        runner, exec_spec("check", "$(PORT)", "[$(NODE)]", "$(NONE)", "$$"), target
    )
    assert runner.calls[0][1] == ["check", "8080", "[]", "$(NONE)", "$"]


def test_cri_error_text() -> None:
    assert exec_probe.cri_error_text(CriError("ExecSync", "plain")) == "plain"
    err = CriError("ExecSync", "failed to exec", Status.UNKNOWN)
    assert exec_probe.cri_error_text(err) == "rpc error: code = Unknown desc = failed to exec"


async def test_action_prober_dispatch_errors() -> None:
    target = ProbeTarget(POD, CONTAINER, "c1", "10.0.0.1")
    prober = ActionProber(runtime=None)
    with pytest.raises(ProbeError, match="no container runtime"):
        await prober(ProbeKind.LIVENESS, exec_spec("true"), target)
    with pytest.raises(ProbeError, match="missing probe handler for web_default"):
        await prober(ProbeKind.LIVENESS, Probe(), target)
    with pytest.raises(ProbeError, match="no host"):
        spec = Probe(tcp_socket=TCPSocketAction(port=80))
        await prober(ProbeKind.LIVENESS, spec, attrs.evolve(target, pod_ip=""))
    runner = FakeExec()
    prober.runtime = runner
    outcome = await prober(ProbeKind.LIVENESS, exec_spec("true"), target)
    assert outcome.result is ProbeResult.SUCCESS and runner.calls
