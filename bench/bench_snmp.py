"""Benchmark: values decoded per CPU second on a large SNMP walk (issue 2 goal: >= 10k/s).

SNMPv2c: serves a generated walk (``--rows`` Counter64 rows, written to a temp dir) with snmpsim on
127.0.0.1 and walks it with (a) net-snmp ``snmpbulkwalk -Cr50 -On``, (b) plain pysnmp hlapi
``bulk_walk_cmd``, (c) the spanwatch walker.

SNMPv3 authPriv (SHA-256 + AES-128): Debian's ``snmpd`` on 127.0.0.1 (skipped when not installed);
each client walks its mib-2 subtree ``--v3-rounds`` times, with the same three clients (d) ``snmpbulkwalk
-v3``, (e) pysnmp ``bulk_walk_cmd`` with ``UsmUserData``, (f) spanwatch ``V3Walker`` (own USM).

CPU is this process's ``time.process_time`` for the Python clients, and the waited-for children's
rusage for net-snmp; the agent's own CPU is not counted. Run: ``.venv/bin/python bench/bench_snmp.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))

from snmp_agents import snmpsim

from collector.sources.snmp import usm
from collector.sources.snmp.transport import V2cWalker, V3Walker
from collector.sources.snmp.walk import walk

MIB2 = "1.3.6.1.2.1"

ROOT = "1.3.6.1.2.1.31.1.1.1.6"


def write_walk(folder: Path, rows: int) -> None:
    """A Counter64 column with ``rows`` rows (values vary so encodings differ in length)."""
    lines = [f"{ROOT}.{i}|70|{i * 7919 * 1_000_003}" for i in range(1, rows + 1)]
    (folder / "bench.snmprec").write_text("\n".join(lines) + "\n")


def bench_netsnmp(port: int) -> tuple[int, float]:
    exe = shutil.which("snmpbulkwalk")
    if exe is None:
        return 0, float("nan")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [exe, "-v2c", "-c", "bench", "-Cr50", "-On", "-t", "5", f"127.0.0.1:{port}", ROOT],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out.count("\n"), cpu


async def bench_pysnmp(port: int) -> tuple[int, float]:
    from pysnmp.hlapi.v3arch.asyncio import (
        CommunityData,
        ContextData,
        ObjectIdentity,
        ObjectType,
        SnmpEngine,
        UdpTransportTarget,
        bulk_walk_cmd,
    )

    engine = SnmpEngine()
    target = await UdpTransportTarget.create(("127.0.0.1", port), timeout=5, retries=1)
    n = 0
    start = time.process_time()
    async for ind, status, _, binds in bulk_walk_cmd(
        engine,
        CommunityData("bench"),
        target,
        ContextData(),
        0,
        50,
        ObjectType(ObjectIdentity(ROOT)),
        lexicographicMode=False,
    ):
        if ind or status:
            break
        n += len(binds)
    cpu = time.process_time() - start
    engine.close_dispatcher()
    return n, cpu


async def bench_ours(port: int) -> tuple[int, float]:
    walker = V2cWalker("127.0.0.1", port, "bench", 5.0, 1)
    root = tuple(int(x) for x in ROOT.split("."))
    start = time.process_time()
    got = await walk(walker, [root], max_repetitions=50, max_rows=1_000_000, max_requests=100_000)
    cpu = time.process_time() - start
    await walker.close()
    return len(got[root]), cpu


def bench_netsnmp_v3(port: int, user: Any, rounds: int) -> tuple[int, float]:
    exe = shutil.which("snmpbulkwalk")
    if exe is None:
        return 0, float("nan")
    cmd = [exe, "-v3", "-l", "authPriv", "-u", user.name, "-a", "SHA-256", "-A", user.auth_key]
    cmd += ["-x", "AES", "-X", user.priv_key, "-Cr50", "-On", "-t", "5", f"127.0.0.1:{port}", MIB2]
    env = {**os.environ, "MIBS": ""}
    n = 0
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(rounds):
        n += subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout.count("\n")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return n, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


async def bench_pysnmp_v3(port: int, user: Any, rounds: int) -> tuple[int, float]:
    from collector.sources.snmp.transport import hlapi

    hl = hlapi()
    auth = hl.UsmUserData(
        user.name,
        authKey=user.auth_key,
        privKey=user.priv_key,
        authProtocol=hl.usmHMAC192SHA256AuthProtocol,
        privProtocol=hl.usmAesCfb128Protocol,
    )
    engine = hl.SnmpEngine()
    target = await hl.UdpTransportTarget.create(("127.0.0.1", port), timeout=5, retries=1)
    n = 0
    start = time.process_time()
    for _ in range(rounds):
        async for ind, status, _, binds in hl.bulk_walk_cmd(
            engine,
            auth,
            target,
            hl.ContextData(),
            0,
            50,
            hl.ObjectType(hl.ObjectIdentity(MIB2)),
            lexicographicMode=False,
            lookupMib=False,
        ):
            if ind or status:
                break
            n += len(binds)
    cpu = time.process_time() - start
    engine.close_dispatcher()
    return n, cpu


async def bench_ours_v3(port: int, user: Any, rounds: int) -> tuple[int, float]:
    creds = usm.Credentials(
        user.name.encode(), "SHA256", user.auth_key.encode(), "AES", user.priv_key.encode()
    )
    walker = V3Walker("127.0.0.1", port, creds, 5.0, 1)
    root = tuple(int(x) for x in MIB2.split("."))
    n = 0
    start = time.process_time()  # includes engine discovery and key localisation
    for _ in range(rounds):
        got = await walk(walker, [root], max_repetitions=50, max_rows=1_000_000, max_requests=100_000)
        n += len(got[root])
    cpu = time.process_time() - start
    await walker.close()
    return n, cpu


def report(title: str, results: dict[str, tuple[int, float]], base_name: str) -> None:
    base = results[base_name]
    base_rate = base[0] / base[1] if base[1] else float("nan")
    print(title)
    for name, (n, cpu) in results.items():
        rate = n / cpu if cpu else float("inf")
        print(
            f"  {name:34s} {n:7d} values {cpu:7.3f} CPU s {rate:10.0f} values/CPU s "
            f"x{rate / base_rate:5.1f} vs pysnmp"
        )


def bench_v2c(rows: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        write_walk(Path(tmp), rows)
        os.environ.setdefault("SNMPSIM_ALLOW_ROOT", "true")
        with snmpsim(Path(tmp)) as port:
            results = {
                "net-snmp snmpbulkwalk -Cr50": bench_netsnmp(port),
                "pysnmp hlapi bulk_walk_cmd": asyncio.run(bench_pysnmp(port)),
                "spanwatch V2cWalker": asyncio.run(bench_ours(port)),
            }
    report("SNMPv2c (snmpsim)", results, "pysnmp hlapi bulk_walk_cmd")


def bench_v3(rounds: int) -> None:
    from snmpd_agent import USERS, snmpd

    user = next(u for u in USERS if u.name == "sha256aes")
    with tempfile.TemporaryDirectory() as tmp:
        try:
            agent_cm = snmpd(Path(tmp))
            agent = agent_cm.__enter__()
        except BaseException as e:  # pytest.skip outside pytest: snmpd is not installed
            print(f"SNMPv3: skipped ({e})")
            return
        try:
            results = {
                "net-snmp snmpbulkwalk -v3 -Cr50": bench_netsnmp_v3(agent.port, user, rounds),
                "pysnmp hlapi bulk_walk_cmd v3": asyncio.run(bench_pysnmp_v3(agent.port, user, rounds)),
                "spanwatch V3Walker (own USM)": asyncio.run(bench_ours_v3(agent.port, user, rounds)),
            }
        finally:
            agent_cm.__exit__(None, None, None)
    report("SNMPv3 authPriv SHA-256/AES-128 (snmpd, mib-2)", results, "pysnmp hlapi bulk_walk_cmd v3")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=30_000)
    parser.add_argument("--v3-rounds", type=int, default=10)
    parser.add_argument("--skip-v2c", action="store_true")
    args = parser.parse_args()
    if not args.skip_v2c:
        bench_v2c(args.rows)
    bench_v3(args.v3_rounds)


if __name__ == "__main__":
    main()
