"""The SNMP source against Debian's real net-snmp ``snmpd``: SNMPv3 USM and live loopback counters.

snmpd serves IF-MIB from the kernel (``/proc/net/dev``): ``lo`` has 64-bit ifHCIn/OutOctets, so the bytes
counters move when traffic crosses loopback. net-snmp caches the interface table for a few seconds, so a
test that waits for a counter to move polls until it does (bounded).

What the agent does on each USM failure (net-snmp 5.9):

- unknown user -> Report usmStatsUnknownUserNames -> ``AuthError``;
- wrong authentication key -> Report usmStatsWrongDigests -> ``AuthError``;
- wrong privacy key -> the agent cannot decrypt the scopedPDU ("error parsing ScopedPDU" in its log) and
  stays silent: no Report reaches the manager, so it reads as ``TimeoutError_`` (status ``timeout``).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator

import pytest
from snmpd_agent import USERS, Agent, User, snmpd

from collector.clock import FakeClock
from collector.config import SnmpConfig
from collector.errors import AuthError, SourceError, TimeoutError_
from collector.model import Sample
from collector.sources.snmp.source import SnmpSource
from collector.sources.snmp.transport import PysnmpWalker, V3Walker, make_walker
from collector.store import Store

pytestmark = pytest.mark.integration

BY_NAME = {u.name: u for u in USERS}
RX = "dci_interface_receive_bytes_total"


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with snmpd(tmp_path_factory.mktemp("snmpd")) as running:
        yield running


def v3_config(agent: Agent, user: User, **override: str | None) -> SnmpConfig:
    """A v3 config for ``user``; ``auth_key=`` / ``priv_key=`` / ``name=`` replace the right values."""
    fields: dict[str, object] = {
        "address": f"127.0.0.1:{agent.port}",
        "version": "3",
        "user": override.get("name", user.name),
        "modules": ["if_mib"],
        "timeout": override.get("timeout", "2s"),
        "retries": 0,
    }
    if user.auth:
        fields["auth_protocol"] = user.auth
        fields["auth_key_file"] = agent.key_file(user, "auth", override.get("auth_key"))
    if user.priv:
        fields["priv_protocol"] = user.priv
        fields["priv_key_file"] = agent.key_file(user, "priv", override.get("priv_key"))
    return SnmpConfig.model_validate(fields)


async def poll_once(cfg: SnmpConfig) -> list[Sample]:
    src = SnmpSource("dev", cfg)
    try:
        return await src.poll()
    finally:
        await src.close()


def lo(samples: list[Sample], metric: str) -> Sample:
    found = [s for s in samples if s.metric == metric and ("interface", "lo") in s.labels]
    assert len(found) == 1, f"{metric} for lo: {found}"
    return found[0]


@pytest.mark.parametrize(
    ("name", "walker"),
    [
        ("sha256aes", V3Walker),
        ("sha512aes256", V3Walker),
        ("shaaes256", V3Walker),  # AES-256 key extended from a SHA-1 key (Blumenthal, as net-snmp)
        ("shaaes", V3Walker),
        ("sha512aes", V3Walker),
        ("shades", PysnmpWalker),  # DES: not implemented by usm, pysnmp takes it
        ("md5aes128", V3Walker),
        ("sha224aes192", V3Walker),
        ("sha384aes192", V3Walker),
        ("shaaes192", V3Walker),  # AES-192 key extended from a SHA-1 key
        ("sha384aes256", V3Walker),
    ],
)
async def test_v3_auth_priv_reads_if_mib_for_lo(agent: Agent, name: str, walker: type) -> None:
    cfg = v3_config(agent, BY_NAME[name])
    assert isinstance(make_walker(cfg, 1.0), walker)
    samples = await poll_once(cfg)
    received = lo(samples, RX)
    # Linux: ifHCInOctets comes from /proc/net/dev, a 64-bit counter; never the 32-bit fallback.
    assert received.width == 64 and received.raw is not None and received.raw > 0
    assert lo(samples, "dci_interface_oper_up").value == 1.0
    assert lo(samples, "dci_interface_speed_bytes_per_second").value == 10 * 125_000  # lo: 10 Mb/s


@pytest.mark.parametrize("name", ["sha256auth", "sha224auth", "md5auth", "noauth"])
async def test_v3_auth_no_priv_and_no_auth(agent: Agent, name: str) -> None:
    assert lo(await poll_once(v3_config(agent, BY_NAME[name])), RX).raw


async def test_v2c_community(agent: Agent, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SNMPD_COMMUNITY", "public")
    cfg = SnmpConfig(address=f"127.0.0.1:{agent.port}", community_env="SNMPD_COMMUNITY", modules=("if_mib",))
    assert lo(await poll_once(cfg), RX).raw


async def test_a_wrong_community_reads_as_no_response_and_says_it_may_be_the_community(
    agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SNMPD_COMMUNITY", "not-the-community")
    cfg = SnmpConfig(
        address=f"127.0.0.1:{agent.port}",
        community_env="SNMPD_COMMUNITY",
        modules=("if_mib",),
        timeout="500ms",
        retries=0,
    )
    with pytest.raises(TimeoutError_, match=r"no response \(wrong community\?"):
        await poll_once(cfg)


def loopback_traffic(datagrams: int = 200, size: int = 8000) -> int:
    """Send UDP and TCP bytes over 127.0.0.1; returns the payload bytes sent."""
    with (
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx,
    ):
        rx.bind(("127.0.0.1", 0))
        for _ in range(datagrams):
            tx.sendto(b"x" * size, rx.getsockname())
    with (
        socket.create_server(("127.0.0.1", 0)) as server,
        socket.create_connection(server.getsockname()) as client,
    ):
        conn, _ = server.accept()
        with conn:
            client.sendall(b"y" * (datagrams * size))
            got = 0
            while got < datagrams * size:
                got += len(conn.recv(1 << 16))
    return 2 * datagrams * size


async def test_lo_counters_move_through_the_store(agent: Agent) -> None:
    store = Store(FakeClock())
    src = SnmpSource("dev", v3_config(agent, BY_NAME["sha256aes"]))
    key = (("device", "dev"), ("interface", "lo"))
    try:
        store.ingest("dev", "snmp", await src.poll(), 0)
        first = store.value(RX, key)
        assert isinstance(first, int | float)
        sent = loopback_traffic()
        deadline = time.monotonic() + 10  # net-snmp caches the interface table for a few seconds
        now: object = first
        while now == first and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            store.ingest("dev", "snmp", await src.poll(), 0)
            now = store.value(RX, key)
    finally:
        await src.close()
    assert isinstance(now, int | float)
    assert now - first >= sent  # at least our payload (plus headers and other loopback users)
    assert now - first < 1 << 40  # no false spike (a wrap or reset misread would add ~2^64)
    discontinuities = (("device", "dev"), ("metric", RX))
    assert store.value("dci_counter_discontinuities_total", discontinuities) is None


async def test_wrong_auth_key_is_auth_error(agent: Agent) -> None:
    cfg = v3_config(agent, BY_NAME["sha256aes"], auth_key="not-the-auth-key")
    with pytest.raises(AuthError) as e:
        await poll_once(cfg)
    assert e.value.status == "auth_error"
    assert "not-the-auth-key" not in str(e.value)


async def test_unknown_user_is_auth_error(agent: Agent) -> None:
    with pytest.raises(AuthError) as e:
        await poll_once(v3_config(agent, BY_NAME["sha256aes"], name="nobody"))
    assert e.value.status == "auth_error"


async def test_wrong_priv_key_reads_as_timeout(agent: Agent) -> None:
    cfg = v3_config(agent, BY_NAME["sha256aes"], priv_key="not-the-priv-key", timeout="500ms")
    with pytest.raises(SourceError) as e:
        await poll_once(cfg)
    # net-snmp drops a scopedPDU it cannot decrypt without a Report: the manager only sees silence.
    assert isinstance(e.value, TimeoutError_ | AuthError)
    assert "not-the-priv-key" not in str(e.value)


async def test_security_level_above_the_user_is_auth_error(agent: Agent) -> None:
    # "noauth" has no keys: asking for authNoPriv with it fails the agent's USM checks.
    cfg = v3_config(agent, BY_NAME["sha256auth"], name="noauth")
    with pytest.raises(AuthError):
        await poll_once(cfg)
