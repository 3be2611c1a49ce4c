"""Every board panel, board variable and rule expression returns data from a real Prometheus.

A store fed with one series of every catalogue metric (a link in trouble: drops, ECN marks, a PFC storm,
a wave down, high BER, low OSNR, a dead target) is served by the real exporter; Debian's Prometheus
scrapes it every second with the rules loaded (evaluated every second), and each expression, with the
boards' variables substituted, must return at least one series. Alert expressions are queried directly
(``for:`` does not apply), so each must fire on this fabric. test_boards_on_sim.py runs the same check
against the simulated fabric (collector/sim/) and the real collector. Skipped when Prometheus is not
installed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from collector.contracts.catalog import DEVICE_METRICS, STAT_SUFFIXES, TRAINING_METRICS
from collector.exporters.http import serve
from collector.links import update as update_links
from collector.model import Sample, counter, gauge, labels
from collector.store import Store, TargetLabels
from tests.deploy.promql import Expression, dashboard_expressions, rule_expressions
from tests.integration.loop_thread import LoopThread
from tests.integration.prometheus_support import PROMETHEUS, SKIP_REASON, free_port, query
from tests.integration.prometheus_support import prometheus as run_prometheus

pytestmark = pytest.mark.integration
LIVE, DEAD = "dci1.site-a", "dci9.site-b"
# Counter rates per second (ECN marks 20% of sent packets, paused half the time) and gauge values.
RATES = {"dci_interface_transmit_packets_total": 1000, "dci_queue_ecn_marked_packets_total": 200,
         "dci_pfc_pause_duration_seconds_total": 0.5}  # fmt: skip
GAUGES = {"dci_optics_pre_fec_ber": 8e-3, "dci_optics_osnr_db": 27.0, "dci_interface_oper_up": 1.0,
          "dci_interface_speed_bytes_per_second": 1e11}  # fmt: skip
TRAINING_LABELS = {"link": "l1", "kind": "queue", "file": "steps.jsonl"}
SERIES = {"interface": "Ethernet1/1", "queue": "3", "priority": "3", "lane": "1", "direction": "rx",
          "pool": "lossless", "component": "optics1"}  # fmt: skip


def _samples(elapsed: float) -> list[Sample]:
    out = []
    for spec in DEVICE_METRICS:
        lbls = labels(**{k: SERIES[k] for k in spec.labels})
        if spec.is_counter:
            out.append(counter(spec.name, lbls, int(RATES.get(spec.name, 100) * elapsed)))
        else:
            for suffix in ("", *(STAT_SUFFIXES if spec.stats else ())):
                out.append(gauge(spec.name + suffix, lbls, GAUGES.get(spec.name, 1.0)))
    out.append(gauge("dci_interface_oper_up", labels(interface="Ethernet1/2"), 0.0))  # a wave down
    return out


def _feed(store: Store, elapsed: float) -> None:
    store.ingest(LIVE, "gnmi", _samples(elapsed), time.time_ns())
    for device, up in ((LIVE, 1.0), (DEAD, 0.0)):
        key = (("device", device), ("source", "snmp"))
        store.set("spanwatch_target_up", key, up)
        store.set("spanwatch_last_success_timestamp_seconds", key, time.time() - (0 if up else 600))
        store.inc("spanwatch_polls_total", (*key, ("status", "success" if up else "timeout")))
        store.observe("spanwatch_poll_duration_seconds", key, 0.05)
        store.inc("spanwatch_gnmi_updates_total", (("device", device),), 10)
        store.inc("spanwatch_gnmi_reconnects_total", (("device", device),))
        # Shedding: the target resubscribed at twice its interval, updates not sent counted.
        store.set("spanwatch_gnmi_sample_interval_seconds", (("device", device),), 2.0)
        store.inc("spanwatch_gnmi_shed_updates_total", (("device", device),), 10)
        # Behind by 3 s (past the lag alert's 2 s), with a backlog folded into newer readings.
        store.observe("spanwatch_ingest_lag_seconds", key, 3.0)
        store.set("spanwatch_ingest_backlog_seconds", key, 1.5)
        store.inc("spanwatch_coalesced_samples_total", key, 10)
        store.inc(
            "dci_counter_discontinuities_total",
            (("device", device), ("metric", "dci_queue_dropped_packets_total")),
        )
    # The link's round-trip probes (a responder at site a), as the prober exports them: 1.2 ms over
    # 100 km of fibre (0.98 ms: a route longer than the fibre, so its alert has data), jitter, no loss.
    probe = (("link", "l1"), ("method", "twamp"), ("target", "site-a"))
    for suffix in ("", *STAT_SUFFIXES):
        store.set("dci_link_rtt_seconds" + suffix, probe, 1.2e-3)
        store.set("dci_link_one_way_delay_seconds" + suffix, (*probe, ("direction", "forward")), 0.52e-3)
    store.set("dci_link_rtt_jitter_seconds", probe, 2e-5)
    store.set("dci_link_probe_loss_ratio", probe, 0.0)
    store.inc("spanwatch_probes_total", (*probe, ("status", "success")))
    store.inc("spanwatch_archive_rows_total", (), 100)
    store.inc("spanwatch_archive_write_errors_total", ())
    # ``spanwatch follow``'s figures (the training board), as its exporter gives them for link l1.
    for spec in TRAINING_METRICS:
        key = tuple((name, TRAINING_LABELS[name]) for name in spec.labels)
        if spec.is_counter:
            store.inc(spec.name, key, 10)
        else:
            store.set(spec.name, key, 0.05)


class Fabric(LoopThread):
    """The exporter and the feeder on their own event loop."""

    def __init__(self) -> None:
        super().__init__()
        self.port = 0

    async def main(self, halt: asyncio.Event) -> None:
        from collector import config as configuration

        cfg = configuration.parse({"targets": [
            {"name": LIVE, "labels": {"site": "a"}, "gnmi": {"address": "127.0.0.1:1", "insecure": True}},
            {"name": DEAD, "labels": {"site": "b"}, "gnmi": {"address": "127.0.0.1:1", "insecure": True}}],
            "links": [{"name": "l1", "site_a": "a", "site_b": "b", "distance_km": 100, "members": [
                {"device": LIVE, "interface": "Ethernet1/1"}, {"device": LIVE, "interface": "Ethernet1/2"}]}]})  # fmt: skip
        store = Store()
        store.set_target(
            LIVE,
            TargetLabels(
                (("site", "a"),),
                links={("interface", "Ethernet1/1"): "l1", ("interface", "Ethernet1/2"): "l1"},
            ),
        )
        server = await serve(store, "127.0.0.1:0", None)
        self.port = server.address[1]
        self.ready.set()
        t0 = time.monotonic()
        while not halt.is_set():
            _feed(store, time.monotonic() - t0)
            update_links(store, cfg)
            await asyncio.sleep(0.2)
        server.close()
        await server.wait_closed()


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if PROMETHEUS is None:
        pytest.skip(SKIP_REASON)
    fabric = Fabric()
    fabric.start()
    fabric.wait_ready()
    targets = [f"127.0.0.1:{fabric.port}", f"127.0.0.1:{free_port()}"]  # the second is down
    try:
        with run_prometheus(tmp_path_factory.mktemp("prometheus"), targets) as url:
            yield url
    finally:
        fabric.stop()


def test_every_expression_returns_data(prometheus: str) -> None:
    expressions: list[Expression] = dashboard_expressions() + rule_expressions()
    deadline = time.monotonic() + 90
    empty = expressions
    while empty and time.monotonic() < deadline:
        time.sleep(2)
        empty = [e for e in empty if not query(prometheus, e.expr)]
    assert not empty, "\n".join(f"{e.where}: {e.expr}" for e in empty)
