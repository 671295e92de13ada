"""The DRA device health cache: changes reported, stale entries read Unknown, each
device's own timeout and message honoured."""

import trio

from kubelet.cm.dra import dra_health_v1alpha1_api_pb2 as pb
from kubelet.cm.dra.health import DeviceHealth, HealthCache, _reported

KEY = ("gpu", "pool", "dev-0")


def report(
    health: str, message: str = "", timeout: float = 0.0
) -> dict[tuple[str, str], DeviceHealth]:
    return {("pool", "dev-0"): DeviceHealth(health, message, timeout)}


async def test_changes_and_staleness(autojump_clock: trio.abc.Clock) -> None:
    cache = HealthCache(timeout=30.0)
    assert cache.get(*KEY).health == "Unknown"
    changed = cache.update("gpu", report("Healthy"))
    assert changed == {KEY}
    assert cache.get(*KEY).health == "Healthy"
    assert cache.update("gpu", report("Healthy")) == set()
    assert cache.update("gpu", report("Unhealthy")) == {KEY}
    await trio.sleep(31)
    assert cache.get(*KEY).health == "Unknown"
    assert cache.update("gpu", {}) == {KEY}
    assert cache.clear("gpu") == {KEY}


async def test_a_devices_own_timeout_decides_when_it_goes_unknown(
    autojump_clock: trio.abc.Clock,
) -> None:
    cache = HealthCache(timeout=30.0)
    cache.update("gpu", report("Healthy", timeout=120))
    await trio.sleep(100)  # past the default, within its own
    assert cache.get(*KEY) == DeviceHealth("Healthy", "", 120)
    assert cache.update("gpu", {}) == set()  # left out but not stale yet
    await trio.sleep(21)
    assert cache.get(*KEY).health == "Unknown"
    cache.update("gpu", report("Healthy", timeout=5))
    await trio.sleep(6)  # a short timeout goes stale before the default would
    assert cache.get(*KEY).health == "Unknown"
    assert cache.update("gpu", {}) == {KEY}


async def test_message_kept_compared_and_cleared_when_stale(
    autojump_clock: trio.abc.Clock,
) -> None:
    cache = HealthCache(timeout=30.0)
    cache.update("gpu", report("Unhealthy", "ECC errors"))
    assert cache.get(*KEY) == DeviceHealth("Unhealthy", "ECC errors")
    # a new message alone, or a new timeout alone, is a change
    assert cache.update("gpu", report("Unhealthy", "XID 79")) == {KEY}
    assert cache.update("gpu", report("Unhealthy", "XID 79", 60)) == {KEY}
    await trio.sleep(61)
    assert cache.get(*KEY) == DeviceHealth("Unknown", "")
    assert cache.update("gpu", {}) == {KEY}
    assert cache.get(*KEY).message == ""


async def test_messages_off_are_dropped(autojump_clock: trio.abc.Clock) -> None:
    cache = HealthCache(messages=False)
    cache.update("gpu", report("Unhealthy", "ECC errors"))
    assert cache.get(*KEY) == DeviceHealth("Unhealthy", "")
    assert cache.update("gpu", report("Unhealthy", "XID 79")) == set()


def test_reply_decoding_negative_timeout_and_long_message() -> None:
    reply = pb.NodeWatchResourcesResponse(
        devices=[
            pb.DeviceHealth(
                device=pb.DeviceIdentifier(pool_name="pool", device_name="a"),
                health=pb.UNHEALTHY,
                health_check_timeout_seconds=-5,
                message="x" * 2000,
            ),
            pb.DeviceHealth(
                device=pb.DeviceIdentifier(pool_name="pool", device_name="b"),
                health=pb.HEALTHY,
                health_check_timeout_seconds=90,
                message="fine",
            ),
        ]
    )
    got = _reported("gpu", reply)
    a = got[("pool", "a")]
    assert (a.health, a.timeout) == ("Unhealthy", 0.0)  # negative: the default
    assert len(a.message) == 1024 and a.message.endswith("x...")
    assert got[("pool", "b")] == DeviceHealth("Healthy", "fine", 90.0)


def test_the_health_names_follow_the_generated_enum() -> None:
    from kubelet.cm.dra import health

    assert health._NAMES == {pb.HEALTHY: health.HEALTHY, pb.UNHEALTHY: health.UNHEALTHY}
    assert pb.UNKNOWN not in health._NAMES
