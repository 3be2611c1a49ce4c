"""The boards and rules on the simulated fabric: the issue's check, end to end.

The simulated fabric (collector/sim/: two DCI switches' SNMP agents and gNMI targets on loopback) runs
its four episodes (the built-in scenario's) on a compressed schedule; the real collector (``spanwatch collect`` as a subprocess)
collects from it with the config the fabric describes; Debian's Prometheus scrapes the collector every
second with deploy/prometheus/rules/spanwatch.rules.yml loaded (evaluated every second). Then:

- every panel query and every variable query of every board, with the variables set to what exists in the
  sim (each site with its switch, and the link ``ab``), parses (promtool) and returns data;
- every recording rule's expression returns data, and so does the series it records;
- every alert expression parses, and returns data with its final threshold comparison stripped;
- the alerts the episodes (and the test's two dead ends) trigger become active: they appear in
  ``ALERTS``, most as *pending*, because their ``for:`` (30 s to 5 minutes) is longer than the test;
- the optics alerts *fire* within 60 s of the optic crossing their level (the optics group keeps its own
  15 s interval here, as deployed), one per channel: the degraded channel's, not its per-interface SNMP
  copy nor the other channels of the device.

The fabric is lossy (no PFC: ``spanwatch sim --lossy``) so that the congestion episode tail-drops. Alerts
that fire, and why (the schedule: ``EPISODES_OVER_S``, shifted by ``LEAD_S``):

- SpanwatchInterDcLinkDropping: the congestion episode (1.2 x line rate in the job's class) overfills the
  queues of dci-ab-a;
- SpanwatchEcnSurge: the same queue marks nearly every departure (well over 5% of the link's packets);
- SpanwatchPreFecBerNearLimit and SpanwatchOsnrMarginLow: the optical degradation of dci-ab-b's
  receiver on wave 4 (1 dB past the FEC limit);
- SpanwatchWaveDown: the wave-down episode (wave 1, both ends);
- SpanwatchTargetDown: a dead SNMP target the test adds to the collector config (not part of the sim);
- SpanwatchCollectorDown: a dead scrape target the test adds to Prometheus's config.

Alerts that cannot fire here, checked only through their stripped expressions: SpanwatchPfcStorm (the
sim's switches only send pauses, so received pause time is 0, and its watchdog needs a priority paused
for 200 ms without a break, which the fluid model's proportional pausing never does under any episode;
with ``lossless`` PFC off the sim sends no pauses at all) and SpanwatchTargetStale (a target must have
succeeded and then failed for 5 minutes).

Expressions the sim cannot give data to are listed in ``KNOWN_GAPS`` with the reason, and tested as strict
xfails: they fail visibly in the report, and the day they return data the xfail turns into a failure that
says to drop the entry. Skipped when Prometheus is not installed.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from spanwatch.sim.layout import Layout
from spanwatch.sim.runtime import SimulatedFabric
from spanwatch.sim.scenario import Scenario, builtin
from tests.deploy.promql import (
    PROMTOOL,
    ROOT,
    VARIABLES,
    Expression,
    alert_rules,
    dashboard_expressions,
    promtool_check,
    rule_groups,
    strip_threshold,
)
from tests.integration.loop_thread import LoopThread
from tests.integration.processes import stop_process
from tests.integration.prometheus_support import PROMETHEUS, SKIP_REASON, free_port, prometheus, query

pytestmark = pytest.mark.integration

EPISODES_OVER_S = 40.0  # congestion 4.8-10.8 s, incast 14-18, optics 20-28, wave down 32-35.2 (+ LEAD_S)
LEAD_S = 3.0  # the episodes start this much later, once the collector and Prometheus are up


def scenario() -> Scenario:
    """The built-in demo, lossy, its episodes shifted by ``LEAD_S``; the congestion in the job's class
    above line rate, so that it overfills the queue (drops, ECN) whatever the job's rate."""
    s = builtin(EPISODES_OVER_S, lossless=False)
    episodes = tuple(
        e.model_copy(update={"start": e.start + LEAD_S, **({"load": 1.2} if e.kind == "congestion" else {})})
        for e in s.episodes
    )
    return s.model_copy(update={"episodes": episodes, "duration": EPISODES_OVER_S + LEAD_S})


SCENARIO = scenario()
DEVICES = tuple(d.name for d in Layout(SCENARIO).devices)
SITES = SCENARIO.sites
LINK = SCENARIO.links[0].name
DEADLINE_S = 75.0  # stop waiting this long after the fabric starts
POLL_S = 1.0
DEAD_TARGET = "dci9.site-z"
FIRING_WITHIN_S = 60.0
OPTICS_ALERTS = ("SpanwatchPreFecBerNearLimit", "SpanwatchOsnrMarginLow")

EXPECTED_ALERTS = {
    "SpanwatchInterDcLinkDropping": "congestion episode (tail drops: the fabric is lossy)",
    "SpanwatchEcnSurge": "congestion episode",
    "SpanwatchPreFecBerNearLimit": "optical degradation episode",
    "SpanwatchOsnrMarginLow": "optical degradation episode",
    "SpanwatchWaveDown": "wave-down episode",
    "SpanwatchTargetDown": f"the dead target {DEAD_TARGET} the test adds",
    "SpanwatchCollectorDown": "the dead scrape target the test adds",
}

# The training board shows ``spanwatch follow``'s figures, not the collector's: this test runs the collector
# only. test_follow_on_sim runs follow beside a demo, and test_boards_return_data queries every one of the
# board's expressions against a real Prometheus.
FOLLOW_BOARD = "spanwatch-training.json"
# Board expressions (``where`` as tests.deploy.promql names them) the sim cannot give data to, and why.
KNOWN_GAPS = {
    "spanwatch-collector.json: Counter discontinuities (resets) A": (
        "dci_counter_discontinuities_total: the sim never reboots a switch or clears its counters (no "
        "episode does), so the collector never counts a discontinuity and exports no such series"
    ),
}


@dataclass(frozen=True)
class Check:
    """One expression to run, where it comes from (``where``) and for which variable set (``scope``)."""

    where: str
    expr: str
    scope: str = ""

    @property
    def name(self) -> str:
        return f"[{self.scope}] {self.where}" if self.scope else self.where


def variable_sets() -> dict[str, dict[str, str]]:
    """The boards' variables as a user picking each site (and its switch) of the sim's link would set them."""
    return {
        f"site={site}": {**VARIABLES, "$site": site, "$link": LINK, "$device": device}
        for site, device in zip(SITES, DEVICES, strict=True)
    }


def board_checks() -> list[Check]:
    return [
        Check(e.where, e.expr, scope)
        for scope, variables in variable_sets().items()
        for e in dashboard_expressions(variables=variables)
    ]


def rule_checks() -> list[Check]:
    """Each recording rule's expression and recorded series; each alert's expression, threshold stripped."""
    out: list[Check] = []
    for group in rule_groups():
        for rule in group["rules"]:  # type: ignore[attr-defined]
            if "record" in rule:
                out.append(Check(f"rule {rule['record']}", rule["expr"]))
                out.append(Check(f"rule {rule['record']} (recorded series)", rule["record"]))
            else:
                out.append(
                    Check(f"alert {rule['alert']} (threshold stripped)", strip_threshold(rule["expr"]))
                )
    return out


class SimThread(LoopThread):
    """The simulated fabric on its own event loop."""

    def __init__(self) -> None:
        super().__init__(name="sim-fabric")
        self.sim = SimulatedFabric(SCENARIO)

    async def main(self, halt: asyncio.Event) -> None:
        await self.sim.start()
        try:
            self.ready.set()
            await halt.wait()
        finally:
            await self.sim.stop()


def collector_config(sim: SimulatedFabric, tmp: Path, listen: str) -> Path:
    """The sim's collector config plus a dead SNMP target (for SpanwatchTargetDown), written into ``tmp``."""
    (tmp / "community").write_text(sim.community + "\n")
    (tmp / "community").chmod(0o600)
    config = sim.collector_config(listen, archive=str(tmp / "archive"))
    dead = {**config["targets"][0], "name": DEAD_TARGET, "labels": {"site": "z"}}
    dead.pop("gnmi")
    dead["snmp"] = {**dead["snmp"], "address": f"127.0.0.1:{free_port()}"}  # nothing answers there
    config["targets"].append(dead)
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@dataclass
class Run:
    """What one run of the fabric, the collector and Prometheus showed."""

    data: dict[str, bool] = field(default_factory=dict)  # check name -> returned data at least once
    alerts: dict[str, set[str]] = field(default_factory=dict)  # alertname -> states seen in ALERTS
    seconds_to_data: float | None = None
    seconds: float = 0.0
    # (alertname, device, component or interface) -> wall time it was first seen firing
    firing: dict[tuple[str, str, str], float] = field(default_factory=dict)
    onset: Onset | None = None


def _watch(url: str, checks: list[Check], collector: subprocess.Popen[bytes], log: Path) -> Run:
    run = Run({c.name: False for c in checks})
    start = time.monotonic()
    gaps = {c.name for c in checks if c.where in KNOWN_GAPS}
    while (elapsed := time.monotonic() - start) < DEADLINE_S:
        if collector.poll() is not None:
            pytest.fail(f"the collector exited with {collector.returncode}:\n{log.read_text()[-4000:]}")
        for c in checks:
            if not run.data[c.name] and query(url, c.expr):
                run.data[c.name] = True
        for series in query(url, "ALERTS") or []:
            labels = series["metric"]
            run.alerts.setdefault(labels["alertname"], set()).add(labels["alertstate"])
            if labels["alertstate"] == "firing":
                place = labels.get("component") or labels.get("interface", "")
                run.firing.setdefault((labels["alertname"], labels.get("device", ""), place), time.time())
        missing = [n for n, ok in run.data.items() if not ok and n not in gaps]
        if not missing and run.seconds_to_data is None:
            run.seconds_to_data = elapsed
        fired = {name for name, *_ in run.firing}
        if not missing and set(EXPECTED_ALERTS) <= set(run.alerts) and set(OPTICS_ALERTS) <= fired:
            break
        time.sleep(POLL_S)
    run.seconds = time.monotonic() - start
    to_data = "never" if run.seconds_to_data is None else f"{run.seconds_to_data:.0f} s"
    print(f"\nboards on sim: data after {to_data}, active alerts {sorted(run.alerts)}, {run.seconds:.0f} s")
    return run


@dataclass(frozen=True)
class Onset:
    """When the optical episode's channel crossed each alert's level (wall clock), and where."""

    device: str
    component: str
    times: dict[str, float]


def optical_onset(sim: SimulatedFabric) -> Onset:
    """The degraded channel and when its episode began (wall clock): the model drops the channel's OSNR
    by the episode's full amount at its start, past both alerts' levels (``scenario.builtin`` sizes it to
    cross the FEC limit), so both alerts' onset is the episode's start."""
    (e,) = [e for e in SCENARIO.episodes if e.kind == "optical_degradation"]
    (far,) = [d for d in Layout(SCENARIO).devices if d.link == e.link and d.side == 1]
    start = sim.wall(e.start)
    return Onset(far.name, f"OpticalChannel1/{e.wave}", dict.fromkeys(OPTICS_ALERTS, start))


@pytest.fixture(scope="module")
def onset(run: Run) -> Onset:
    assert run.onset is not None
    return run.onset


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    if PROMETHEUS is None:
        pytest.skip(SKIP_REASON)
    tmp = tmp_path_factory.mktemp("boards-on-sim")
    listen = f"127.0.0.1:{free_port()}"
    targets = [listen, f"127.0.0.1:{free_port()}"]  # the second is down: SpanwatchCollectorDown
    with prometheus(tmp, targets) as url:
        fabric = SimThread()
        fabric.start()
        collector: subprocess.Popen[bytes] | None = None
        log = tmp / "collector.log"
        try:
            fabric.wait_ready()
            config = collector_config(fabric.sim, tmp, listen)
            with log.open("wb") as out:
                collector = subprocess.Popen(
                    [sys.executable, "-m", "spanwatch.cli", "--log-level", "warning", "collect",
                     "--config", str(config)],
                    cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                )  # fmt: skip
            watched = _watch(url, board_checks() + rule_checks(), collector, log)
            watched.onset = optical_onset(fabric.sim)
            yield watched
        finally:
            if collector is not None:
                stop_process(collector, 15)
            fabric.stop()


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (apt-get install prometheus)")
def test_every_expression_parses(tmp_path: Path) -> None:
    checks = board_checks() + rule_checks()
    expressions = [Expression(c.name, c.expr) for c in checks]
    expressions += [Expression(f"alert {r['alert']}", r["expr"]) for r in alert_rules()]
    result = promtool_check(expressions, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_panel_variable_and_rule_returns_data(run: Run) -> None:
    empty = [
        c
        for c in board_checks() + rule_checks()
        if c.where not in KNOWN_GAPS and not c.where.startswith(FOLLOW_BOARD) and not run.data[c.name]
    ]
    assert not empty, "no data from the sim for:\n" + "\n".join(f"{c.name}: {c.expr}" for c in empty)


def test_episodes_make_their_alerts_active(run: Run) -> None:
    missing = {a: why for a, why in EXPECTED_ALERTS.items() if a not in run.alerts}
    assert not missing, f"never active: {missing}; active: {run.alerts}"
    # Every alert the run saw is one the schedule explains.
    assert set(run.alerts) <= set(EXPECTED_ALERTS), run.alerts


@pytest.mark.parametrize(
    "where",
    [
        pytest.param(w, marks=pytest.mark.xfail(strict=True, reason=why), id=w)
        for w, why in KNOWN_GAPS.items()
    ],
)
def test_known_gaps(run: Run, where: str) -> None:
    names = [c.name for c in board_checks() if c.where == where]
    assert names, f"{where} is no longer on a board: drop it from KNOWN_GAPS"
    assert all(run.data[n] for n in names), f"{where}: no data from the sim"


def test_optics_alerts_fire_within_a_minute_of_onset_once_per_channel(run: Run, onset: Onset) -> None:
    for name in OPTICS_ALERTS:
        fired = {
            place: t
            for (alert, device, place), t in run.firing.items()
            if alert == name and device == onset.device
        }
        # The wave-down episode (wave 0, both ends) reads loss of signal on OpticalChannel1/1: its own alerts.
        fired.pop("OpticalChannel1/1", None)
        assert set(fired) == {onset.component}, (
            f"{name}: firing on {sorted(fired)}, expected {onset.component} only"
        )
        delay = fired[onset.component] - onset.times[name]
        print(f"{name} on {onset.device} {onset.component}: firing {delay:.1f} s after onset")
        assert delay <= FIRING_WITHIN_S, f"{name} fired {delay:.0f} s after onset"
