"""The catalogue and the shared metric spec (``../shared/spec/metrics.md``) name the same metrics."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from collector.contracts.catalog import (
    CATALOG,
    DEVICE_METRICS,
    HEALTH_METRICS,
    LINK_METRICS,
    PROBE_METRICS,
    TRAINING_METRICS,
)

SPEC = Path(__file__).resolve().parents[2].parent / "shared" / "spec" / "metrics.md"
# Names the collector exports that the spec does not list yet; shared/ is read-only for developers, so
# they are proposed to its owners (each with the issue that added it) instead of silently missing.
PROPOSED_FOR_SPEC = {
    "spanwatch_gnmi_clock_offset_seconds": "gNMI device clock minus collector clock (issue 3)",
    "spanwatch_snmp_dropped_packets_total": "SNMP datagrams dropped by the RFC 3412/3414 receive checks (issue 16)",
    "spanwatch_invalid_values_total": "readings the catalogue cannot hold, dropped (issue 16)",
    "spanwatch_series_dropped_total": "new series beyond a target's cap, dropped (issue 16)",
    "spanwatch_archive_rows_dropped_total": "archive rows dropped: buffer full, unwritable, failed (issue 16)",
    "spanwatch_archive_upload_retries_total": "object-storage archive uploads tried again (issue 31)",
    "spanwatch_http_connections_rejected_total": "connections refused past the connection cap (issue 16)",
    "spanwatch_http_connections_evicted_total": "connections closed for a newcomer: idle, or request incomplete (issue 34)",
    "dci_link_optics_fec_ber_limit": "pre-FEC BER limit of the link's optics profile, for the rules (issue 15)",
    "dci_link_optics_required_osnr_db": "required OSNR of the link's optics profile, for the rules (issue 15)",
    "dci_link_rtt_seconds": "measured round trip along the link, with min/max/avg (issue 15)",
    "dci_link_rtt_jitter_seconds": "round-trip jitter over the probe interval (issue 15)",
    "dci_link_one_way_delay_seconds": "TWAMP one-way delay per direction, with min/max/avg (issue 15)",
    "dci_link_probe_loss_ratio": "probes without an answer over the interval (issue 15)",
    "spanwatch_probes_total": "probes by outcome, per link, method and target (issue 15)",
    "spanwatch_ingest_lag_seconds": "collector time minus notification or poll time, a histogram (issue 18)",
    "spanwatch_ingest_backlog_seconds": "age of the oldest reading waiting to be ingested (issue 18)",
    "spanwatch_coalesced_samples_total": "readings folded into newer ones when a target fell behind (issue 18)",
    "spanwatch_worker_restarts_total": "worker processes restarted after dying (issue 18)",
    "spanwatch_gnmi_sample_interval_seconds": "gNMI sample interval in effect, longer while shed (issue 33)",
    "spanwatch_gnmi_shed_updates_total": "gNMI updates not sent because the target was shed (issue 33)",
    "spanwatch_training_step_seconds": "spanwatch follow: mean seconds per recent step (issue 15)",
    "spanwatch_training_step_baseline_seconds": "spanwatch follow: clean step baseline (issue 15)",
    "spanwatch_training_communication_seconds": "spanwatch follow: network time per step (issue 15)",
    "spanwatch_training_network_seconds": "spanwatch follow: episode cost per step, per link (issue 15)",
    "spanwatch_training_network_peak_seconds": "spanwatch follow: the worst recent step, per link (issue 15)",
    "spanwatch_training_steady_seconds": "spanwatch follow: clean link cost per step (issue 15)",
    "spanwatch_training_unexplained_seconds": "spanwatch follow: excess no physics explains (issue 15)",
    "spanwatch_training_network_events": "spanwatch follow: analyzer events per link and kind (issue 15)",
    "spanwatch_training_window_steps": "spanwatch follow: step rows in the window (issue 15)",
    "spanwatch_training_last_step_timestamp_seconds": "spanwatch follow: newest step end (issue 15)",
    "spanwatch_training_clock_skew_seconds": "spanwatch follow: host-minus-switch skew applied (issue 15)",
    "spanwatch_training_steps_total": "spanwatch follow: step rows read (issue 15)",
    "spanwatch_training_malformed_lines_total": "spanwatch follow: unparsable log lines (issue 15)",
    "spanwatch_training_analysis_seconds": "spanwatch follow: duration of the last window analysis (issue 15)",
}


def _spec_names() -> set[str]:
    if not SPEC.is_file():
        pytest.skip(f"the shared spec is not at {SPEC} (clone ../shared beside the project)")
    return set(re.findall(r"\b((?:dci|spanwatch)_[a-z0-9_]+)", SPEC.read_text()))


def test_every_spec_metric_is_in_the_catalogue() -> None:
    assert _spec_names() - set(CATALOG) == set()  # stat variants (``_min``, ``_max``...) included


def test_every_catalogue_metric_is_in_the_spec() -> None:
    specs = DEVICE_METRICS + LINK_METRICS + PROBE_METRICS + HEALTH_METRICS + TRAINING_METRICS
    catalogue = {spec.name for spec in specs}
    assert catalogue - _spec_names() - set(PROPOSED_FOR_SPEC) == set()
    assert set(PROPOSED_FOR_SPEC) <= catalogue, "a proposed name left the catalogue: drop it here too"
