"""``spanwatch demo``: the simulated fabric with the collector and the training job, on loopback only and
free ports, cleaning up everything it starts.

It runs a scenario (``--scenario FILE``, spec: scenarios.md; the built-in two-site demo by default):
the fabric, the collector (``collector.daemon.Daemon`` in-process) and the job for the scenario's
duration, then writes into ``--out``: ``config.yaml`` (the collector config it used, with the community
in ``community``), ``archive/``, the job's log (``steps.jsonl``, ``megatron.log`` or ``torchtitan.log``),
``truth.json`` (``spanwatch.sim.truth``) and ``metrics.txt`` (the last ``/metrics`` scrape), prints
a summary of what was collected, then analyses it with the shipped example claims (``claims.yaml``, copied
into ``--out``): the analysis tables and ``report.html`` / ``report.md`` / ``report.json`` land in ``--out``.
The analysis is scored against the truth as ``spanwatch analyze --truth`` does (the control run in
``--out/control/``, the score in ``--out/score.json``, printed). An earlier demo's or lab's recording in
``--out`` is replaced first (``fresh_out``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from collector.errors import SpanwatchError
from spanwatch.run_folder import replace_earlier_run
from spanwatch.sim.commands import fabric_arguments, free_port, list_scenarios, scenario, write_config
from spanwatch.sim.joblog import JobLog
from spanwatch.sim.runtime import SimulatedFabric
from spanwatch.sim.scenario import Scenario
from spanwatch.sim.truth_build import LOG_FILES

if TYPE_CHECKING:
    from analyzer.analysis import AnalysisInputs
    from spanwatch.report_process import ReportProcess

log = logging.getLogger("spanwatch.demo")
CLAIMS = Path(__file__).with_name("claims.yaml")  # the example vendor claims the demo ships
# How long the collector may take to stop (cancel its sources, flush the archive) once the run is over,
# and then to honour a cancellation: the demo's end is bounded whatever the machine's load.
STOP_GRACE_S = 20.0
CANCEL_GRACE_S = 5.0


def arguments(p: argparse.ArgumentParser) -> None:
    """``spanwatch demo`` options."""
    fabric_arguments(p)
    p.add_argument("--out", type=Path, default=Path("spanwatch-demo"), help="output folder")
    p.add_argument(
        "--duration",
        type=float,
        default=None,
        help="seconds of simulated training (default: the scenario's; 60)",
    )
    p.add_argument("--no-analysis", action="store_true", help="stop after the run (no analysis or report)")
    p.add_argument(
        "--fast",
        action="store_true",
        help="record in simulated time, without sockets (spanwatch.fast): the same files, in seconds",
    )


def run(args: argparse.Namespace) -> int:
    """Fabric + collector + training job for the scenario's duration, a summary of what was collected, then
    the analysis and the vendor report (ending with the report's path). ``--fast`` records the same in
    simulated time (``spanwatch.fast``)."""
    if args.list_scenarios:
        return list_scenarios()
    if args.fast:
        from spanwatch.fast import record
        from spanwatch.report_process import ReportProcess

        ran = scenario(args, args.duration)
        fresh_out(args.out)  # once the scenario is valid: a refused file writes nothing
        # Forked before the recording starts any thread; it imports the report's modules meanwhile.
        reporter = None if args.no_analysis else ReportProcess()
        try:
            recording = record(ran, args.out)
            summarise(args.out, recording.metrics, recording.sim)
            if not args.no_analysis:
                conclude(args.out, ran, recording.log, reporter)
        finally:
            if reporter is not None:
                reporter.close()
        return 0
    demo = Demo(args)
    status = asyncio.run(demo.run())
    if not args.no_analysis:
        conclude(args.out, demo.scenario, demo.log.path)
    return status


def fresh_out(out: Path) -> None:
    """Replace an earlier demo or lab run's recording in ``out`` (``spanwatch.run_folder``)."""
    replace_earlier_run(out, "demo", ("archive", "control", "truth.json", *LOG_FILES.values()))


def conclude(out: Path, ran: Scenario, log_path: Path, reporter: ReportProcess | None = None) -> None:
    """The claims, the analysis, the report and the score of a finished run, then the demo's answer."""
    write_claims(out, ran)
    report, result = analyse(out, log_path, reporter)
    for line in answer(out, result):
        print(line)
    print(f"report: {report}")


def answer(out: Path, score: dict[str, Any]) -> list[str]:
    """The demo's last word: exposed time per link, each vendor's verdicts, and the score against truth.

    Args:
        out: the demo folder (``report.json`` is read from it).
        score: ``spanwatch.score.score``'s result.

    Returns:
        The lines to print.
    """
    from spanwatch.score import GOALS, verdict

    summary = json.loads((out / "report.json").read_text())["summary"]
    analysed = json.loads((out / "summary.json").read_text())
    job = analysed["job_traffic_class"]
    lines = [
        "",
        "the answer:",
        f"  the job's traffic class: {job['value']} ({job['source']}: {job['basis']})",
        f"  steps the network hurt: {analysed['steps']['hurt']} (network time attributed to them)",
    ]
    for link in summary["links"]:
        share = "" if link["share_of_run"] is None else f" ({link['share_of_run']:.1%} of the run)"
        lines.append(
            f"  link {link['link']}: {link['exposed_total_seconds']:.3g} s of step time exposed{share}"
        )
    for v in summary["vendors"]:
        failed = f" ({', '.join(v['failing'])})" if v["failing"] else ""
        lines.append(
            f"  {v['vendor']}: {v['passed']} pass, {v['failed']} fail{failed}, "
            f"{v['insufficient']} insufficient data, {v['no_data']} no data"
        )
    figures = ", ".join(
        f"{name} {score[name]:.3g}" if score[name] is not None else f"{name} -" for name in GOALS
    )
    lines.append(f"  score: {verdict(score)} (against the simulation's truth)")
    lines.append(f"    {figures} (every figure: {out / 'score.json'})")
    return lines


OPTICAL_CLAIMS = ("coherent-ber", "osnr-margin", "no-wave-outage")


def write_claims(out: Path, s: Scenario) -> Path:
    """The example claims for this scenario's vendors, into ``out/claims.yaml``.

    The built-in demo's devices are all ``spanwatch-sim``: the shipped file, as is. Otherwise each switch
    vendor gets the shipped first vendor's claims, matched on ``vendor``, and each optics vendor its optical
    claims, matched on ``optics_vendor``.
    """
    path = out / "claims.yaml"
    switches = sorted({link.vendor.switch for link in s.links})
    optics = sorted({link.vendor.optics for link in s.links})
    if switches == ["spanwatch-sim"] and optics == ["spanwatch-sim"]:
        shutil.copyfile(CLAIMS, path)
        return path
    template = yaml.safe_load(CLAIMS.read_text())["vendors"][0]["claims"]
    vendors = [{"name": f"{v} (switches)", "match": {"vendor": v}, "claims": template} for v in switches]
    vendors += [
        {
            "name": f"{v} (optics)",
            "match": {"optics_vendor": v},
            "claims": [c for c in template if c["id"] in OPTICAL_CLAIMS],
        }
        for v in optics
    ]
    path.write_text(yaml.safe_dump({"vendors": vendors}, sort_keys=False))
    return path


def analyse(
    out: Path, log: Path | None = None, reporter: ReportProcess | None = None
) -> tuple[Path, dict[str, Any]]:
    """Analyse a finished demo folder with its claims and score it against its truth.

    Returns the HTML report's path and the score. With ``reporter`` the report is rendered there while
    this process scores (the same files).

    The claims file is in ``out`` (``write_claims``; the shipped one when absent), so the folder holds
    everything the report came from and ``spanwatch report OUT --claims OUT/claims.yaml`` re-renders it.
    """
    from analyzer.analysis import Analysis
    from spanwatch.analyze import scored

    inputs = analysis_inputs(out, log)
    Analysis(inputs).run().write(out)
    if reporter is None:
        from analyzer.report.command import write_report

        report = write_report(out, inputs.config, inputs.claims)[0]
        return report, scored(out / "truth.json", inputs, out)
    reporter.render(out, inputs.config, inputs.claims)
    result = scored(out / "truth.json", inputs, out)
    return reporter.written()[0], result


def analysis_inputs(out: Path, log: Path | None = None) -> AnalysisInputs:
    """What a finished demo folder is analysed with (its claims written first when absent)."""
    from analyzer.analysis import AnalysisInputs

    claims = out / "claims.yaml"
    if not claims.exists():
        shutil.copyfile(CLAIMS, claims)
    truth = json.loads((out / "truth.json").read_text())
    return AnalysisInputs(
        archive=out / "archive",
        logs=(log or out / "steps.jsonl",),
        config=out / "config.yaml",
        claims=claims,
        # The job's cross-site bytes per step, as the simulated job declares them (a real job's come from
        # its config): the sum over the links it spreads them on.
        job_bytes_per_step=sum(link["job_bytes_per_step"] for link in truth["links"].values()),
        # The queue the job's traffic uses, as the scenario configures it (a real job's from its NCCL_IB_TC
        # / the fabric's QoS policy).
        job_traffic_class=str(truth["job"]["traffic_class"]),
    )


class Demo:
    """One demo run (see the module docstring)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out: Path = args.out
        self.scenario = scenario(args, args.duration)
        fresh_out(self.out)  # once the scenario is valid: a refused file writes nothing
        self.sim = SimulatedFabric(self.scenario)
        self.log = JobLog(self.scenario, self.out, self.sim.host)
        self.sim.on_step = self.log.write
        self.listen = f"127.0.0.1:{free_port()}"

    async def run(self) -> int:
        from collector.daemon import Daemon

        await self.sim.start()
        daemon: Daemon | None = None
        task: asyncio.Task[None] | None = None
        metrics = ""
        stopped = True
        try:
            config = write_config(self.sim, self.out, self.listen)
            daemon = Daemon(config)
            task = asyncio.create_task(daemon.run(), name="collector")
            await self._progress(task)
            # The run is over: the model stops first, so a fabric far behind real time does not hold the
            # event loop the collector's last scrape and its stop need.
            await self.sim.freeze()
            metrics = await last_scrape(self.listen)
        finally:
            await self.sim.freeze()
            if daemon is not None and task is not None:
                daemon.stop()
                stopped = await stop_within(task, STOP_GRACE_S)
            await self.sim.stop()
            self.log.close()
        (self.out / "truth.json").write_text(json.dumps(self.sim.truth(), indent=1))
        if not stopped:
            raise DemoError(
                f"the collector did not stop within {STOP_GRACE_S:.0f} s of the run's end (the machine is "
                f"too busy?); the archive may lack its last flush, so no analysis was run. "
                f"The run's files are in {self.out}"
            )
        if task is not None and task.done() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
        (self.out / "metrics.txt").write_text(metrics)
        summarise(self.out, metrics, self.sim)
        return 0

    async def _progress(self, collector: asyncio.Task[None]) -> None:
        duration = float(self.scenario.duration)
        start = time.monotonic()
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


class DemoError(SpanwatchError):
    """The demo could not finish its run (the message says what happened and where its files are)."""


async def stop_within(task: asyncio.Task[None], grace: float) -> bool:
    """Wait up to ``grace`` seconds for a stopping task, then cancel it; False if it had to be cancelled."""
    done, _ = await asyncio.wait({task}, timeout=grace)
    if done:
        return True
    log.error("demo: the collector did not stop within %.0f s; cancelling it", grace)
    task.cancel()
    await asyncio.wait({task}, timeout=CANCEL_GRACE_S)
    return False


async def last_scrape(listen: str) -> str:
    """The collector's ``/metrics`` at the run's end, or "" (logged) if it does not answer within
    ``STOP_GRACE_S``: the archive, not this scrape, is what the analysis reads."""
    try:
        return await asyncio.wait_for(scrape(listen), timeout=STOP_GRACE_S)
    except (TimeoutError, OSError) as e:
        log.error(
            "demo: no /metrics from the collector within %.0f s (%r); metrics.txt is empty", STOP_GRACE_S, e
        )
        return ""


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
    """Print and return what was collected."""
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
    truth = sim.truth()
    steps = {row["step"]: row["network_seconds"]["total"] for row in truth["steps"]}
    summary = {
        "scenario": truth["scenario"],
        "devices": len(sim.devices),
        "links": len(truth["links"]),
        "families": len(fams),
        "series": sum(fams.values()),
        "archive_files": len(archive),
        "archive_rows": rows,
        "steps": len(steps),
        # The simulation's own count (truth.json), not the analysis's: "the answer" below gives that one.
        "truth_steps_hurt": sum(1 for v in steps.values() if v > 1e-3),
        "network_seconds": round(sum(steps.values()), 3),
        "episodes": [e["kind"] for e in truth["episodes"]],
    }
    from analyzer.text_table import TextTable

    table = TextTable(f"spanwatch demo: {out}", ("what", "value"), ("value",))
    for key, value in summary.items():
        table.add_row(key, ", ".join(value) if isinstance(value, list) else str(value))
    dci = sorted(f for f in fams if f.startswith("dci_"))
    table.add_row("dci_* families", str(len(dci)))
    print(table.render())
    print(
        f"files: {out / 'config.yaml'}, {out / 'archive'}, {out / truth['job']['log_file']}, {out / 'truth.json'}"
    )
    return summary
