"""``spanwatch lab``: the real-workload lab, end to end, into ``--out``.

Order: check root and namespaces (one line, exit 2), replace an earlier demo's or lab's recording in
``--out`` (``spanwatch.run_folder``: an archive neither wrote is refused), remove what a killed run left,
build the namespaces (``topology``), start the routers' snmpd and gNMI agents and the generators' iperf3
servers, measure each pinned flow's round trip, run the job clean (the control run,
``control-run/steps.jsonl``; ``control/`` is the scorer's shifted analysis), start the collector, run the
job again with the episodes on schedule, read the queues over gNMI beside ``tc`` while they are
loaded, stop everything and remove the namespaces, then write ``steps.jsonl``, ``truth.json`` and
``qdisc-check.json`` and run ``spanwatch analyze`` (and the score, where this build has
``spanwatch score``) and the report into the same folder. Everything is removed on exit, on failure and on
SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType
from typing import Any

from spanwatch.lab import config as lab_config
from spanwatch.lab import netns, services
from spanwatch.lab import truth as lab_truth
from spanwatch.lab.checks import job_bytes, qdisc_rows, summarise_checks
from spanwatch.lab.config import SITES, LabConfig
from spanwatch.lab.episodes import Action
from spanwatch.lab.netns import LabError, Process
from spanwatch.lab.topology import GLOO_PORT, GNMI_PORT, MGMT, Plan, router_ns
from spanwatch.run_folder import replace_earlier_run

log = logging.getLogger("spanwatch.lab")

TRAIN = Path(__file__).with_name("train.py")
JOB_PYTHON = os.environ.get("SPANWATCH_LAB_PYTHON", "/usr/bin/python3")  # the Python that carries torch
START_TIMEOUT_S = 120.0
END_GRACE_S = 60.0
TICK_S = 0.05
TOOLS = ("ip", "tc", "ethtool", "timeout", services.SNMPD, services.IPERF3)


def arguments(p: argparse.ArgumentParser) -> None:
    """``spanwatch lab`` options."""
    p.add_argument(
        "--config",
        type=Path,
        default=lab_config.DEFAULT,
        help="a lab file (default: the built-in two-links lab; examples/lab/short.yaml is CI's)",
    )
    p.add_argument("--duration", type=float, help="seconds of the episode run (default: the file's)")
    p.add_argument("--control", type=float, help="seconds of the clean control run (default: the file's)")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--no-analyze", action="store_true", help="stop after the truth (no analysis)")


def run_command(args: argparse.Namespace) -> int:
    """The lab (see the module docstring); 2 when namespaces cannot be made here."""
    reason = netns.can_create()
    if reason is not None:
        print(f"spanwatch lab: {reason}", file=sys.stderr)
        return 2
    config = lab_config.load(args.config, args.duration)
    if args.control is not None:
        config = config.model_copy(update={"control": args.control})
    preflight()
    out: Path = args.out
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        with netns.Lock():
            # Under the lock: a lab refused because another is running leaves its folder as it was.
            fresh_out(out)
            Lab(config, out).run()
    finally:
        signal.signal(signal.SIGTERM, previous)
    if not args.no_analyze:
        analyse(out)
    return 0


def fresh_out(out: Path) -> None:
    """Replace an earlier lab or demo run's recording in ``out`` (``spanwatch.run_folder``): the analysis
    reads the whole archive."""
    folders = ("archive", "control", "control-run", "run", "lab-logs")
    replace_earlier_run(out, "lab", (*folders, "truth.json", "steps.jsonl", "qdisc-check.json", "score.json"))


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def preflight() -> None:
    """Every tool the lab needs is here (one line naming what is missing and how to get it)."""
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        raise LabError(f"missing: {', '.join(missing)} (apt-get install -y iproute2 ethtool snmpd iperf3)")
    if importlib.util.find_spec("pyroute2") is None:
        raise LabError("missing pyroute2 (pip install -e '.[lab]')")
    probe = subprocess.run([JOB_PYTHON, "-c", "import torch.distributed"], capture_output=True, check=False)
    if probe.returncode != 0:
        raise LabError(f"{JOB_PYTHON} cannot import torch (apt-get install -y python3-torch)")


class Lab:
    """One lab run into ``out``."""

    def __init__(self, config: LabConfig, out: Path) -> None:
        self.config = config
        self.plan = Plan(config)
        self.out = out
        self.logs = out / "lab-logs"
        self.logs.mkdir(exist_ok=True)
        self.state = Path(tempfile.mkdtemp(prefix="swlab-"))
        self.processes: list[Process] = []
        self.checks: list[tuple[str, str, Process]] = []

    def run(self) -> None:
        stale = netns.cleanup()
        if stale:
            log.warning("lab: removed what an earlier run left: %s", ", ".join(stale))
        netem = netns.netem_available()
        if netem:
            log.info("lab: netem present: each link carries its distance's delay")
        else:
            log.warning("lab: %s", NO_NETEM)
        try:
            self._run(netem)
        finally:
            for p in reversed(self.processes):
                p.stop()
            netns.cleanup()
            shutil.rmtree(self.state, ignore_errors=True)

    def _run(self, netem: bool) -> None:
        plan, config = self.plan, self.config
        for cmd in plan.build(netem):
            netns.run(cmd)
        log.info("lab: %d namespaces, %d links built", len(plan.namespaces()), len(plan.links))
        snmpds = [services.Snmpd(plan, site, self.state, self.logs) for site in SITES]
        self.processes += [s.process for s in snmpds]
        self.processes += [services.agent(plan, site, self.state, self.logs) for site in SITES]
        self.processes += services.iperf_servers(plan, self.logs)
        reflectors = services.reflectors(plan, self.logs)
        self.processes += reflectors
        ready = {f"gnmi-{s}": "gnmi agent on" for s in SITES}
        ready |= {p.name: "reflecting TWAMP-light" for p in reflectors}
        services.wait_ready(self.processes, ready)
        rtt = self.round_trips()
        log.info("lab: round trips %s", {k: f"{v * 1e6:.0f} us" for k, v in rtt.items()})

        log.info("lab: control run, %g s", config.control)
        before = job_bytes(plan)
        control = self.job(self.out / "control-run", config.control, [])
        per_step = self.directions(before, job_bytes(plan), len({r["step"] for r in control}))
        distance = {link.spec.name: link.spec.distance_km if netem else 0.001 for link in plan.links}
        collector = services.collector(services.collector_config(plan, self.out, distance), self.logs)
        self.processes.append(collector)
        time.sleep(2 * config.interval + 1)  # first polls done before the run starts
        if not collector.alive():
            raise LabError(f"the collector exited: {collector.tail()}")

        log.info("lab: episode run, %g s, %d episode(s)", config.duration, len(config.episodes))
        actions = [Action(i, e, plan, self.logs, snmpds) for i, e in enumerate(config.episodes)]
        steps, start = self.job(self.out / "run", config.duration, actions, with_start=True)
        self.check("end")
        self.finish_checks()
        collector.stop(grace=15.0)

        write_steps(self.out / "steps.jsonl", steps)
        write_steps(self.out / "control-run" / "steps.jsonl", control)
        truth = lab_truth.build(
            config, plan, start, control, steps, actions, rtt, per_step, netem, "steps.jsonl"
        )
        (self.out / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
        summarise(truth, self.out)

    # -- the job ---------------------------------------------------------------------------------------
    def job(self, folder: Path, seconds: float, actions: list[Action], with_start: bool = False) -> Any:
        """Run the training job for ``seconds`` with ``actions`` on schedule; its step rows (and start)."""
        folder.mkdir(parents=True, exist_ok=True)
        start_file = folder / "start.json"
        start_file.unlink(missing_ok=True)
        ranks = self.plan.ranks
        master = f"{ranks[0].address}:{GLOO_PORT}"
        procs = []
        for host in ranks:
            job = self.config.job
            argv = [
                JOB_PYTHON, str(TRAIN), "--rank", str(host.rank), "--world", str(len(ranks)),
                "--master", master, "--log", str(folder / f"steps.rank{host.rank}.jsonl"),
                "--start-file", str(start_file), "--duration", f"{seconds:g}",
                "--width", str(job.width), "--hidden", str(job.hidden), "--batch", str(job.batch),
                "--seed", str(self.config.seed),
            ]  # fmt: skip
            for a in actions:
                if a.spec.kind == "compute_stall" and host.rank in a.spec.ranks:
                    argv += ["--stall", f"{a.spec.start:g}:{a.spec.duration:g}"]
            if job.profile and actions:
                argv += ["--profile", str(folder / "traces")]
            env = {"GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1"}
            procs.append(Process(f"{folder.name}-rank{host.rank}", host.ns, argv, self.logs, env))
        self.processes += procs
        start = self._wait_start(start_file, procs)
        self._schedule(start, seconds, actions, procs)
        for p in procs:
            if p.popen.returncode != 0:
                raise LabError(f"{p.name} failed (exit {p.popen.returncode}): {p.tail()}")
        rows = [
            json.loads(line)
            for host in ranks
            for line in (folder / f"steps.rank{host.rank}.jsonl").read_text().splitlines()
            if line.strip()
        ]
        rows.sort(key=lambda r: (r["step"], r["rank"]))
        return (rows, start) if with_start else rows

    @staticmethod
    def _wait_start(start_file: Path, procs: list[Process]) -> float:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not start_file.exists():
            for p in procs:
                if not p.alive():
                    raise LabError(f"{p.name} exited before the start: {p.tail()}")
            if time.monotonic() > deadline:
                raise LabError(f"the job did not start within {START_TIMEOUT_S:g} s")
            time.sleep(0.1)
        return float(json.loads(start_file.read_text())["start"])

    def _schedule(self, start: float, seconds: float, actions: list[Action], procs: list[Process]) -> None:
        """Start and end each episode on time while the job runs; then wait for the job to end."""
        deadline = start + seconds + END_GRACE_S
        pending = sorted(actions, key=lambda a: a.spec.start)
        active: list[Action] = []
        next_log = start
        while any(p.alive() for p in procs):
            now = time.time()
            while pending and now >= start + pending[0].spec.start:
                a = pending.pop(0)
                a.start(now)
                active.append(a)
                log.info("lab: +%.1f s %s %s", now - start, a.spec.kind, a.spec.link or a.spec.ranks)
            for a in list(active):
                end = start + a.spec.start + a.spec.duration
                halfway = start + a.spec.start + a.spec.duration / 2
                if a.spec.kind == "congestion" and not a.checked and now >= halfway:
                    a.checked = True  # the loaded router's queues, gNMI beside tc, once per episode
                    self.check(f"episode-{a.index}", [a.direction[0]])
                if now >= end:
                    a.end(now)
                    active.remove(a)
            if now >= next_log:
                log.info("lab: +%.0f/%g s", now - start, seconds)
                next_log += 15.0
            if now > deadline:
                raise LabError(f"the job did not end within {END_GRACE_S:g} s of its duration")
            time.sleep(TICK_S)
        for a in active:
            a.end(time.time())

    # -- measurements ----------------------------------------------------------------------------------
    def directions(
        self, before: dict[tuple[str, int], int], after: dict[tuple[str, int], int], steps: int
    ) -> dict[str, float]:
        """Which way the job's data crosses each link (the busier egress in the control run), set on the
        plan for the episodes' default direction; returns the job's bytes per step on each link."""
        per_step = {}
        for link in self.plan.links:
            sent = {site: after[(site, link.index)] - before[(site, link.index)] for site in SITES}
            busy = max(SITES, key=lambda s: sent[s])
            self.plan.measured[link.index] = f"{busy}-{SITES[1 - SITES.index(busy)]}"
            per_step[link.spec.name] = sent[busy] / max(1, steps)
            log.info("lab: job data on %s: %s, %.0f kB per step (other way %.0f kB)", link.spec.name,
                     self.plan.measured[link.index], per_step[link.spec.name] / 1e3,
                     min(sent.values()) / max(1, steps) / 1e3)  # fmt: skip
        return per_step

    def round_trips(self) -> dict[str, float]:
        """Per link, the median time of a TCP connect refused by the far host (one round trip), over the
        pinned ring flow that crosses it."""
        code = (
            "import socket,time,statistics as s\n"
            "t=[]\n"
            "for _ in range(21):\n"
            " c=socket.socket();a=time.perf_counter()\n"
            " try: c.connect(('{dst}',9))\n"
            " except OSError: pass\n"
            " t.append(time.perf_counter()-a);c.close()\n"
            "print(s.median(t))\n"
        )
        out = {}
        for src, dst, link in self.plan.ring_flows():
            text = netns.run(netns.exec_in(src.ns, [JOB_PYTHON, "-c", code.format(dst=dst.address)]))
            out[link.spec.name] = float(text.strip())
        return out

    def check(self, label: str, sites: list[str] | None = None) -> None:
        """Read the queues over gNMI beside ``tc`` (in the background: the result is read at the end)."""
        for site in sites or list(SITES):
            argv = [
                sys.executable, "-m", "spanwatch.lab.agent", "get",
                "--address", f"{self.plan.mgmt_address(site)}:{GNMI_PORT}", "--tc-ns", router_ns(site),
                *(w for link in self.plan.links for w in ("--dev", link.ifname)),
            ]  # fmt: skip
            p = Process(f"check-{label}-{site}", MGMT, argv, self.logs)
            self.processes.append(p)
            self.checks.append((label, site, p))

    def finish_checks(self) -> None:
        rows: list[dict[str, Any]] = []
        for label, site, p in self.checks:
            p.popen.wait(30)
            p.stop()
            text = p.log_path.read_text(errors="replace").strip().splitlines()
            try:
                raw = json.loads(text[-1])
            except (IndexError, ValueError):
                log.warning("lab: check %s at %s gave no reading: %s", label, site, p.tail())
                continue
            rows += qdisc_rows(raw, label, site, self.plan)
        (self.out / "qdisc-check.json").write_text(json.dumps(rows, indent=1) + "\n")
        summarise_checks(rows)


def write_steps(path: Path, rows: list[dict[str, Any]]) -> None:
    """The job's step log, every rank in one file (the analyzer's plain JSONL format plus the split)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def summarise(truth: dict[str, Any], out: Path) -> None:
    """Print what the run measured: the clean figures and each episode's measured cost."""
    from analyzer.text_table import TextTable

    clean = truth["lab"]["clean"]
    print(
        "control: "
        + ", ".join(
            f"rank {r}: step {c['step_seconds'] * 1e3:.0f} ms, sync {c['sync_seconds'] * 1e3:.0f} ms"
            f" (p90-p50 {c['spread_seconds'] * 1e3:.0f} ms)"
            for r, c in clean.items()
        )
    )
    columns = ("episode", "link", "class", "start", "s", "measured extra / step", "affects job")
    table = TextTable(f"spanwatch lab: {out}", columns, ("start", "s", "measured extra / step"))
    for e in truth["episodes"]:
        table.add_row(
            e["kind"],
            e["link"] or ",".join(map(str, e["ranks"])),
            str(e.get("traffic_class", "")),
            f"{e['start']:g}",
            f"{e['duration']:g}",
            f"{e['measured_extra_seconds'] * 1e3:.1f} ms",
            "yes" if e["affects_job"] else "no",
        )
    print(table.render())
    cost = sum(s["network_seconds"]["total"] for s in truth["steps"]) / max(1, len(clean))
    print(f"steps: {len(truth['steps'])} rows; network cost in truth: {cost:.2f} s per rank")


def analyse(out: Path) -> None:
    """``spanwatch analyze`` on the lab's archive and step log into ``out``, scored against the lab's truth
    (with its control), then the report. The job's class and bytes per step are what the lab configured
    and measured in the control run, as a real job's operator would give them."""
    truth = json.loads((out / "truth.json").read_text())
    job_bytes = sum(link["job_bytes_per_step"] for link in truth["links"].values())
    argv = [
        sys.executable, "-m", "spanwatch", "analyze", "--archive", str(out / "archive"),
        "--logs", str(out / "steps.jsonl"), "--config", str(out / "config.yaml"), "--out", str(out),
        "--truth", str(out / "truth.json"), "--job-traffic-class", str(truth["job"]["traffic_class"]),
        "--job-bytes-per-step", str(job_bytes),
    ]  # fmt: skip
    log.info("lab: analysing and scoring")
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    (out / "analyze.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise LabError(f"spanwatch analyze failed (exit {done.returncode}): see {out / 'analyze.log'}")
    report = subprocess.run(
        [sys.executable, "-m", "spanwatch", "report", str(out)], capture_output=True, text=True, check=False
    )
    (out / "report.log").write_text(report.stdout + report.stderr)
    if report.returncode != 0:
        log.warning("lab: the report failed: see %s", out / "report.log")
    for line in conclusion(out):
        print(line)


NO_NETEM = (
    "no netem in this kernel: the links run at zero distance, so the round trips and the blame are those "
    "of a 0 km fabric, not of the configured distances"
)


def conclusion(out: Path) -> list[str]:
    """The lab's last word: where the analysis is, whether its score passed (and why not), and a warning
    when the kernel had no netem."""
    from spanwatch.score import verdict

    truth = json.loads((out / "truth.json").read_text())
    result = json.loads((out / "score.json").read_text())
    lines = [f"lab: analysis and report in {out}, score in {out / 'score.json'}"]
    if not truth.get("lab", {}).get("netem", True):
        lines.append(f"lab: warning: {NO_NETEM}")
    lines.append(f"lab: score {verdict(result)} (against the lab's measured truth)")
    return lines
