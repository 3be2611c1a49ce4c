"""Issue 16, item 6: counter semantics that never make Prometheus compute a rate above line rate; issue 34
point 3: nor above the true traffic on agents without ifHighSpeed (no speed known).

Sequences go through the real path (``Store.ingest`` -> exposition text) at 10 s polls; the rate is then
computed the way Prometheus does (a decrease counts the new value whole), by hypothesis over random device
lives, and by promtool itself for the three cases of the finding (a Counter32 cleared without a marker,
the 497-day sysUpTime wrap on a Counter32 agent, a sum of Counter32 parts where one part wraps), with the
interface speed known and without it.
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
from collector.counters import HEADROOM, WRAP32
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
        assert not epochs.see_uptime((WRAP32 - 8000 + 1000 * i) % WRAP32, now=STEP * i)  # wraps at poll 8
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
    # name: (polls, metric, interface speed in bytes/s, largest rate Prometheus may compute per second,
    #        the true rate per second)
    "counter32_cleared": (counter32_cleared, RX, 12.5e6, 12.5e6, 100.0),
    "sysuptime_wrap_497d_c32": (sysuptime_wrap_counter32, RX, 125e6, 125e6, 30e6),
    "summed_counter32_part_wraps": (summed_counter32_part_wraps, PKTS, 125e6, 125e6 / 64, 100.0),
}


def old_semantics(polls: list[list[Sample]]) -> list[int]:
    """The totals main exported before issues 16 and 34 with no speed known: a Counter32 decrease was a
    wrap, any other decrease or a changed epoch a reset at the reading (a sum of parts was 64 bits wide)."""
    (first,), *rest = polls
    assert first.raw is not None
    total, last, epoch, out = first.raw, first.raw, first.epoch, [first.raw]
    width = 64 if first.metric == PKTS else first.width
    for (s,) in rest:
        assert s.raw is not None
        if s.epoch != epoch or (s.raw < last and width == 64):
            total = s.raw
        else:
            total += s.raw - last if s.raw >= last else s.raw + WRAP32 - last
        last, epoch = s.raw, s.epoch
        out.append(total)
    return out


def test_a_sysuptime_wrap_is_not_a_reboot() -> None:
    epochs = Epochs()
    assert not epochs.see_uptime(WRAP32 - 500, now=0.0)  # 5 s before the 497-day wrap
    assert not epochs.see_uptime(500, now=10.0)  # 10 s later, across 2^32: the wrap
    assert epochs.boots == 0
    assert epochs.see_uptime(300, now=20.0)  # back to 3 s: a reboot
    epochs = Epochs()
    epochs.see_uptime(WRAP32 - 500, now=0.0)
    assert epochs.see_uptime(100_000, now=10.0)  # 1,000 s since boot cannot be 10 s across the wrap
    assert epochs.boots == 1


@pytest.mark.parametrize("case", sorted(CASES))
def test_finding_cases_stay_under_line_rate(case: str) -> None:
    make, metric, speed, line_rate, _ = CASES[case]
    increases = prometheus_increases(drive(make(), metric, speed))
    assert max(increases) <= line_rate * (STEP + 0.1), increases


@pytest.mark.parametrize("case", sorted(CASES))
def test_without_ifhighspeed_no_increase_beyond_the_true_traffic(case: str) -> None:
    make, metric, _, _, true_rate = CASES[case]
    increases = prometheus_increases(drive(make(), metric, None))
    assert max(increases) <= true_rate * STEP, increases
    assert sum(increases) >= true_rate * STEP * (len(increases) - 1)  # at most one interval undercounted


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_old_spike_is_what_promtool_sees(case: str, tmp_path: Path) -> None:
    """The control: the harness does catch the spike the old semantics gave."""
    make, _, _, _, true_rate = CASES[case]
    # the sysUpTime case's old spike came from the false reboot, which Epochs no longer reports
    polls = make() if case != "sysuptime_wrap_497d_c32" else _with_false_reboot(make())
    assert _promtool_max_rate_above(tmp_path, old_semantics(polls), true_rate * 1.5) == 1


def _with_false_reboot(polls: list[list[Sample]]) -> list[list[Sample]]:
    return [
        [counter(s.metric, s.labels, s.raw or 0, 32, (int(i >= 8), 1)) for s in p]
        for i, p in enumerate(polls)
    ]


@pytest.mark.parametrize("case", sorted(CASES))
def test_promtool_computes_no_rate_above_line_rate(case: str, tmp_path: Path) -> None:
    make, metric, speed, line_rate, _ = CASES[case]
    assert _promtool_max_rate_above(tmp_path, drive(make(), metric, speed), line_rate) == 0


@pytest.mark.parametrize("case", sorted(CASES))
def test_promtool_sees_no_false_spike_without_ifhighspeed(case: str, tmp_path: Path) -> None:
    make, metric, _, _, true_rate = CASES[case]
    assert _promtool_max_rate_above(tmp_path, drive(make(), metric, None), true_rate * 1.5) == 0


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


@settings(max_examples=200, deadline=None)
@given(
    speed=st.sampled_from([12.5e6, 125e6, 1.25e9]),
    parts=st.sampled_from([1, 1, 3]),
    start=st.integers(0, WRAP32 - 1),
    life=st.lists(
        st.tuples(st.floats(0, 1), st.sampled_from(["none", "none", "none", "clear", "reboot"])),
        min_size=2,
        max_size=40,
    ),
)
def test_without_ifhighspeed_no_increase_beyond_twice_the_largest_rate_seen(
    speed: float, parts: int, start: int, life: list[tuple[float, str]]
) -> None:
    """Counter32 agents without ifHighSpeed: wraps, clears, reboots and sums of parts. Prometheus never
    counts more in an interval than the traffic of that interval or ``HEADROOM`` times the largest
    interval's traffic so far (what the series has shown it can carry)."""
    raws, epoch = [(start + 7919 * p) % WRAP32 for p in range(parts)], 0
    polls = [combine([counter(PKTS, ET1, r, 32, epoch) for r in raws])]
    largest, allowed = 0, [0]
    for load, event in life:
        increment = int(load * speed / 64 * STEP)  # packets one interval can carry, at most
        if event == "reboot":
            epoch += 1
        if event in ("clear", "reboot"):
            raws = [increment % WRAP32 if p == 0 else 0 for p in range(parts)]
        else:
            raws = [(r + increment) % WRAP32 if p == 0 else r for p, r in enumerate(raws)]
        polls.append(combine([counter(PKTS, ET1, r, 32, epoch) for r in raws]))
        largest = max(largest, increment)
        allowed.append(max(increment, int(HEADROOM * largest * (STEP + 1) / STEP)))
    increases = prometheus_increases(drive(polls, PKTS, None))
    assert all(inc <= limit + 1 for inc, limit in zip(increases, allowed[1:], strict=True)), (
        increases,
        allowed,
    )
