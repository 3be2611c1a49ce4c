"""Soak: ``spanwatch collect`` for ``--minutes`` against 200 SNMP and 50 gNMI loopback targets, 20 hostile.

Healthy SNMP targets: ``--snmpsim-targets`` of them are snmpsim serving the shared recordings (one
community per recording), the rest Debian's snmpd (this host's interfaces), each agent on several UDP
endpoints because the collector keeps one request in flight per agent address. Healthy gNMI targets
stream a shared recording every sample interval with fresh timestamps, as a device streaming SAMPLE does.
Hostile targets (issue 16 and ``../shared/findings/2026-12-01-reliability.md``): SNMP agents that stay
silent, answer garbage, truncated or oversized datagrams, wrong request IDs, endless rows, floods, slow
answers, counters above 2^64-1, 20 KB labels, spoofed unauthenticated v3 Reports (boots -1) and downgraded
v3 Responses; gNMI targets that stall, reset, send NaN, negative or deeply nested JSON counters, messages
above the size limit, garbage bytes, or accept a connection and never speak.

Reported: the collector's RSS over time (``--rss-every``), the latency of gzip scrapes of ``/metrics``
made as Prometheus makes them (``--scrape-every``), and the poll lateness of the healthy SNMP targets from
the collector's own self-metrics: each poll's start is ``spanwatch_last_success_timestamp_seconds`` minus
that poll's duration (``spanwatch_poll_duration_seconds`` sum delta), and lateness is the gap between two
consecutive starts minus the interval (a missed poll counts as a whole interval late). gNMI health: the
healthy streams stay up, with no redial, and the update rate received is the rate sent.

Done when (issue 16): RSS grows under 10 % after ``--warmup`` and healthy lateness stays under 10 % of the
interval; exit status 1 otherwise. Loopback only; every process started here is stopped on exit, Ctrl-C or
failure. The machine is shared: run under ``nice -n 10``.

    PYTHONPATH=. .venv/bin/python bench/bench_soak.py --minutes 3
    PYTHONPATH=. nice -n 10 .venv/bin/python bench/bench_soak.py        # 30 minutes
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import gzip
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402
import yaml  # noqa: E402

SHARED = ROOT.parent / "shared" / "testdata"
# Recordings with an ifXTable (the healthy targets poll if_mib); one community each.
RECORDINGS = (
    "arista_eos",
    "ciena-waveserver",
    "cumulus_cumulus",
    "dell-sonic",
    "iosxr_ncs540",
    "junos_qfx5100",
    "nxos_n9k-c93180yc-fx3",
    "ocnos_as7712-32x",
    "smartos-dcp-m_dcp-m40-pam4-zr",
    "timos_hc",
)
SNMP_TARGETS, GNMI_TARGETS = 200, 50
HOSTILE_SNMP = (
    "silent",
    "garbage",
    "truncated",
    "wrongid",
    "endless",
    "flood",
    "slow",
    "bigcounter",
    "hugelabel",
    "oversized",
    "v3poison",
    "v3downgrade",
)
HOSTILE_GNMI = ("stall", "reset", "nan", "negative", "deep_json", "huge", "garbage", "blackhole")
V3_USER, V3_AUTH, V3_PRIV = "soak", "auth-key-0123456789", "priv-key-9876543210"
SNMPD = "/usr/sbin/snmpd"
HUGE_LIMIT = 1024 * 1024  # max_message_bytes of the "huge" target; it sends twice as much


# -- the peers (run in child processes: ``--serve gnmi`` / ``--serve hostile``) ----------------------


def _periodic_class() -> type:
    """``GnmiServer`` that resends its notifications every ``period`` seconds (imported in children only)."""
    from pygnmi.spec.v080 import gnmi_pb2

    from spanwatch.sim.gnmi_server import GnmiServer

    class Periodic(GnmiServer):  # type: ignore[misc]
        """A device streaming SAMPLE: one round every ``period`` s, timestamps of now, sync after the first."""

        def __init__(self, responses: list[Any], period: float) -> None:
            super().__init__(responses)
            self.period = period

        async def _stream(self, context: Any) -> AsyncIterator[Any]:
            first = True
            while True:
                now = time.time_ns()
                for r in self.notifications():
                    out = gnmi_pb2.SubscribeResponse()
                    out.CopyFrom(r)
                    if out.HasField("update"):
                        out.update.timestamp = now
                    yield out
                if first:
                    yield gnmi_pb2.SubscribeResponse(sync_response=True)
                    first = False
                await asyncio.sleep(self.period)

    return Periodic


def _counter(name: str, interface: str = "Ethernet1", **value: Any) -> Any:
    """A SubscribeResponse with one interface counter ``name`` holding ``value`` (a TypedValue field)."""
    from pygnmi.spec.v080 import gnmi_pb2

    prefix = gnmi_pb2.Path(
        elem=[
            gnmi_pb2.PathElem(name="interfaces"),
            gnmi_pb2.PathElem(name="interface", key={"name": interface}),
            gnmi_pb2.PathElem(name="state"),
            gnmi_pb2.PathElem(name="counters"),
        ]
    )
    update = gnmi_pb2.Update(
        path=gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name=name)]), val=gnmi_pb2.TypedValue(**value)
    )
    return gnmi_pb2.SubscribeResponse(update=gnmi_pb2.Notification(prefix=prefix, update=[update]))


def _recording(name: str) -> list[Any]:
    from tests.integration.gnmi_support import load_recording

    return load_recording(SHARED / "gnmi" / name / "responses.json")


async def _until_stdin_closes() -> None:
    """Children live as long as the parent holds their stdin open (no orphan if the parent dies)."""
    await asyncio.to_thread(sys.stdin.read)


async def serve_gnmi(count: int, recording: str, period: float) -> None:
    """The healthy gNMI targets: one server, one servicer, ``count`` ports."""
    import grpc
    from pygnmi.spec.v080 import gnmi_pb2_grpc

    server = grpc.aio.server()
    gnmi_pb2_grpc.add_gNMIServicer_to_server(_periodic_class()(_recording(recording), period), server)
    ports = [server.add_insecure_port("127.0.0.1:0") for _ in range(count)]
    await server.start()
    print(json.dumps({"ports": ports}), flush=True)
    try:
        await _until_stdin_closes()
    finally:
        await server.stop(grace=None)


IFX = (1, 3, 6, 1, 2, 1, 31, 1, 1, 1)
SYS_UPTIME = (1, 3, 6, 1, 2, 1, 1, 3, 0)


def _table(mode: str) -> dict[tuple[int, ...], tuple[int, object]]:
    """A small ifXTable (4 interfaces) for the hostile agents that answer "correctly" with bad content."""
    from collector.sources.snmp.ber import TAG_COUNTER64, TAG_OCTETS, TAG_TIMETICKS

    label = b"x" * 20_000 if mode == "hugelabel" else None
    big = 2**64 + 5 if mode == "bigcounter" else None
    data: dict[tuple[int, ...], tuple[int, object]] = {SYS_UPTIME: (TAG_TIMETICKS, 100)}
    for i in range(1, 5):
        data[(*IFX, 1, i)] = (TAG_OCTETS, label or f"Ethernet{i}".encode())
        for col in (6, 7, 10, 11):
            data[(*IFX, col, i)] = (TAG_COUNTER64, big or 1000 * i)
    return data


@dataclass
class HostileAgent:
    """A v2c UDP agent misbehaving one way (``mode``): see the module docstring."""

    mode: str
    rng: random.Random = field(default_factory=lambda: random.Random(16))
    transport: Any = None
    last: bytes = b""

    def __post_init__(self) -> None:
        self.data = _table(self.mode)
        self.keys = sorted(self.data)

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        pass

    def error_received(self, exc: Exception) -> None:
        pass

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        if self.mode == "silent":
            return
        if self.mode == "garbage":
            self.transport.sendto(self.rng.randbytes(self.rng.randint(1, 1400)), addr)
            return
        if self.mode == "flood":  # bounded: 50 junk datagrams per request
            for _ in range(50):
                self.transport.sendto(self.rng.randbytes(self.rng.randint(1, 200)), addr)
            return
        reply = self._answer(data)
        if reply is None:
            return
        if self.mode == "truncated":
            reply = reply[: len(reply) // 2]
        elif self.mode == "oversized":  # a 64,000-byte datagram: a valid header around a huge padding value
            reply = reply + b"\x04\x82\xf9\xc0" + bytes(63_936)
        if self.mode == "slow":
            asyncio.get_running_loop().call_later(
                self.rng.uniform(0.5, 4.0), self.transport.sendto, reply, addr
            )
        else:
            self.transport.sendto(reply, addr)

    def _next(self, oid: tuple[int, ...]) -> tuple[tuple[int, ...], int, object] | None:
        from collector.sources.snmp.ber import TAG_COUNTER64

        if self.mode == "endless":  # every column has one more row, forever
            nxt = (*oid, 1) if len(oid) <= len(IFX) + 1 else (*oid[:-1], oid[-1] + 1)
            return nxt, TAG_COUNTER64, nxt[-1]
        at = bisect.bisect_right(self.keys, oid)
        return (self.keys[at], *self.data[self.keys[at]]) if at < len(self.keys) else None

    def _answer(self, data: bytes) -> bytes | None:
        from collector.sources.snmp.ber import BerError, decode_pdu, expect, read_int
        from tests.collector.snmp_wire import pdu, v2c_message

        try:
            start, stop = expect(data, 0, len(data), 0x30)
            _, pos = read_int(data, start, stop)
            c_start, pos = expect(data, pos, stop, 0x04)
            tag, rid, _, reps, binds = decode_pdu(data, pos, stop, frozenset((0xA0, 0xA1, 0xA5)))
        except BerError:
            return None
        out: list[Any] = []
        if tag == 0xA0:
            out = [(o, *self.data.get(o, (0x80, None))) for o, _, _ in binds]
        else:
            cursors = [o for o, _, _ in binds]
            for _ in range(reps if tag == 0xA5 else 1):
                for i, cur in enumerate(cursors):
                    got = self._next(cur)
                    if got is None:
                        out.append((cur, 0x82, None))
                        continue
                    cursors[i] = got[0]
                    out.append(got)
            if self.mode == "hugelabel":  # what fits one datagram
                out = out[:2]
        if self.mode == "wrongid":
            rid += 1
        return v2c_message(data[c_start:pos], pdu(rid, out))


def _v3_peer(mode: str) -> Any:
    """An authPriv v3 agent that also sends one forged, unauthenticated datagram per request."""
    from collector.sources.snmp import usm
    from collector.sources.snmp.ber import TAG_TIMETICKS
    from tests.collector.snmp_wire import V3Peer, honest, pdu, plain_v3, report_pdu

    def poison(peer: Any, msg_id: int, flags: int) -> list[bytes]:
        forged = plain_v3(msg_id, 0, peer.engine_id, -1, 0, b"", report_pdu(msg_id, usm.UNKNOWN_ENGINE_ID))
        return [forged, *honest(peer, msg_id, flags)]

    def downgrade(peer: Any, msg_id: int, flags: int) -> list[bytes]:
        if not flags & usm.FLAG_AUTH:
            return honest(peer, msg_id, flags)
        body = pdu(msg_id, [(SYS_UPTIME, TAG_TIMETICKS, 7)])
        forged = plain_v3(msg_id, 0, peer.engine_id, peer.boots, peer.time, peer.creds.user, body)
        return [forged, *honest(peer, msg_id, flags)]

    creds = usm.Credentials(
        user=V3_USER.encode(),
        auth="SHA256",
        auth_password=V3_AUTH.encode(),
        priv="AES",
        priv_password=V3_PRIV.encode(),
    )
    return V3Peer(creds, script=poison if mode == "v3poison" else downgrade)


async def serve_hostile(recording: str, period: float) -> None:
    """Every hostile SNMP agent and gNMI server of the soak, one port each."""
    import grpc

    from spanwatch.sim.gnmi_server import GnmiServer, serve

    loop = asyncio.get_running_loop()
    snmp: dict[str, int] = {}
    transports = []
    for mode in HOSTILE_SNMP:
        proto = _v3_peer(mode) if mode.startswith("v3") else HostileAgent(mode)
        transport, _ = await loop.create_datagram_endpoint(lambda p=proto: p, local_addr=("127.0.0.1", 0))
        transports.append(transport)
        snmp[mode] = transport.get_extra_info("sockname")[1]

    good = _recording(recording)
    periodic = _periodic_class()
    deep = b"[" * 100_000 + b"]" * 100_000
    servicers = {
        "stall": GnmiServer(good, stall_after=1, sync=False),
        "reset": GnmiServer(good, close_after=2, repeat=3),  # UNAVAILABLE after 2 responses, each dial
        "nan": periodic([*good, _counter("in-octets", double_val=math.nan)], period),
        "negative": periodic([*good, _counter("in-octets", int_val=-5)], period),
        "deep_json": periodic([*good, _counter("in-octets", json_val=deep)], period),
        "huge": periodic([_counter("in-octets", string_val="x" * (2 * HUGE_LIMIT))], period),
    }
    gnmi: dict[str, int] = {}
    servers: list[grpc.aio.Server] = []
    for mode, servicer in servicers.items():
        server, gnmi[mode] = await serve(servicer)
        servers.append(server)

    async def junk(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"\x00\xffthis is not HTTP/2 at all\r\n" * 20)
        await writer.drain()
        writer.close()

    async def blackhole(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(120)  # hold the connection, say nothing; bounded so none pile up
        writer.close()

    tcp = [await asyncio.start_server(h, "127.0.0.1", 0) for h in (junk, blackhole)]
    gnmi["garbage"], gnmi["blackhole"] = (s.sockets[0].getsockname()[1] for s in tcp)
    print(json.dumps({"snmp": snmp, "gnmi": gnmi}), flush=True)
    try:
        await _until_stdin_closes()
    finally:
        for t in transports:
            t.close()
        for s in tcp:
            s.close()
        for server in servers:
            await server.stop(grace=None)


# -- the parent: peers, collector, scraper --------------------------------------------------------------


def free_port(kind: int) -> int:
    """A loopback port nobody holds right now (``socket.SOCK_DGRAM`` or ``SOCK_STREAM``)."""
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(port: int) -> bool:
    probe = bytes.fromhex("302602010104067075626c6963a019020400000001020100020100300b3009060500000000000500")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(0.2)
        s.sendto(probe, ("127.0.0.1", port))
        try:
            s.recv(2048)
        except OSError:
            return False
    return True


class Procs:
    """Every child process started here, stopped in reverse order (also on Ctrl-C or failure)."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, argv: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(argv, **kw)
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            if proc.stdin is not None:
                proc.stdin.close()
            if proc.poll() is None:
                proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def start_snmpsim(procs: Procs, work: Path, endpoints: int) -> list[int]:
    """snmpsim over the healthy recordings, listening on ``endpoints`` UDP ports; returns the ports."""
    exe = Path(sys.executable).parent / "snmpsim-command-responder"
    data = work / "snmpsim"
    data.mkdir()
    for name in RECORDINGS:
        shutil.copy(SHARED / "snmp" / f"{name}.snmprec", data / f"{name}.snmprec")
    (data / "public.snmprec").write_text("1.3.6.1.2.1.1.5.0|4|probe\n")  # the start-up probe's community
    ports = [free_port(socket.SOCK_DGRAM) for _ in range(endpoints)]
    argv = [str(exe), f"--data-dir={data}", f"--cache-dir={work / 'snmpsim-cache'}", "--log-level=error"]
    argv += [f"--agent-udpv4-endpoint=127.0.0.1:{p}" for p in ports]
    log = (work / "snmpsim.log").open("wb")
    proc = procs.start(
        argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "SNMPSIM_ALLOW_ROOT": "true"}
    )
    deadline = time.monotonic() + 180  # indexing the recordings the first time takes a while
    while not all(_answers(p) for p in ports):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"snmpsim did not start (see {work / 'snmpsim.log'})")
        time.sleep(0.5)
    return ports


def start_snmpd(procs: Procs, work: Path, endpoints: int) -> list[int]:
    """Debian's snmpd (v2c ``public``, this host's interfaces) on ``endpoints`` UDP ports; returns them.

    snmpsim is one Python process and cannot serve 188 realistic devices every 30 s on a shared 2-core
    machine (its polls then time out, which measures the agent, not the collector); snmpd is C.
    """
    folder = work / "snmpd"
    folder.mkdir()
    ports = [free_port(socket.SOCK_DGRAM) for _ in range(endpoints)]
    conf = folder / "snmpd.conf"
    conf.write_text(
        "agentAddress " + ",".join(f"udp:127.0.0.1:{p}" for p in ports) + "\nrocommunity public 127.0.0.1\n"
    )
    env = {**os.environ, "SNMP_PERSISTENT_DIR": str(folder / "persist"), "MIBS": ""}
    argv = [SNMPD, "-f", "-Lo", "-C", "-c", str(conf), "-p", str(folder / "snmpd.pid")]
    log = (work / "snmpd.log").open("wb")
    proc = procs.start(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 30
    while not all(_answers(p) for p in ports):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"snmpd did not start (see {work / 'snmpd.log'})")
        time.sleep(0.2)
    return ports


def start_child(procs: Procs, role: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """This script in ``--serve role`` mode; returns the ports it printed."""
    argv = [sys.executable, __file__, "--serve", role, "--gnmi-interval", str(args.gnmi_interval)]
    argv += ["--gnmi-recording", args.gnmi_recording]
    log = (work / f"{role}.log").open("wb")
    proc = procs.start(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"the {role} peers did not start (see {work / f'{role}.log'})")
    return dict(json.loads(line))


def write_config(
    work: Path,
    args: argparse.Namespace,
    sim_ports: list[int],
    snmpd_ports: list[int],
    gnmi_ports: list[int],
    hostile: dict[str, Any],
) -> tuple[Path, int, list[str], list[str]]:
    """The collector config; returns its path, the listen port and the healthy SNMP and gNMI names."""
    for name in (*RECORDINGS, "public"):
        (work / f"community-{name}").write_text(name + "\n")
    (work / "auth.key").write_text(V3_AUTH + "\n")
    (work / "priv.key").write_text(V3_PRIV + "\n")
    targets: list[dict[str, Any]] = []
    healthy_snmp = SNMP_TARGETS - len(HOSTILE_SNMP)
    for i in range(healthy_snmp):
        if i < args.snmpsim_targets:  # a recorded device
            rec = RECORDINGS[i % len(RECORDINGS)]
            port = sim_ports[i % len(sim_ports)]
        else:  # this host's interfaces
            rec, port = "public", snmpd_ports[i % len(snmpd_ports)]
        snmp = {
            "address": f"127.0.0.1:{port}",
            "community_file": str(work / f"community-{rec}"),
            "modules": ["if_mib"],
        }
        targets.append({"name": f"snmp-{i:03d}", "labels": {"site": "soak", "model": rec}, "snmp": snmp})
    for mode, port in hostile["snmp"].items():
        snmp = {"address": f"127.0.0.1:{port}", "modules": ["if_mib"]}
        if mode.startswith("v3"):
            snmp |= {
                "version": "3",
                "user": V3_USER,
                "auth_protocol": "SHA256",
                "auth_key_file": str(work / "auth.key"),
                "priv_protocol": "AES",
                "priv_key_file": str(work / "priv.key"),
            }
        else:
            snmp["community_file"] = str(work / "community-public")
        targets.append({"name": f"hostile-snmp-{mode}", "snmp": snmp})
    gnmi_base = {
        "insecure": True,
        "sample_interval": f"{args.gnmi_interval}s",
        "subscriptions": ["interfaces"],
    }
    for i, port in enumerate(gnmi_ports):
        targets.append({"name": f"gnmi-{i:02d}", "gnmi": {"address": f"127.0.0.1:{port}", **gnmi_base}})
    for mode, port in hostile["gnmi"].items():
        gnmi = {"address": f"127.0.0.1:{port}", **gnmi_base}
        if mode == "huge":
            gnmi["max_message_bytes"] = HUGE_LIMIT
        targets.append({"name": f"hostile-gnmi-{mode}", "gnmi": gnmi})
    listen = free_port(socket.SOCK_STREAM)
    cfg = {
        "collector": {
            "listen": f"127.0.0.1:{listen}",
            "archive": {"path": str(work / "archive"), "flush_interval": "2s"},
        },
        "defaults": {"interval": f"{args.interval}s", "timeout": f"{args.timeout}s"},
        "targets": targets,
    }
    path = work / "spanwatch.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    names_snmp = [f"snmp-{i:03d}" for i in range(healthy_snmp)]
    return path, listen, names_snmp, [f"gnmi-{i:02d}" for i in range(len(gnmi_ports))]


_SAMPLE = re.compile(r"^(spanwatch_[a-z_]+)\{([^}]*)\} (\S+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')
WANTED = {
    "spanwatch_last_success_timestamp_seconds",
    "spanwatch_poll_duration_seconds_sum",
    "spanwatch_poll_duration_seconds_count",
    "spanwatch_polls_total",
    "spanwatch_target_up",
    "spanwatch_gnmi_reconnects_total",
    "spanwatch_gnmi_updates_total",
}


def scrape(port: int) -> tuple[float, dict[tuple[str, str, str], float]]:
    """One scrape as Prometheus makes it (gzip); returns its seconds and the self-metrics wanted.

    Keys: (metric, device, source or status).
    """
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/metrics",
        headers={
            "Accept-Encoding": "gzip",
            "Accept": "text/plain;version=0.0.4;q=1,*/*;q=0.1",
            "User-Agent": "Prometheus/2.53.0",
        },
    )
    started = time.perf_counter()
    with urllib.request.urlopen(req, timeout=10) as r:
        body = r.read()
        encoding = r.headers.get("Content-Encoding")
    seconds = time.perf_counter() - started
    text = gzip.decompress(body).decode() if encoding == "gzip" else body.decode()
    out: dict[tuple[str, str, str], float] = {}
    for line in text.splitlines():
        if not line.startswith("spanwatch_"):
            continue
        m = _SAMPLE.match(line)
        if m is None or m.group(1) not in WANTED:
            continue
        labels = dict(_LABEL.findall(m.group(2)))
        out[(m.group(1), labels.get("device", ""), labels.get("status", labels.get("source", "")))] = float(
            m.group(3)
        )
    return seconds, out


@dataclass
class Lateness:
    """Healthy SNMP poll starts, from last-success timestamps and poll-duration sums."""

    interval: float
    prev: dict[str, tuple[float, float, float, float | None]] = field(default_factory=dict)
    late: list[tuple[float, float]] = field(default_factory=list)  # (elapsed, seconds late)

    def update(self, elapsed: float, metrics: dict[tuple[str, str, str], float], devices: list[str]) -> None:
        for d in devices:
            ts = metrics.get(("spanwatch_last_success_timestamp_seconds", d, "snmp"))
            total = metrics.get(("spanwatch_poll_duration_seconds_sum", d, "snmp"))
            count = metrics.get(("spanwatch_poll_duration_seconds_count", d, "snmp"))
            if ts is None or total is None or count is None:
                continue
            last = self.prev.get(d)
            if last is not None and last[0] == ts:
                continue
            start: float | None = None
            if last is not None and count - last[2] == 1:  # exactly one poll since: its duration is known
                start = ts - (total - last[1])
            elif last is not None:  # failed polls between two successes: each a whole interval late
                self.late.append((elapsed, self.interval * (count - last[2] - 1)))
            prev_start = last[3] if last is not None else None
            if start is not None and prev_start is not None:
                self.late.append((elapsed, max(0.0, start - prev_start - self.interval)))
            self.prev[d] = (ts, total, count, start)


def pct(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def run(args: argparse.Namespace) -> int:
    if not (SHARED / "snmp").is_dir():
        raise SystemExit(f"shared recordings not found at {SHARED}")
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="spanwatch-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    procs = Procs()
    old_term = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _soak(args, work, procs)
    finally:
        procs.stop_all()
        signal.signal(signal.SIGTERM, old_term)
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _soak(args: argparse.Namespace, work: Path, procs: Procs) -> int:
    sim_ports = start_snmpsim(procs, work, args.snmp_endpoints)
    snmpd_ports = start_snmpd(procs, work, args.snmp_endpoints)
    gnmi_ports = start_child(procs, "gnmi", args, work)["ports"][: GNMI_TARGETS - len(HOSTILE_GNMI)]
    hostile = start_child(procs, "hostile", args, work)
    cfg, listen, snmp_names, gnmi_names = write_config(
        work, args, sim_ports, snmpd_ports, gnmi_ports, hostile
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    log = (work / "collector.log").open("wb")
    collector = procs.start(
        [sys.executable, "-m", "spanwatch.cli", "collect", "--config", str(cfg)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=work,
    )
    ps = psutil.Process(collector.pid)
    print(
        f"soak: {len(snmp_names)}+{len(HOSTILE_SNMP)} SNMP, {len(gnmi_names)}+{len(HOSTILE_GNMI)} gNMI targets, "
        f"{args.minutes:g} min, SNMP interval {args.interval:g}s, work dir {work}",
        flush=True,
    )

    lateness = Lateness(args.interval)
    started = time.monotonic()
    end = started + args.minutes * 60
    next_scrape, next_rss = started + args.scrape_every, started + args.rss_every
    scrapes: list[tuple[float, float]] = []  # (elapsed, seconds)
    failed_scrapes = 0
    rows: list[dict[str, float]] = []
    cpu_prev = sum(ps.cpu_times()[:2])
    gnmi_down = 0
    first_gnmi: dict[tuple[str, str, str], float] | None = None
    last_metrics: dict[tuple[str, str, str], float] = {}
    first_failures: float | None = None
    while True:
        now = time.monotonic()
        if now >= end:
            break
        if collector.poll() is not None:
            raise SystemExit(
                f"the collector exited with {collector.returncode} (see {work / 'collector.log'})"
            )
        if now >= next_scrape:
            next_scrape += args.scrape_every
            try:
                seconds, metrics = scrape(listen)
            except OSError:
                failed_scrapes += 1
            else:
                elapsed = time.monotonic() - started
                scrapes.append((elapsed, seconds))
                lateness.update(elapsed, metrics, snmp_names)
                last_metrics = metrics
                if any(metrics.get(("spanwatch_target_up", d, "gnmi")) == 0 for d in gnmi_names):
                    gnmi_down += 1
                failures = _healthy_failures(metrics, snmp_names)
                if elapsed >= args.warmup * 60 and first_gnmi is None:
                    first_gnmi, first_failures = metrics, failures
        if now >= next_rss:
            next_rss += args.rss_every
            elapsed = now - started
            cpu = sum(ps.cpu_times()[:2])
            window = [s for t, s in scrapes if t > elapsed - args.rss_every]
            late = [lt for t, lt in lateness.late if t > elapsed - args.rss_every]
            rows.append(
                {
                    "elapsed": elapsed,
                    "rss": ps.memory_info().rss / 2**20,
                    "cpu": 100 * (cpu - cpu_prev) / args.rss_every,
                    "load": os.getloadavg()[0],
                    "scrape_p99": 1000 * pct(window, 0.99),
                    "late_max": 100 * max(late, default=0.0) / args.interval,
                    "polls": len(late),
                }
            )
            cpu_prev = cpu
            r = rows[-1]
            print(
                f"{_mmss(r['elapsed'])}  rss {r['rss']:.0f} MiB  cpu {r['cpu']:.0f} %  load {r['load']:.2f}  "
                f"scrape p99 {r['scrape_p99']:.0f} ms  late max {r['late_max']:.1f} % ({r['polls']} polls)",
                flush=True,
            )
        time.sleep(max(0.0, min(next_scrape, next_rss, end) - time.monotonic()))

    collector.send_signal(signal.SIGTERM)
    exit_code = collector.wait(60)
    return report(
        args, work, rows, scrapes, failed_scrapes, lateness, gnmi_down, first_gnmi, last_metrics, gnmi_names,
        snmp_names, first_failures, exit_code,
    )  # fmt: skip


def _healthy_failures(metrics: dict[tuple[str, str, str], float], devices: list[str]) -> float:
    healthy = set(devices)
    return sum(
        v
        for (name, dev, status), v in metrics.items()
        if name == "spanwatch_polls_total" and status != "success" and dev in healthy
    )


def _mmss(seconds: float) -> str:
    return f"{int(seconds // 60):02d}:{int(seconds % 60):02d}"


def report(
    args: argparse.Namespace,
    work: Path,
    rows: list[dict[str, float]],
    scrapes: list[tuple[float, float]],
    failed_scrapes: int,
    lateness: Lateness,
    gnmi_down: int,
    first: dict[tuple[str, str, str], float] | None,
    last: dict[tuple[str, str, str], float],
    gnmi_names: list[str],
    snmp_names: list[str],
    first_failures: float | None,
    exit_code: int,
) -> int:
    """Print the tables and the verdict; returns the exit status (1: a goal not met)."""
    after = [r for r in rows if r["elapsed"] >= args.warmup * 60]
    base = after[0]["rss"] if after else math.nan
    peak = max((r["rss"] for r in after), default=math.nan)
    growth = 100 * (peak - base) / base
    late = [lt for t, lt in lateness.late if t >= args.warmup * 60]
    late_all = [lt for _, lt in lateness.late]
    lat = [s for _, s in scrapes]
    lines = [
        "| elapsed | collector RSS, MiB | collector CPU, % of a core | load (1 min) | scrape p99, ms | healthy SNMP lateness, max % of interval (polls) |",
        "|---|---|---|---|---|---|",
    ]
    step = max(1, math.ceil(len(rows) / args.table_rows))
    for i, r in enumerate(rows):
        if i % step == step - 1 or i == len(rows) - 1 or i == 0:
            lines.append(
                f"| {_mmss(r['elapsed'])} | {r['rss']:.0f} | {r['cpu']:.0f} | {r['load']:.2f} | "
                f"{r['scrape_p99']:.0f} | {r['late_max']:.1f} ({int(r['polls'])}) |"
            )
    updates = sum(last.get(("spanwatch_gnmi_updates_total", d, ""), 0.0) for d in gnmi_names)
    redials = sum(
        last.get(("spanwatch_gnmi_reconnects_total", d, ""), 0.0)
        - (first or {}).get(("spanwatch_gnmi_reconnects_total", d, ""), 0.0)
        for d in gnmi_names
    )
    failures_after = _healthy_failures(last, snmp_names) - (first_failures or 0.0)
    summary = [
        f"RSS after the {args.warmup:g}-minute warm-up: {base:.0f} MiB, peak {peak:.0f} MiB: growth {growth:.1f} % "
        f"(goal < 10 %)",
        f"scrapes: {len(lat)} ok, {failed_scrapes} failed; latency p50 {1000 * pct(lat, 0.5):.0f} ms, "
        f"p99 {1000 * pct(lat, 0.99):.0f} ms, max {1000 * max(lat, default=math.nan):.0f} ms",
        f"healthy SNMP lateness after warm-up ({len(late)} polls): p50 {100 * pct(late, 0.5) / args.interval:.2f} %, "
        f"p99 {100 * pct(late, 0.99) / args.interval:.2f} %, max {100 * max(late, default=math.nan) / args.interval:.2f} % "
        f"of {args.interval:g} s (goal < 10 %); whole run max {100 * max(late_all, default=math.nan) / args.interval:.2f} %",
        f"healthy SNMP failed polls after warm-up: {failures_after:.0f}",
        f"healthy gNMI: {len(gnmi_names)} streams, scrapes with one down: {gnmi_down}, redials after warm-up: "
        f"{redials:.0f}, updates received: {updates:.0f}",
        f"collector exit status on SIGTERM: {exit_code}",
    ]
    text = "\n".join([*lines, "", *summary])
    print("\n" + text, flush=True)
    (work / "soak.md").write_text(text + "\n")
    ok = growth < 10 and late and 100 * max(late) / args.interval < 10 and exit_code == 0
    return 0 if ok else 1


def main() -> None:
    """Parse the options and run the soak (or, with ``--serve``, one set of peers)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=30.0, help="soak length (default 30)")
    p.add_argument(
        "--warmup", type=float, default=None, help="minutes before RSS growth counts (default 5, or a third)"
    )
    p.add_argument("--interval", type=float, default=30.0, help="SNMP poll interval, seconds")
    p.add_argument("--timeout", type=float, default=10.0, help="SNMP poll timeout, seconds")
    p.add_argument("--gnmi-interval", type=float, default=10.0, help="gNMI sample interval, seconds")
    p.add_argument(
        "--gnmi-recording", default="issue_14530", help="the shared gNMI recording the targets stream"
    )
    p.add_argument("--snmp-endpoints", type=int, default=10, help="UDP ports of snmpsim, and of snmpd")
    p.add_argument(
        "--snmpsim-targets", type=int, default=40, help="healthy SNMP targets on snmpsim (the rest: snmpd)"
    )
    p.add_argument("--rss-every", type=float, default=30.0, help="seconds between RSS samples")
    p.add_argument("--scrape-every", type=float, default=5.0, help="seconds between scrapes")
    p.add_argument("--table-rows", type=int, default=13, help="rows of the printed table")
    p.add_argument("--workdir", help="keep everything here (default: a temporary folder, removed)")
    p.add_argument("--serve", choices=("gnmi", "hostile"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us (stdin closed, then SIGTERM)
        if args.serve == "gnmi":
            coro = serve_gnmi(GNMI_TARGETS - len(HOSTILE_GNMI), args.gnmi_recording, args.gnmi_interval)
        else:
            coro = serve_hostile(args.gnmi_recording, args.gnmi_interval)
        asyncio.run(coro)
        return
    if args.warmup is None:
        args.warmup = min(5.0, args.minutes / 3)
    sys.exit(run(args))


if __name__ == "__main__":
    main()
