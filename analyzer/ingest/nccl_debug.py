"""NCCL_DEBUG=INFO logs -> ``nccl_ranks`` (where each rank runs) and ``nccl_connections`` (who talks to whom).

Every NCCL line starts ``host:pid:tid [cudaDev] NCCL INFO``; NCCL >= 2.26 with NCCL_DEBUG_TIMESTAMP_LEVELS
prepends a timestamp in NCCL_DEBUG_TIMESTAMP_FORMAT, by default ``[YYYY-MM-DD HH:MM:SS] `` (fractions from
``%Nf`` and a format without brackets accepted), recent versions insert ``file.cc:line`` before ``NCCL``,
and launchers may prefix ``[rankN]:`` (torchrun), ``N: `` (srun -l) or ``host: `` (pdsh, DeepSpeed's runner).
Two message kinds are extracted:

* init lines, ``comm 0x.. rank R nranks N cudaDev D busId B - Init COMPLETE`` (``nvmlDev``, ``commId``, a
  leading function name ``ncclCommInitRankConfig``/``ncclCommSplit`` with ``parent .. color .. key ..``, or
  NCCL 2.27's ``[Rank R]`` in other versions): rank -> host, pid, device. Only COMPLETE lines are rows: since
  NCCL 2.1x the same communicator is first announced by an ``Init START`` line, and counting both would
  double every rank; inits that started and never completed are counted (``nccl_inits_incomplete``);
* channel connections, ``Channel 00/0 : 3[3] -> 8[7000] [send] via NET/IB/0/GDRDMA`` (``/0`` and the
  direction are absent in older or intra-node lines; the transport may contain spaces, e.g. ``P2P/direct
  pointer`` or the AWS plugin's ``NET/AWS Libfabric/0/GDRDMA``): which rank pairs connect and over which
  transport. A pair crosses the network when the transport is NET/* or CollNet: NVLink/PCIe P2P, SHM and
  NVLS stay inside the host.

Other INFO lines are context and skipped; a line that starts like an init or channel line and does not
parse is reported as malformed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from analyzer.ingest._common import (
    LAUNCHER_PREFIX,
    Malformed,
    ParseResult,
    RowBuffer,
    numbered_lines,
    parse_wallclock,
)

NAME = "nccl_debug"

_PREFIX = re.compile(
    rf"^{LAUNCHER_PREFIX}?"
    r"(?:\[?(?P<clock>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)\]?\s*)?"
    r"(?P<host>[^\s:\[\]]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>-?\d+)\]\s+(?:\S+:\d+\s+)?NCCL INFO (?P<msg>.*)$"
)
_INIT = re.compile(
    r"\bcomm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>\d+) n[Rr]anks (?P<nranks>\d+)"
    r"(?:.*?\bcudaDev (?P<dev>\d+))?(?:.*?\bbusId (?P<bus>[0-9a-fA-F]+))?"
)
_CHANNEL = re.compile(
    r"^Channel (?P<channel>\d+)(?:/\d+)? : (?P<src>\d+)\[[0-9a-fA-Fx]+\] -> (?P<dst>\d+)\[[0-9a-fA-Fx]+\]"
    r"(?: \[(?P<dir>send|receive)\])? via (?P<via>\S.*?)\s*$"
)
_NETWORK_TRANSPORTS = ("NET/", "COLLNET", "CollNet")


def sniff(lines: Sequence[str]) -> float:
    """Score how likely the head of a file holds NCCL INFO lines.

    Args:
        lines: the first lines of the file.

    Returns:
        0.8 if any line has NCCL's INFO prefix, else 0.
    """
    return 0.8 if any(" NCCL INFO " in line and _PREFIX.match(line) for line in lines) else 0.0


def _transport(via: str) -> str:
    # "NET/IB/1/GDRDMA" -> "NET/IB"; "P2P/IPC/read" -> "P2P/IPC"; "SHM/direct/direct" -> "SHM/direct".
    return "/".join(via.split("/")[:2])


def parse(path: Path) -> ParseResult:
    """Parse an NCCL_DEBUG=INFO log (possibly interleaved with other output), streaming.

    Args:
        path: the log (plain or gzip).

    Returns:
        ``nccl_ranks`` and ``nccl_connections`` rows, malformed init/channel lines.

    Raises:
        UnreadableFileError: the file cannot be opened or decompressed.
    """
    ranks = RowBuffer("nccl_ranks", str(path), NAME)
    connections = RowBuffer("nccl_connections", str(path), NAME)
    problems: list[Malformed] = []
    lines = info_lines = 0
    started: set[tuple[str, int, str, str]] = set()  # (host, pid, comm, rank) of inits not yet COMPLETE
    for number, line in numbered_lines(path):
        lines = number
        if "NCCL INFO" not in line:
            continue
        prefix = _PREFIX.match(line)
        if prefix is None:
            continue  # NCCL text glued to other output by interleaved writers: not attributable.
        info_lines += 1
        origin = _origin(prefix, path, number, problems)
        message = prefix["msg"]
        if message.startswith("Channel ") and " -> " in message:
            _add_connection(message, origin, path, number, connections, problems)
        elif message.endswith("Init START"):
            start = _INIT.search(message)
            if start is not None:
                started.add((origin["host"], origin["pid"], start["comm"], start["rank"]))
        elif "Init COMPLETE" in message:
            complete = _add_rank(message, origin, path, number, ranks, problems)
            if complete is not None:
                started.discard((origin["host"], origin["pid"], complete["comm"], complete["rank"]))
    counts = {"nccl_info_lines": info_lines, "nccl_inits_incomplete": len(started)}
    tables = {"nccl_ranks": ranks.frame(), "nccl_connections": connections.frame()}
    return ParseResult(path, [NAME], tables, problems, lines, counts)


def _origin(prefix: re.Match[str], path: Path, number: int, problems: list[Malformed]) -> dict[str, Any]:
    time = None
    if prefix["clock"]:
        try:
            time = parse_wallclock(prefix["clock"])
        except ValueError:
            problems.append(Malformed(str(path), number, f"bad timestamp {prefix['clock']!r}"))
    return {"host": prefix["host"], "pid": int(prefix["pid"]), "time": time}


def _add_rank(
    message: str, origin: dict[str, Any], path: Path, number: int, rows: RowBuffer, problems: list[Malformed]
) -> re.Match[str] | None:
    """Add the rank placement of an Init COMPLETE line; returns the match, None if malformed."""
    match = _INIT.search(message)
    if match is None:
        problems.append(Malformed(str(path), number, "Init COMPLETE line without 'comm .. rank .. nranks'"))
        return None
    rows.add(
        {
            **origin,
            "comm": match["comm"],
            "rank": int(match["rank"]),
            "nranks": int(match["nranks"]),
            "cuda_device": int(match["dev"]) if match["dev"] is not None else None,
            "bus_id": match["bus"],
        }
    )
    return match


def _add_connection(
    message: str, origin: dict[str, Any], path: Path, number: int, rows: RowBuffer, problems: list[Malformed]
) -> None:
    match = _CHANNEL.match(message)
    if match is None:
        problems.append(Malformed(str(path), number, "channel line not 'Channel N : a[..] -> b[..] via T'"))
        return
    src, dst, direction = int(match["src"]), int(match["dst"]), match["dir"]
    # The logging rank is the receiver on [receive] lines and the sender otherwise.
    rank, peer = (dst, src) if direction == "receive" else (src, dst)
    via = match["via"]
    rows.add(
        {
            **origin,
            "rank": rank,
            "peer": peer,
            "src_rank": src,
            "dst_rank": dst,
            "channel": int(match["channel"]),
            "direction": direction,
            "transport": _transport(via),
            "transport_detail": via,
            "crosses_network": via.startswith(_NETWORK_TRANSPORTS),
        }
    )
