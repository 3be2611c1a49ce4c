"""Issue 16, item 6: counter semantics that never make Prometheus compute a rate above line rate.

Sequences go through the real path (``Store.ingest`` -> exposition text) at 10 s polls; the rate is then
computed the way Prometheus does (a decrease counts the new value whole), by hypothesis over random device
lives, and by promtool itself for the three cases of the finding (a Counter32 cleared without a marker,
the 497-day sysUpTime wrap on a Counter32 agent, a sum of Counter32 parts where one part wraps).
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
from collections.abc import Hashable, Iterable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collector.clock import FakeClock
from collector.counters import WRAP32
from collector.exporters.prometheus import render
from collector.model import Sample, counter, gauge, labels
from collector.sources.snmp.engine import Epochs, combine
from collector.store import Store

RX = "dci_interface_receive_bytes_total"
PKTS = "dci_interface_receive_packets_total"
SPEED = "dci_interface_speed_bytes_per_second"
ET1 = labels(interface="Et1")
STEP = 10.0
PROMTOOL = shutil.which("promtool")


def exported(store: Store, metric: str) -> int:
    prefix = f'{metric}{{device="d",interface="Et1"}} '
    line = next(x for x in render(store).splitlines() if x.startswith(prefix))
    return int(line.removeprefix(prefix))


def drive(polls: Iterable[list[Sample]], metric: str, speed: float | None) -> list[int]:
    """Ingest one list of samples per 10 s poll; the exported value of ``metric`` after each."""
    clock = FakeClock()
    store = Store(clock)
    out = []
    for samples in polls:
        extra = [gauge(SPEED, ET1, speed)] if speed is not None else []
        store.ingest("d", "snmp", extra + samples, clock.time_ns())
        out.append(exported(store, metric))
        clock._now += STEP
    return out


def prometheus_increases(values: list[int]) -> list[int]:
    """What Prometheus counts per interval: the delta, or the new value after a decrease (a reset)."""
    return [b - a if b >= a else b for a, b in itertools.pairwise(values)]


# -- the three cases of the finding -----------------------------------------------------------------
def counter32_cleared() -> list[list[Sample]]:
    raws = [3_000_000_000 + 1000 * i for i in range(4)] + [1000 * i for i in range(1, 6)]
    return [[counter(RX, ET1, r, 32, (0, None))] for r in raws]


def sysuptime_wrap_counter32() -> list[list[Sample]]:
    # 30 MB/s on a Counter32 agent that wrapped once already; sysUpTime wraps at 2^32 ticks (497 days).
    epochs, polls, raw = Epochs(), [], 3_500_000_000
    for i in range(10):
        epochs.see_uptime((WRAP32 - 8000 + 1000 * i) % WRAP32)  # at poll 8; the engine sees a reboot
        polls.append([counter(RX, ET1, raw % WRAP32, 32, epochs.of(1))])
        raw += 300_000_000
    return polls


def summed_counter32_part_wraps() -> list[list[Sample]]:
    polls = []
    for i in range(9):
        ucast = (WRAP32 - 4000 + 1000 * i) % WRAP32  # wraps at poll 4
        parts = [counter(PKTS, ET1, v, 32, (0, None)) for v in (ucast, 2_000_000_000, 1_000_000_000)]
        polls.append(combine(parts))
    return polls


CASES = {
    # name: (polls, metric, interface speed in bytes/s, largest rate Prometheus may compute per second)
    "counter32_cleared": (counter32_cleared, RX, 12.5e6, 12.5e6),
    "sysuptime_wrap_497d_c32": (sysuptime_wrap_counter32, RX, 125e6, 125e6),
    "summed_counter32_part_wraps": (summed_counter32_part_wraps, PKTS, 125e6, 125e6 / 64),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_finding_cases_stay_under_line_rate(case: str) -> None:
    make, metric, speed, line_rate = CASES[case]
    increases = prometheus_increases(drive(make(), metric, speed))
    assert max(increases) <= line_rate * (STEP + 0.1), increases


@pytest.mark.parametrize("case", sorted(CASES))
def test_without_a_known_speed_the_old_spike_is_what_promtool_sees(case: str, tmp_path: Path) -> None:
    """The control: the harness does catch the spike the old semantics gave (no speed: no bound)."""
    make, metric, _, line_rate = CASES[case]
    assert _promtool_max_rate_above(tmp_path, drive(make(), metric, None), line_rate) == 1


@pytest.mark.parametrize("case", sorted(CASES))
def test_promtool_computes_no_rate_above_line_rate(case: str, tmp_path: Path) -> None:
    make, metric, speed, line_rate = CASES[case]
    assert _promtool_max_rate_above(tmp_path, drive(make(), metric, speed), line_rate) == 0


def _promtool_max_rate_above(tmp_path: Path, values: list[int], line_rate: float) -> int:
    """Run promtool: 1 when ``rate(x[15s])`` exceeds ``line_rate`` at any 10 s step, else 0."""
    if PROMTOOL is None:
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    end = int(STEP * (len(values) - 1))
    limit = line_rate * 1.05
    for expected in (0, 1):
        (tmp_path / "rules.yml").write_text("groups: []\n")
        (tmp_path / "test.yml").write_text(
            "rule_files: [rules.yml]\nevaluation_interval: 10s\ntests:\n"
            "  - interval: 10s\n"
            "    input_series:\n"
            f"      - series: 'x{{device=\"d\"}}'\n        values: '{' '.join(map(str, values))}'\n"
            "    promql_expr_test:\n"
            f"      - expr: max(max_over_time((rate(x[15s]) > bool {limit:.6g})[{end}s:10s]))\n"
            f"        eval_time: {end}s\n"
            f"        exp_samples: [{{labels: '{{}}', value: {expected}}}]\n"
        )
        done = subprocess.run(
            [PROMTOOL, "test", "rules", "test.yml"], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        if done.returncode == 0:
            return expected
    raise AssertionError(f"promtool gave neither 0 nor 1:\n{done.stdout}{done.stderr}")


# -- property: random device lives ------------------------------------------------------------------
EVENTS = st.sampled_from(["none", "none", "none", "clear", "reboot", "false_marker"])


@settings(max_examples=200, deadline=None)
@given(
    speed=st.sampled_from([12.5e6, 125e6, 1.25e9, 12.5e9]),
    width=st.sampled_from([32, 64]),
    start=st.integers(0, WRAP32 - 1),
    life=st.lists(st.tuples(st.floats(0, 1), EVENTS), min_size=2, max_size=40),
)
def test_no_rate_above_line_rate_whatever_the_device_does(
    speed: float, width: int, start: int, life: list[tuple[float, str]]
) -> None:
    modulus = WRAP32 if width == 32 else 1 << 64
    raw, epoch = start % modulus, 0
    polls = [[counter(RX, ET1, raw, width, epoch)]]
    for load, event in life:
        increment = int(load * speed * STEP)  # what the line can carry in one interval, at most
        epoch_now: Hashable = epoch
        if event == "clear":
            raw = increment % modulus  # cleared without a marker, then counted on
        elif event == "reboot":
            epoch += 1
            epoch_now = epoch
            raw = increment % modulus
        else:
            if event == "false_marker":  # a marker that changes while the counter goes on (uptime wrap)
                epoch += 1
                epoch_now = epoch
            raw = (raw + increment) % modulus
        polls.append([counter(RX, ET1, raw, width, epoch_now)])
    increases = prometheus_increases(drive(polls, RX, speed))
    assert max(increases) <= speed * (STEP + 0.1)
