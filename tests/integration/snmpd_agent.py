"""Run Debian's net-snmp ``snmpd`` on a free loopback port with SNMPv3 users and a v2c community.

Used by ``test_snmpd.py`` and ``bench/bench_snmp.py``. Every user's keys are written to files next to the
generated config, so a test points ``auth_key_file`` / ``priv_key_file`` at them.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from snmp_agents import _answers, free_udp_port

from tests.integration.processes import stop_process

SNMPD = Path("/usr/sbin/snmpd")
COMMUNITY = "public"


@dataclass(frozen=True)
class User:
    """One USM user: net-snmp's protocol names in ``createUser``, ours in the config."""

    name: str
    level: str  # rouser level: noauth, auth, priv
    auth: str | None = None  # spanwatch SnmpAuth name
    auth_netsnmp: str | None = None
    priv: str | None = None  # spanwatch SnmpPriv name
    priv_netsnmp: str | None = None
    auth_key: str = "auth-key-0123456789"
    priv_key: str = "priv-key-9876543210"

    def create_line(self) -> str:
        """The ``createUser`` directive."""
        words = ["createUser", self.name]
        if self.auth_netsnmp:
            words += [self.auth_netsnmp, f'"{self.auth_key}"']
            if self.priv_netsnmp:
                words += [self.priv_netsnmp, f'"{self.priv_key}"']
        return " ".join(words)


USERS = (
    User("sha256aes", "priv", "SHA256", "SHA-256", "AES", "AES"),
    User("sha512aes256", "priv", "SHA512", "SHA-512", "AES256", "AES-256"),
    # SHA-1 gives 20 bytes and AES-256 needs 32: exercises the key extension (net-snmp: Blumenthal).
    User("shaaes256", "priv", "SHA", "SHA", "AES256", "AES-256"),
    User("shaaes", "priv", "SHA", "SHA", "AES", "AES"),
    User("sha512aes", "priv", "SHA512", "SHA-512", "AES", "AES"),
    User("shades", "priv", "SHA", "SHA", "DES", "DES"),  # not in usm: the pysnmp fallback
    # every other protocol the config accepts (net-snmp 5.9.3 has SHA-224/384 and Blumenthal AES-192)
    User("md5aes128", "priv", "MD5", "MD5", "AES128", "AES"),
    User("sha224aes192", "priv", "SHA224", "SHA-224", "AES192", "AES-192"),
    User("sha384aes192", "priv", "SHA384", "SHA-384", "AES192", "AES-192"),
    User("shaaes192", "priv", "SHA", "SHA", "AES192", "AES-192"),  # 20-byte key extended to 24
    User("sha384aes256", "priv", "SHA384", "SHA-384", "AES256", "AES-256"),
    User("sha224auth", "auth", "SHA224", "SHA-224"),
    User("md5auth", "auth", "MD5", "MD5"),
    User("sha256auth", "auth", "SHA256", "SHA-256"),
    User("noauth", "noauth"),
)


@dataclass(frozen=True)
class Agent:
    """A running snmpd: its port and where the users' key files are."""

    port: int
    keys: Path

    def key_file(self, user: User, kind: str, override: str | None = None) -> Path:
        """A file holding ``user``'s ``kind`` ("auth"/"priv") key, or ``override`` instead."""
        path = self.keys / f"{user.name}.{kind}{'.override' if override is not None else ''}"
        path.write_text(override if override is not None else getattr(user, f"{kind}_key"))
        return path


def _config(port: int) -> str:
    lines = [f"agentAddress udp:127.0.0.1:{port}", f"rocommunity {COMMUNITY} 127.0.0.1"]
    for user in USERS:
        lines += [user.create_line(), f"rouser {user.name} {user.level}"]
    return "\n".join(lines) + "\n"


@contextmanager
def snmpd(folder: Path) -> Iterator[Agent]:
    """Run snmpd in the foreground with a generated config under ``folder``; skip when not installed.

    Yields:
        the running agent.
    """
    if not SNMPD.exists():
        pytest.skip(f"{SNMPD} is not installed (apt-get install snmpd)")
    port = free_udp_port()
    conf = folder / "snmpd.conf"
    conf.write_text(_config(port))
    # MIBS="" keeps snmpd from loading (and complaining about) MIB text files it does not need.
    env = {**os.environ, "SNMP_PERSISTENT_DIR": str(folder / "persist"), "MIBS": ""}
    cmd = [str(SNMPD), "-f", "-Lo", "-C", "-c", str(conf), "-p", str(folder / "snmpd.pid")]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while not _answers(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"snmpd did not start (exit status {proc.poll()})")
            time.sleep(0.05)
        yield Agent(port, folder)
    finally:
        stop_process(proc, 5)
