"""``spanwatch analyze --prometheus``: a real Prometheus serves the readings an archive holds, and the analysis
finds the same events, measures and exposed latency per link as the archive analysis of the same readings.

The synthetic fabric (``tests/analyzer/synthetic_fabric.py``) writes an archive with the collector's own
writer: episodes of most kinds, one device's counters reset mid-run, plus an optical-channel series that
carries a ``component`` instead of an interface. The archive's rows are rendered as OpenMetrics with their
timestamps and the labels a scrape adds, ``promtool tsdb create-blocks-from openmetrics`` backfills them, and
Debian's Prometheus serves that storage with nothing to scrape (an empty head: only the backfilled blocks).
Two reading intervals: 1 s (a gNMI stream) and 10 s (the deploy's scrape interval). The clock-offset metric
exists only on the Prometheus side. Skipped when Prometheus or promtool is not installed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from analyzer import prometheus, schemas, telemetry
from analyzer.errors import InputError
from collector.exporters.archive import Archive
from spanwatch.cli import main
from tests.analyzer.synthetic_fabric import (
    IFACE,
    SPEED,
    T0,
    T0_NS,
    Episode,
    config_yaml,
    step_rows,
    steps_jsonl,
    write_archive,
)
from tests.integration.prometheus_support import PROMETHEUS, SKIP_REASON, free_port, launch

PROMTOOL = shutil.which("promtool")
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(PROMETHEUS is None or PROMTOOL is None, reason=SKIP_REASON),
]

SECONDS = 300
EPISODES = [
    Episode("osnr", "a2", 30, 50),
    Episode("drops", "a1", 40, 70),
    Episode("fcs", "b2", 60, 80),
    Episode("ber", "b1", 90, 110),
    Episode("pfc", "b2", 150, 170),
    Episode("wave_down", "a2", 220, 240),
    Episode("ecn", "b1", 260, 280),
]
RESET = ("b1", 200)  # every counter of b1 restarts from 0 here, away from b1's episodes
COMPONENT = ("a2", "OCH-1/1", 100, 130)  # device, optical channel, BER episode [start, end)
# The device-to-collector clock offset the collector exports (not archived): small, one outlier.
OFFSETS = {"a1": 0.002, "b1": -0.001, "a2": 0.003, "b2": 0.001}
OUTLIER = ("b2", 120, -0.045)
SCRAPE_LABELS = {"job": "spanwatch", "instance": "127.0.0.1:9464"}
# The user's time range: the run with a minute of margin on each side.
START, END = T0 - timedelta(minutes=1), T0 + timedelta(seconds=SECONDS + 60)


@dataclass(frozen=True)
class Fabric:
    """Both analyses' inputs, the Prometheus serving the same readings, and both analyses' output folders."""

    root: Path
    interval: int
    url: str

    @property
    def archive(self) -> Path:
        return self.root / "archive"

    @property
    def served(self) -> Path:
        return self.root / "from-prometheus"

    @property
    def archived(self) -> Path:
        return self.root / "from-archive"


def _stamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _write_component_series(root: Path, interval: int) -> None:
    """An optical-channel pre-FEC BER series (``component`` label, no interface, no link) with an episode."""
    device, component, start, end = COMPONENT
    archive = Archive(root, writer="och")
    for t in range(0, SECONDS + 1, interval):
        ns = T0_NS + t * 10**9
        ber = 5e-3 if start <= t < end else 1e-7
        labels = (("component", component),)
        archive.add((ns, ns, device, "gnmi", "dci_optics_pre_fec_ber", labels, None, ber, None))
    archive.flush()


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _sample(name: str, labels: dict[str, str], value: str, ms: int) -> str:
    text = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
    return f"{name}{{{text}}} {value} {ms // 1000}.{ms % 1000:03d}"


def openmetrics(archive: Path, interval: int) -> str:
    """Every archive row as an OpenMetrics sample with its timestamp, plus the clock-offset gauge.

    Counters carry the exact integer total where the archive has one, as the exporter writes them.
    """
    rows = pl.read_parquet(archive / "**" / "*.parquet").sort("metric", *schemas.SERIES_KEYS, "time")
    keys = [k for k in schemas.SERIES_KEYS if k != "metric"]
    ms = pl.col("time").dt.epoch("ms")
    lines: list[str] = []
    for (name,), part in rows.with_columns(ms=ms).group_by("metric", maintain_order=True):
        kind = "counter" if name in telemetry.COUNTERS else "gauge"
        lines.append(f"# TYPE {str(name).removesuffix('_total')} {kind}")
        for row in part.iter_rows(named=True):
            labels = {k: row[k] for k in keys if row[k] is not None} | SCRAPE_LABELS
            value = repr(row["value"]) if row["counter"] is None else str(row["counter"])
            lines.append(_sample(str(name), labels, value, row["ms"]))
    lines.append(f"# TYPE {prometheus.CLOCK_OFFSET} gauge")
    for device, offset in OFFSETS.items():
        for t in range(0, SECONDS + 1, interval):
            value = OUTLIER[2] if (device, t) == OUTLIER[:2] else offset
            at = (T0_NS // 10**6) + t * 1000 + 400  # the collector's clock: off the devices' second grid
            lines.append(
                _sample(prometheus.CLOCK_OFFSET, {"device": device} | SCRAPE_LABELS, repr(value), at)
            )
    return "\n".join([*lines, "# EOF", ""])


def _analyze(fabric: Fabric, out: Path, *source: str) -> dict[str, Any]:
    argv = ["analyze", *source, "--logs", str(fabric.root / "steps.jsonl")]
    argv += ["--config", str(fabric.root / "config.yml"), "--start", _stamp(START), "--end", _stamp(END)]
    assert main([*argv, "--out", str(out)]) == 0
    return dict(json.loads((out / "summary.json").read_text()))


@pytest.fixture(scope="module", params=[1, 10], ids=["1s", "10s"])
def fabric(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fabric]:
    """The fabric at one reading interval, backfilled into a running Prometheus, analysed both ways."""
    interval = int(request.param)
    root = tmp_path_factory.mktemp(f"fabric-{interval}s")
    write_archive(root / "archive", SECONDS, EPISODES, resets={RESET[0]: RESET[1]}, every=interval)
    _write_component_series(root / "archive", interval)
    steps_jsonl(root / "steps.jsonl", step_rows(SECONDS, EPISODES))
    config_yaml(root / "config.yml")
    server = root / "prometheus"
    server.mkdir()
    (root / "fabric.om").write_text(openmetrics(root / "archive", interval))
    assert PROMTOOL is not None
    subprocess.run(
        [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", "--quiet", str(root / "fabric.om"), str(server / "tsdb")],
        check=True,
        capture_output=True,
    )  # fmt: skip
    with launch(server, {"global": {"scrape_interval": "1h"}}, log=root / "prometheus.log") as url:
        fabric = Fabric(root, interval, url)
        summary = _analyze(fabric, fabric.served, "--prometheus", url)
        # The archive does not carry the clock offset: give its analysis the tolerance Prometheus gave.
        skew = f"{summary['skew_seconds'] * 1000:g}ms"
        _analyze(fabric, fabric.archived, "--archive", str(fabric.archive), "--skew", skew)
        yield fabric


def _table(out: Path, name: str, *keys: str) -> pl.DataFrame:
    return pl.read_parquet(out / f"{name}.parquet").sort(*keys)


def test_skew_comes_from_the_clock_offset_metric(fabric: Fabric) -> None:
    largest = max(abs(OUTLIER[2]), *map(abs, OFFSETS.values()))
    summary = json.loads((fabric.served / "summary.json").read_text())
    assert summary["skew_seconds"] == pytest.approx(largest)
    # Over a long range too: the one outlying sample is seen, whatever the range's length.
    assert prometheus.clock_skew(fabric.url, T0 - timedelta(hours=4), END) == pytest.approx(largest)


def test_same_events_as_the_archive(fabric: Fabric) -> None:
    keys = ["kind", "link", "device", "interface"]
    archived = _table(fabric.archived, "events", *keys, "start_time")
    served = _table(fabric.served, "events", *keys, "start_time")
    assert served.select(keys).to_dicts() == archived.select(keys).to_dicts()
    step = timedelta(seconds=fabric.interval)
    for ours, theirs in zip(archived.iter_rows(named=True), served.iter_rows(named=True), strict=True):
        assert abs(ours["start_time"] - theirs["start_time"]) <= step, (ours, theirs)
        assert abs(ours["end_time"] - theirs["end_time"]) <= step, (ours, theirs)
        assert theirs["worst"] == pytest.approx(ours["worst"]), (ours, theirs)


def test_every_injected_episode_is_found_and_nothing_else(fabric: Fabric) -> None:
    served = _table(fabric.served, "events", "start_time")
    injected = [(e.kind, e.device, IFACE, e.start, e.end) for e in EPISODES] + [("ber", *COMPONENT)]
    # One event per episode (the counter reset raised none), lying over it give or take a reading interval.
    assert served.height == len(injected)
    slack = timedelta(seconds=fabric.interval)
    for kind, device, interface, start, end in injected:
        (event,) = served.filter(kind=kind, device=device, interface=interface).iter_rows(named=True)
        assert abs(event["start_time"] - (T0 + timedelta(seconds=start))) <= slack, event
        assert abs(event["end_time"] - (T0 + timedelta(seconds=end))) <= slack, event


def test_same_exposed_latency_per_link(fabric: Fabric) -> None:
    archived = _table(fabric.archived, "links", "link")
    served = _table(fabric.served, "links", "link")
    assert served["link"].to_list() == archived["link"].to_list() == ["l1", "l2"]
    assert archived["exposed_total_seconds"].max() > 0  # type: ignore[operator]  # not a vacuous comparison
    for column in ("steps_affected", "exposed_total_seconds", "exposed_p50_seconds", "exposed_p99_seconds"):
        assert served[column].to_list() == pytest.approx(archived[column].to_list()), column


def test_same_measures(fabric: Fabric) -> None:
    keys = ("scope", "key", "measure")
    archived = _table(fabric.archived, "measures", *keys)
    served = _table(fabric.served, "measures", *keys)
    assert served.select(keys).to_dicts() == archived.select(keys).to_dicts()
    pairs = zip(archived.iter_rows(named=True), served.iter_rows(named=True), strict=True)
    for ours, theirs in pairs:
        assert theirs["value"] == pytest.approx(ours["value"], rel=1e-9, nan_ok=True), (ours, theirs)


@pytest.mark.parametrize(
    ("start", "end", "window"),
    [
        (START, END, prometheus.WINDOW_SECONDS),
        (T0, T0 + timedelta(seconds=100), 7.0),  # samples on window edges and on both range ends
        (T0 - timedelta(hours=4), END, prometheus.WINDOW_SECONDS),  # past /api/v1/query_range's 11,000 steps
    ],
)
def test_readings_are_the_archive_rows(fabric: Fabric, start: datetime, end: datetime, window: float) -> None:
    keys = ["metric", *schemas.SERIES_KEYS, "time"]
    archived = telemetry.scan_archive(fabric.archive, start, end).collect().sort(keys, nulls_last=True)
    samples = prometheus.read_samples(fabric.url, prometheus.DEVICE_SELECTOR, start, end, window)
    assert sum(len(s["values"]) for s in samples) == archived.height
    served = prometheus.read_prometheus(fabric.url, start, end).collect().sort(keys, nulls_last=True)
    assert served.drop("counter").equals(archived.drop("counter"))
    # Exact totals rebuilt wherever the collector wrote them; a float counter that stays at a whole number
    # (pause seconds never paused) may get one too, to the same effect.
    exact = archived["counter"].is_not_null()
    assert served["counter"].filter(exact).equals(archived["counter"].filter(exact))


def test_a_refused_query_says_why(fabric: Fabric) -> None:
    with pytest.raises(InputError, match=r"Prometheus query failed: .*parse error"):
        prometheus.read_samples(fabric.url, "{", START, END)


def test_counter_reset_gives_the_archive_rates(fabric: Fabric) -> None:
    """Counters rebuilt from Prometheus' floats give the archive's rates, across b1's reset too."""
    device, second = RESET

    def rates(readings: pl.LazyFrame) -> pl.DataFrame:
        counters = readings.filter(
            pl.col("device") == device, pl.col("metric").is_in(sorted(telemetry.COUNTERS))
        )
        names = telemetry.series_labels(counters).select("series", "metric", "interface", "queue", "priority")
        sig = telemetry.signals(counters).drop("metric").join(names, on="series")
        return sig.drop("series").sort("metric", "interface", "queue", "priority", "time").collect()

    served = rates(prometheus.read_prometheus(fabric.url, START, END))
    archived = rates(telemetry.scan_archive(fabric.archive, START, END))
    assert served["value"].drop_nulls().min() >= 0  # type: ignore[operator]
    assert served.select("metric", "time").to_dicts() == archived.select("metric", "time").to_dicts()
    assert served["value"].to_list() == pytest.approx(archived["value"].to_list(), nan_ok=True)
    tx = served.filter(metric="dci_interface_transmit_bytes_total").drop_nulls("value")
    assert tx["value"].max() == pytest.approx(SPEED * 0.5)  # no spike anywhere, the reset included
    after = tx.filter(pl.col("time") == T0 + timedelta(seconds=second))["value"]
    assert after.to_list() == [pytest.approx(SPEED * 0.5 / fabric.interval)]  # what was counted since


def test_unreachable_prometheus_is_one_clear_line(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    argv = ["--log-level", "warning", "analyze", "--prometheus", url, "--start", _stamp(START)]
    argv += ["--end", _stamp(END), "--out", str(tmp_path / "out")]
    done = subprocess.run(
        [sys.executable, "-m", "spanwatch.cli", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"spanwatch: {url}: "), done.stderr
    assert "Connection refused" in done.stderr
    assert not (tmp_path / "out").exists()
