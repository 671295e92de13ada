"""Kubeconfig exec credential plugins and impersonation: what the plugin gets, what its
answer may be, when it runs again, and the headers the API client sends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from kubelet.api import ApiClient, ExecPluginError, Unauthorized
from kubelet.api.errors import ApiUnavailable
from kubelet.api.execauth import ExecAuthenticator, ExecConfig, decode_answer
from kubelet.api.kubeconfig import parse_kubeconfig
from kubelet.boundedio import inline

from .test_kubeconfig import SOURCE, Issued, kubeconfig
from .test_kubeconfig import pki as pki  # a fixture

V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"


def answer(version: str = V1, **status: Any) -> dict[str, Any]:
    return {"kind": "ExecCredential", "apiVersion": version, "status": status}


def plugin(tmp: Path, output: str, code: int = 0) -> Path:
    """A plugin that records its environment and arguments, prints ``output``."""
    script = tmp / "plugin"
    script.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$KUBERNETES_EXEC_INFO" > {tmp}/info\n'
        f'echo "$REGION $*" > {tmp}/argv\n'
        f"cat <<'EOF'\n{output}\nEOF\n"
        f"exit {code}\n"
    )
    script.chmod(0o755)
    return script


def authenticator(tmp: Path, output: str, code: int = 0, **kw: Any) -> ExecAuthenticator:
    config = ExecConfig(
        command=str(plugin(tmp, output, code)),
        api_version=kw.pop("api_version", V1),
        args=("--region", "eu"),
        env=(("REGION", "west"),),
        interactive_mode=kw.pop("interactive_mode", "Never"),
        **kw,
    )
    return ExecAuthenticator(config, environ=lambda: {"PATH": "/usr/bin:/bin"}, run_sync=inline)


# -- the answer -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (answer(V1BETA1, token="t"), f"configured to use API version {V1}, plugin returned "
         f"version {V1BETA1}"),
        ({"kind": "ExecCredential", "apiVersion": V1}, "exec plugin didn't return a status field"),
        (answer(), "exec plugin didn't return a token or cert/key pair"),
        (answer(clientCertificateData="x"), "returned only certificate or key, not both"),
        (answer(token="t", expirationTimestamp="soon"), "expirationTimestamp is not an RFC 3339"),
        (answer(clientCertificateData="x", clientKeyData="y"), "failed parsing client key"),
        ([1], "not an ExecCredential"),
    ],
)  # fmt: skip
def test_answers_that_give_no_credentials(doc: Any, message: str) -> None:
    with pytest.raises(ExecPluginError, match=message):
        decode_answer(doc, V1)


def test_a_token_with_its_expiry() -> None:
    doc = answer(token="s3cr3t", expirationTimestamp="2030-01-01T00:00:00Z")
    creds = decode_answer(doc, V1)
    assert (creds.token, creds.expires) == ("s3cr3t", 1893456000.0)
    assert "s3cr3t" not in repr(creds)


# -- runs -------------------------------------------------------------------------------


async def test_the_plugin_gets_exec_info_args_and_env_and_its_token_is_kept(
    tmp_path: Path,
) -> None:
    auth = authenticator(tmp_path, json.dumps(answer(token="tok-1")))
    assert (await auth.credentials()).token == "tok-1"
    assert (await auth.credentials()).token == "tok-1"
    assert auth.runs == 1  # no expiry: kept for ever
    info = json.loads((tmp_path / "info").read_text())
    assert info == {"kind": "ExecCredential", "apiVersion": V1, "spec": {"interactive": False}}
    assert (tmp_path / "argv").read_text().strip() == "west --region eu"


async def test_expiry_and_401_run_the_plugin_again(tmp_path: Path) -> None:
    now = [1000.0]
    auth = authenticator(
        tmp_path, json.dumps(answer(token="tok", expirationTimestamp="1970-01-01T00:20:00Z"))
    )
    auth.clock = lambda: now[0]
    await auth.credentials()
    now[0] = 1199.0
    await auth.credentials()
    assert auth.runs == 1
    now[0] = 1201.0  # past 00:20:00
    await auth.credentials()
    assert auth.runs == 2
    now[0] = 0.0
    auth.unauthorized("an older token")  # a request that carried another answer
    await auth.credentials()
    assert auth.runs == 2
    auth.unauthorized("tok")
    await auth.credentials()
    assert auth.runs == 3


async def test_always_interactive_fails_as_upstream_without_a_terminal(tmp_path: Path) -> None:
    auth = authenticator(tmp_path, "{}", interactive_mode="Always")
    with pytest.raises(ExecPluginError) as info:
        await auth.credentials()
    assert str(info.value) == (
        "exec plugin cannot support interactive mode: standard input is not a terminal"
    )
    assert auth.runs == 0


async def test_a_failing_or_missing_plugin(tmp_path: Path) -> None:
    auth = authenticator(tmp_path, "", code=3)
    with pytest.raises(ExecPluginError, match=r"failed with exit code 3$"):
        await auth.credentials()
    missing = ExecAuthenticator(
        ExecConfig(command="/nonexistent/plugin", api_version=V1, install_hint="apt install x")
    )
    with pytest.raises(ExecPluginError) as info:
        await missing.credentials()
    assert str(info.value) == "exec: executable /nonexistent/plugin not found\n\napt install x"


async def test_a_certificate_pair_reaches_the_listeners(
    tmp_path: Path, pki: dict[str, Issued]
) -> None:
    client = pki["client"]
    output = answer(clientCertificateData=client.cert.decode(), clientKeyData=client.key.decode())
    auth = authenticator(tmp_path, json.dumps(output))
    seen: list[tuple[bytes, bytes]] = []
    auth.certificate_listeners.append(lambda c, k: seen.append((c, k)))
    creds = await auth.credentials()
    assert (creds.token, seen) == ("", [(client.cert, client.key)])


# -- through the kubeconfig and the API client --------------------------------------------


def exec_kubeconfig(command: str, **user: Any) -> str:
    doc = kubeconfig(
        {"server": "https://api.test:6443", "insecure-skip-tls-verify": True},
        {"exec": {"command": command, "apiVersion": V1BETA1}, **user},
    )
    return yaml.safe_dump(doc)


async def test_the_api_client_sends_the_plugin_token_and_impersonation_headers(
    tmp_path: Path,
) -> None:
    script = plugin(tmp_path, json.dumps(answer(V1BETA1, token="exec-tok")))
    text = exec_kubeconfig(
        str(script), **{"as": "bob", "as-groups": ["g1", "g2"], "as-user-extra": {"a/b": ["x"]}}
    )
    connection = parse_kubeconfig(text, SOURCE)
    assert connection.exec_auth is not None
    assert connection.exec_auth.config.interactive_mode == "IfAvailable"  # v1beta1's default
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        code = 401 if len(seen) == 1 else 200
        return httpx.Response(code, json={"kind": "Status", "code": code} if code > 200 else {})

    async with ApiClient.open(connection, transport=httpx.MockTransport(handler)) as client:
        with pytest.raises(Unauthorized):
            await client.get("/api/v1/nodes/n1")
        await client.get("/api/v1/nodes/n1")
    assert connection.exec_auth.runs == 2  # the 401 ran it again
    request = seen[-1]
    assert request.headers["authorization"] == "Bearer exec-tok"
    assert request.headers["impersonate-user"] == "bob"
    assert request.headers.get_list("impersonate-group") == ["g1", "g2"]
    assert request.headers["impersonate-extra-a%2Fb"] == "x"


async def test_a_plugin_failure_is_an_unavailable_api(tmp_path: Path) -> None:
    script = plugin(tmp_path, "", code=1)
    connection = parse_kubeconfig(exec_kubeconfig(str(script)), SOURCE)
    transport = httpx.MockTransport(lambda r: httpx.Response(200, json={}))
    async with ApiClient.open(connection, transport=transport) as client:
        with pytest.raises(ApiUnavailable, match="getting credentials: exec: executable"):
            await client.get("/api/v1/nodes/n1")


def test_a_token_in_the_kubeconfig_wins_over_exec(tmp_path: Path) -> None:
    connection = parse_kubeconfig(exec_kubeconfig("aws", token="static"), SOURCE)
    assert connection.exec_auth is None
    assert connection.authorization() == "Bearer static"
