"""/flagz, /statusz, /metrics/slis and PUT /debug/flags/v as upstream's kubelet answers."""

from __future__ import annotations

import logging
import random

from kubelet.logs import set_verbosity, setup_logging
from kubelet.metrics import exposition
from kubelet.server.asgi import Request
from kubelet.server.healthz import NamedCheck
from kubelet.server.zpages import HealthSLIs, flag_values, flagz, set_verbosity_handler, statusz

WARNING = (
    "Warning: This endpoint is not meant to be machine parseable, has no formatting "
    "compatibility guarantees and is for debugging purposes only."
)


def get(path: str, accept: str = "", method: str = "GET") -> Request:
    return Request(method, path, {}, {"accept": accept} if accept else {})


def test_flagz_lists_every_flag_given_or_default() -> None:
    given = {"node-ip": ("10.0.0.5",), "v": ("3",)}
    response = flagz(get("/flagz"), given, random.Random(2))
    lines = response.body.decode().split("\n")
    assert lines[:3] == ["", "kubelet flagz", WARNING]
    body = lines[3:-1]
    delim = body[0].split("address", 1)[1].split("0.0.0.0")[0]
    assert body[0] == f"address{delim}0.0.0.0"
    assert f"node-ip{delim}10.0.0.5" in body
    assert f"v{delim}3" in body
    names = [line.partition(delim)[0] for line in body]
    assert names == sorted(names)
    assert flag_values({})["root-dir"] == "/var/lib/kubelet"


def test_statusz_text_and_406_for_other_types() -> None:
    started = 1_700_000_000.0
    response = statusz(get("/statusz"), started, now=lambda: started + 3723, rng=random.Random(0))
    lines = response.body.decode().split("\n")
    assert lines[:4] == ["", "kubelet statusz", WARNING, ""]
    delim = lines[4].removeprefix("Started").split(" Tue")[0]
    assert lines[4] == f"Started{delim} Tue Nov 14 22:13:20 UTC 2023"
    assert lines[5] == f"Up{delim} 1 hr 02 min 03 sec"
    assert lines[7] == f"Binary version{delim} 1.36.0"
    assert lines[8] == f"Emulation version{delim} 1.36"
    assert lines[9].startswith(f"Paths{delim} /configz")
    refused = statusz(get("/statusz", "application/json"), started)
    assert (refused.status, refused.body) == (
        406,
        b"media type not acceptable, must be: text/plain\n",
    )
    assert statusz(get("/statusz", "text/plain;charset=utf-8"), started).status == 200


def test_put_debug_flags_v_changes_the_verbosity() -> None:
    before = logging.getLogger().level
    handler = setup_logging()
    try:
        reply = set_verbosity_handler(get("/debug/flags/v", method="PUT"), b"6")
        assert (reply.status, reply.body) == (
            200,
            b"successfully set klog.logging.verbosity to 6\n",
        )
        assert logging.getLogger().level <= logging.DEBUG
        bad = set_verbosity_handler(get("/debug/flags/v", method="PUT"), b"x")
        assert (bad.status, bad.body) == (
            400,
            b"failed set klog.logging.verbosity x: "
            b'strconv.ParseUint: parsing "x": invalid syntax\n',
        )
        assert set_verbosity_handler(get("/debug/flags/v"), b"").status == 406
        set_verbosity(0)
        assert logging.getLogger().level > logging.DEBUG
    finally:
        logging.getLogger().removeHandler(handler)
        logging.getLogger().setLevel(before)


def test_health_slis_record_each_check_run() -> None:
    slis = HealthSLIs()
    state = {"ok": True}
    [ping, sync] = slis.wrap(
        [
            NamedCheck("ping", lambda: None),
            NamedCheck("syncloop", lambda: None if state["ok"] else "x"),
        ]
    )
    ping.check(), sync.check()
    state["ok"] = False
    sync.check()
    text = exposition(slis.registry).decode()
    assert (
        "# HELP kubernetes_healthcheck [STABLE] This metric records the result of a single "
        "healthcheck." in text
    )
    assert 'kubernetes_healthcheck{name="syncloop",type="healthz"} 0.0' in text
    assert (
        'kubernetes_healthchecks_total{name="syncloop",status="success",type="healthz"} 1.0' in text
    )
    assert (
        'kubernetes_healthchecks_total{name="syncloop",status="error",type="healthz"} 1.0' in text
    )
    assert 'kubernetes_healthcheck{name="ping",type="healthz"} 1.0' in text
