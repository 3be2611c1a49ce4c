"""``spanwatch sim`` and ``spanwatch demo``: the simulated fabric on its own, or with the collector and
the training job, on loopback only and free ports, cleaning up everything they start.

``demo`` runs the fabric, the collector (``collector.daemon.Daemon`` in-process) and the job for
``--duration`` seconds, then writes into ``--out``: ``config.yaml`` (the collector config it used, with the
community in ``community``), ``archive/``, ``steps.jsonl`` (the plain step log), ``truth.json`` (episodes and
each step's exposed network time and culprits) and ``metrics.txt`` (the last ``/metrics`` scrape), prints
a summary of what was collected, then analyses it with the shipped example claims (``claims.yaml``, copied
into ``--out``): the analysis tables and ``report.html`` / ``report.md`` / ``report.json`` land in ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import shutil
import socket
import sys
import time
from pathlib import Path
from typing import IO, Any

import yaml

from collector.sim.params import MAX_DISTANCE_KM, MAX_WAVES, FabricParams
from collector.sim.runtime import SimulatedFabric
from collector.sim.training import StepRecord

log = logging.getLogger("spanwatch.sim")
CLAIMS = Path(__file__).with_name("claims.yaml")  # the example vendor claims the demo ships


def fabric_arguments(p: argparse.ArgumentParser) -> None:
    """The fabric's options, shared by ``sim`` and ``demo``."""
    p.add_argument(
        "--distance-km", type=float, default=100.0, help=f"fibre route (up to {MAX_DISTANCE_KM:g})"
    )
    p.add_argument("--waves", type=int, default=4, help=f"parallel 800G waves (up to {MAX_WAVES})")
    p.add_argument("--buffer", choices=["deep", "shallow"], default="deep", help="buffer profile")
    p.add_argument("--lossy", action="store_true", help="no PFC: tail-drop instead of pausing")
    p.add_argument("--seed", type=int, default=1)


def sim_arguments(p: argparse.ArgumentParser) -> None:
    """``spanwatch sim`` options."""
    fabric_arguments(p)
    p.add_argument("--out", type=Path, default=Path("spanwatch-sim"), help="where config.yaml is written")
    p.add_argument("--duration", type=float, default=None, help="seconds to run (default: until Ctrl-C)")
    p.add_argument("--listen", default="127.0.0.1:9464", help="the /metrics address the config gives")


def demo_arguments(p: argparse.ArgumentParser) -> None:
    """``spanwatch demo`` options."""
    fabric_arguments(p)
    p.add_argument("--out", type=Path, default=Path("spanwatch-demo"), help="output folder")
    p.add_argument("--duration", type=float, default=60.0, help="seconds of simulated training")


def _params(args: argparse.Namespace) -> FabricParams:
    return FabricParams(
        distance_km=args.distance_km,
        waves=args.waves,
        buffer=args.buffer,
        lossless=not args.lossy,
        seed=args.seed,
    ).validate()


def free_port() -> int:
    """A free TCP port on loopback (bound and released: another process could take it, rarely)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_config(sim: SimulatedFabric, out: Path, listen: str) -> Path:
    """Write ``config.yaml`` and the community file into ``out``; returns the config's path."""
    out.mkdir(parents=True, exist_ok=True)
    community = out / "community"
    community.write_text(sim.community + "\n")
    community.chmod(0o600)
    path = out / "config.yaml"
    path.write_text(yaml.safe_dump(sim.collector_config(listen), sort_keys=False))
    return path


# -- spanwatch sim ---------------------------------------------------------------------------------------
def cmd_sim(args: argparse.Namespace) -> int:
    """Start the fabric, print the collector config for it, run until Ctrl-C or ``--duration``."""
    return asyncio.run(_sim(args))


async def _sim(args: argparse.Namespace) -> int:
    sim = SimulatedFabric(_params(args), episodes_over_s=args.duration or 60.0)
    await sim.start()
    try:
        path = write_config(sim, args.out, args.listen)
        print(path.read_text(), end="", flush=True)
        print(f"# written to {path}; run: spanwatch collect --config {path}", file=sys.stderr, flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        import signal

        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=args.duration)
    finally:
        await sim.stop()
    return 0


# -- spanwatch demo --------------------------------------------------------------------------------------
def cmd_demo(args: argparse.Namespace) -> int:
    """Fabric + collector + training job for ``--duration`` seconds, a summary of what was collected, then
    the analysis and the vendor report (ending with the report's path)."""
    status = asyncio.run(Demo(args).run())
    print(f"report: {analyse(args.out)}")
    return status


def analyse(out: Path) -> Path:
    """Analyse a finished demo folder with the shipped example claims; returns the HTML report's path.

    The claims file is copied into ``out`` first, so the folder holds everything the report came from and
    ``spanwatch report OUT --claims OUT/claims.yaml`` re-renders it after an edit.
    """
    from analyzer.analysis import Analysis, AnalysisInputs
    from analyzer.report.command import write_report

    claims = out / "claims.yaml"
    shutil.copyfile(CLAIMS, claims)
    inputs = AnalysisInputs(
        archive=out / "archive",
        logs=(out / "steps.jsonl",),
        config=out / "config.yaml",
        claims=claims,
        truth=out / "truth.json",
    )
    Analysis(inputs).run().write(out)
    return write_report(out, inputs.config, claims)[0]


class Demo:
    """One demo run (see the module docstring)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out: Path = args.out
        self.out.mkdir(parents=True, exist_ok=True)
        self.steps_file: IO[str] = (self.out / "steps.jsonl").open("w")
        self.sim = SimulatedFabric(_params(args), episodes_over_s=args.duration, on_step=self._step)
        self.listen = f"127.0.0.1:{free_port()}"

    def _step(self, record: StepRecord) -> None:
        self.steps_file.write(json.dumps(self.sim.step_line(record)) + "\n")
        self.steps_file.flush()

    async def run(self) -> int:
        from collector.daemon import Daemon

        await self.sim.start()
        daemon: Daemon | None = None
        task: asyncio.Task[None] | None = None
        metrics = ""
        try:
            config = write_config(self.sim, self.out, self.listen)
            daemon = Daemon(config)
            task = asyncio.create_task(daemon.run(), name="collector")
            await self._progress(task)
            metrics = await scrape(self.listen)
        finally:
            if daemon is not None and task is not None:
                daemon.stop()
                await asyncio.gather(task, return_exceptions=True)
            await self.sim.stop()
            self.steps_file.close()
        if task is not None and task.done() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
        (self.out / "metrics.txt").write_text(metrics)
        (self.out / "truth.json").write_text(json.dumps(self.sim.truth(), indent=1))
        summarise(self.out, metrics, self.sim)
        return 0

    async def _progress(self, collector: asyncio.Task[None]) -> None:
        duration = float(self.args.duration)
        start = time.monotonic()
        if sys.stderr.isatty():
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            columns = (TextColumn("{task.description}"), BarColumn(), TimeRemainingColumn())
            with Progress(*columns, transient=True) as bar:
                job = bar.add_task("demo", total=duration)
                while not collector.done() and (elapsed := time.monotonic() - start) < duration:
                    bar.update(job, completed=elapsed, description=self._status())
                    await asyncio.sleep(0.5)
            return
        next_log = 0.0
        while not collector.done() and (elapsed := time.monotonic() - start) < duration:
            if elapsed >= next_log:
                log.info("demo: %.0f/%.0f s, %s", elapsed, duration, self._status())
                next_log += 10.0
            await asyncio.sleep(0.5)

    def _status(self) -> str:
        s = self.sim
        return (
            f"steps {len(s.steps)}  model lag {s.lag_s * 1e3:.0f} ms  collector http://{self.listen}/metrics"
        )


async def scrape(listen: str) -> str:
    """``GET /metrics`` from the collector (plain HTTP on loopback)."""
    host, _, port = listen.rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"GET /metrics HTTP/1.1\r\nHost: {listen}\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    raw = await reader.read()
    writer.close()
    with contextlib.suppress(Exception):
        await writer.wait_closed()
    return raw.partition(b"\r\n\r\n")[2].decode(errors="replace")


def families(metrics: str) -> dict[str, int]:
    """Series count per metric family in a Prometheus text exposition."""
    out: dict[str, int] = {}
    for line in metrics.splitlines():
        if line and not line.startswith("#"):
            name = line.split("{", 1)[0].split(" ", 1)[0]
            for suffix in ("_bucket", "_sum", "_count"):
                name = name.removesuffix(suffix) if name.startswith("spanwatch_poll_duration") else name
            out[name] = out.get(name, 0) + 1
    return out


def summarise(out: Path, metrics: str, sim: SimulatedFabric) -> dict[str, Any]:
    """Print (rich) and return what was collected."""
    fams = families(metrics)
    archive = sorted((out / "archive").rglob("*.parquet"))
    rows = 0
    with contextlib.suppress(Exception):
        import polars as pl

        rows = (
            int(pl.scan_parquet([str(p) for p in archive]).select(pl.len()).collect().item())
            if archive
            else 0
        )
    steps = sim.truth()["steps"]
    late = [s for s in steps if s["culprits"]]
    summary = {
        "families": len(fams),
        "series": sum(fams.values()),
        "archive_files": len(archive),
        "archive_rows": rows,
        "steps": len(steps),
        "late_steps": len(late),
        "episodes": [e["kind"] for e in sim.truth()["episodes"]],
    }
    from rich.console import Console
    from rich.table import Table

    console = Console(stderr=False)
    table = Table(title=f"spanwatch demo: {out}")
    table.add_column("what")
    table.add_column("value", justify="right")
    for key, value in summary.items():
        table.add_row(key, ", ".join(value) if isinstance(value, list) else str(value))
    dci = sorted(f for f in fams if f.startswith("dci_"))
    table.add_row("dci_* families", str(len(dci)))
    console.print(table)
    console.print(
        f"files: {out / 'config.yaml'}, {out / 'archive'}, {out / 'steps.jsonl'}, {out / 'truth.json'}"
    )
    return summary
