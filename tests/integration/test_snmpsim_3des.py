"""SNMPv3 with 3DES privacy against a real agent: snmpsim's v3 responder (net-snmp 5.9.3 has no 3DES).

Our own USM does not implement DES or 3DES; ``make_walker`` hands such users to pysnmp
(``PysnmpWalker``). snmpsim is pysnmp too, but its agent side (key localisation, 3DES-EDE in CBC mode
with the salt of RFC 3414 / draft-reeder-snmpv3-usm-3desede) is a different code path from the manager's.
With an empty context name snmpsim serves the data file named ``self`` (the local engine).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from collector.config import SnmpConfig
from collector.errors import AuthError
from collector.model import Sample
from collector.sources.snmp.source import SnmpSource
from collector.sources.snmp.transport import PysnmpWalker, make_walker
from tests.integration.processes import stop_process
from tests.integration.snmp_agents import _answers, free_udp_port, recordings

pytestmark = pytest.mark.integration

USER, AUTH_KEY, PRIV_KEY = "des3user", "auth-key-0123456789", "priv-key-9876543210"
RECORDING = "junos_qfx5100"


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    """snmpsim with one 3DES user (SHA authentication) serving a Junos recording; yields (port, folder)."""
    exe = Path(sys.executable).parent / "snmpsim-command-responder"
    if not exe.exists():
        pytest.skip("snmpsim-command-responder is not installed in this environment")
    src = recordings() / f"{RECORDING}.snmprec"
    folder = tmp_path_factory.mktemp("snmpsim3des")
    (folder / "data").mkdir()
    (folder / "data" / "self.snmprec").write_bytes(src.read_bytes())
    (folder / "data" / "public.snmprec").write_text("1.3.6.1.2.1.1.5.0|4|probe\n")  # v2c start-up probe
    (folder / "auth.key").write_text(AUTH_KEY)
    (folder / "priv.key").write_text(PRIV_KEY)
    port = free_udp_port()
    cmd = [
        str(exe),
        "--v3-engine-id=auto",
        f"--v3-user={USER}",
        "--v3-auth-proto=SHA",
        f"--v3-auth-key={AUTH_KEY}",
        "--v3-priv-proto=3DES",
        f"--v3-priv-key={PRIV_KEY}",
        f"--data-dir={folder / 'data'}",
        f"--cache-dir={folder / 'cache'}",
        f"--agent-udpv4-endpoint=127.0.0.1:{port}",
    ]
    log = (folder / "snmpsim.log").open("wb")
    proc = subprocess.Popen(
        cmd, env={**os.environ, "SNMPSIM_ALLOW_ROOT": "true"}, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 60
        while not _answers(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"snmpsim did not start (exit status {proc.poll()})")
            time.sleep(0.1)
        yield port, folder
    finally:
        stop_process(proc, 5)
        log.close()


def _config(port: int, folder: Path, **override: str) -> SnmpConfig:
    fields = {
        "address": f"127.0.0.1:{port}",
        "version": "3",
        "user": USER,
        "auth_protocol": "SHA",
        "auth_key_file": str(folder / "auth.key"),
        "priv_protocol": "3DES",
        "priv_key_file": str(folder / "priv.key"),
        "modules": ["if_mib"],
        "timeout": "5s",
        "retries": 0,
    }
    fields.update(override)
    return SnmpConfig.model_validate(fields)


async def _poll(cfg: SnmpConfig) -> list[Sample]:
    source = SnmpSource("dev", cfg)
    try:
        return await source.poll()
    finally:
        await source.close()


def _recorded_octets() -> dict[str, int]:
    """ifName -> ifHCInOctets as the recording holds them."""
    names: dict[str, str] = {}
    octets: dict[str, int] = {}
    for line in (recordings() / f"{RECORDING}.snmprec").read_text().splitlines():
        oid, kind, value = line.split("|", 2)
        if oid.startswith("1.3.6.1.2.1.31.1.1.1.1.") and kind == "4":
            names[oid.rsplit(".", 1)[1]] = value
        elif oid.startswith("1.3.6.1.2.1.31.1.1.1.6.") and kind == "70":
            octets[oid.rsplit(".", 1)[1]] = int(value)
    return {names[i]: v for i, v in octets.items() if i in names}


async def test_3des_reads_if_mib_from_a_real_agent(agent: tuple[int, Path]) -> None:
    port, folder = agent
    cfg = _config(port, folder)
    assert isinstance(make_walker(cfg, 1.0), PysnmpWalker)
    samples = await _poll(cfg)
    got = {
        dict(s.labels)["interface"]: s.raw
        for s in samples
        if s.metric == "dci_interface_receive_bytes_total" and s.width == 64
    }
    recorded = _recorded_octets()
    assert len(got) >= 40 and recorded
    assert {k: got[k] for k in recorded if k in got} == {k: v for k, v in recorded.items() if k in got}
    assert any(v > 0 for v in got.values())


@pytest.mark.parametrize(
    "override",
    [
        {"priv_key_file": "wrong"},  # wrong 3DES key
        {"priv_protocol": "DES"},  # single DES against a 3DES user
        {"priv_protocol": "AES"},  # AES (our own USM) against it
    ],
    ids=["wrong-key", "des", "aes"],
)
async def test_3des_user_is_not_served_with_other_privacy(
    agent: tuple[int, Path], override: dict[str, str]
) -> None:
    port, folder = agent
    (folder / "wrong").write_text("not-the-priv-key")
    if "priv_key_file" in override:
        override = {"priv_key_file": str(folder / override["priv_key_file"])}
    # Unlike net-snmp, which stays silent, snmpsim answers with a usmStatsDecryptionErrors Report: the
    # agent really decrypts with 3DES, and the error names the privacy key or protocol.
    with pytest.raises(AuthError, match=r"(?i)cipher|decrypt"):
        await _poll(_config(port, folder, timeout="1s", **override))
