"""Build spanwatch's Grafana dashboards from code (grafana-foundation-sdk) into ``dashboards/*.json``.

Run ``python dashboards/build.py`` to rewrite the JSON after changing this file, or ``--check`` to fail when
the committed JSON is stale (tests/deploy/test_dashboards.py does the same). Every metric name goes through
``metric()``, which refuses a name the catalogue (collector.contracts.catalog.CATALOG) does not have; the recorded
rates come from deploy/prometheus/rules/spanwatch.rules.yml, whose names the tests check the same way.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm

from collector.contracts import fibre, optics
from collector.contracts.catalog import CATALOG, Kind

OUT = Path(__file__).resolve().parent

# The optical limits of the default optics profile, as the alert rules use them
# (deploy/prometheus/rules/spanwatch.rules.yml; a test compares them).
PRE_FEC_BER_LIMIT = optics.profile().fec_ber_limit  # past it, post-FEC errors appear
REQUIRED_OSNR_DB = optics.profile().required_osnr_db  # (0.1 nm)
# A measured round trip this much above the fibre's means a longer route (SpanwatchRouteLongerThanFibre).
ROUTE_LONGER_FACTOR = 1.1

DATASOURCE = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")
# Every device panel filters on the board's variables; "All" is ".*", so series without a link label match.
DEVICE = 'site=~"$site", link=~"$link", device=~"$device"'
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
# Optics legends name the wave: coherent channels by component (OpticalChannel1/4), other optics by
# interface; a series carries one of the two.
WAVE = "{{device}} {{interface}}{{component}}"

# What each panel shows and how to read it, shown as the panel's description (the (i) in its header).
# Every panel's title must be here: panel() and single() look it up, so a panel cannot lack one.
DESCRIPTIONS = {
    "Throughput into the link, per site": "Bytes per second each site sends into and receives from the "
    "link: the sum over the link's member interfaces at that site (recording rules, 1-minute rate).",
    "Utilisation of link capacity": "What each site sends into the link over the link's capacity (the "
    "sum of member speeds on the smaller side). Near 100 %, queues build and a step's sync slows.",
    "Capacity": "Sum of the member interface speeds on the link's smaller side.",
    "One-way propagation delay": "Fibre delay one way, from the configured route length x 4.9 us/km.",
    "Fibre length": "The route length the config gives the link.",
    "Bandwidth-delay product": "Capacity x round-trip fibre delay: the bytes in flight that keep the "
    "link busy, and the buffering a lossless link needs per priority.",
    "Member interfaces up": "Operational state of each member interface of the inter-DC links (1 up, "
    "0 down). A wave down at both ends is one SpanwatchWaveDown alert for the link.",
    "Queue drops": "Packets dropped by each egress queue (tail drop and AQM): every one is a "
    "retransmission a training step waits for.",
    "Interface discards and errors": "Packets discarded without error (buffer exhaustion) and received "
    "with errors (corruption: check the optics) per interface.",
    "ECN marks": "Packets ECN-marked by each queue: the queue is building and senders are told to slow "
    "down before it drops.",
    "PFC pause frames": "Priority flow control pause frames per priority and direction: rx is this "
    "switch being paused by its peer, tx is this switch pausing it.",
    "Time paused by PFC": "Fraction of time each priority was paused (1 = always). Over 20 % received "
    "raises SpanwatchPfcStorm.",
    "PFC watchdog storms": "PFC watchdog detections of a queue stuck in pause (a storm or deadlock).",
    "Queue occupancy and watermark against buffer and BDP": "Instant queue length and its peak since "
    "the last sample per queue, the shared pool's peak, and the link's bandwidth-delay product: a "
    "queue holding more than one BDP adds more than a round trip of delay.",
    "Shared buffer pool occupancy": "Occupancy of each shared buffer pool of the switch.",
    "Propagation delay": "One-way fibre delay of each link (configured distance x 4.9 us/km).",
    "Measured round trip against the fibre": "Round trip measured by the collector's probes along each "
    "link (TWAMP-light or ICMP; min and avg over each probe interval) beside what the fibre implies: "
    "2 x configured distance x 4.9 us/km, and 2 x the length the optics' chromatic dispersion gives "
    "(CD / 17 ps/nm/km). A measured minimum well above both means the route is longer than the fibre "
    "(a protection path, a detour, a queue that never drains).",
    "Round trip over the fibre's": "Minimum measured round trip over the configured fibre's round trip. "
    "1.0 is the fibre alone; above 1.1 raises SpanwatchRouteLongerThanFibre.",
    "Fibre length: configured and from dispersion": "The configured route length beside the length the "
    "coherent receivers' chromatic dispersion implies (CD / 17 ps/nm/km, G.652 fibre at 1550 nm), per "
    "link. A large gap means the config's distance is wrong, or the fibre is not G.652.",
    "Round-trip jitter and probe loss": "Mean difference between consecutive round trips over each probe "
    "interval, and the share of probes that got no answer.",
    "Rx power per lane": "Received optical power per lane (no lane: the module's total). A drop with "
    "OSNR is loss on the line.",
    "Tx power per lane": "Transmitted optical power per lane.",
    "Laser bias current": "Laser bias current: a rising bias at constant power is an ageing laser.",
    "Module temperature": "Optics module temperature.",
    "Pre-FEC BER against the FEC limit": "Bit error ratio before FEC per wave, its max over each device "
    "interval, and the FEC limit of each link's optics profile (dashed: the default profile's). Past a "
    "quarter of the limit raises SpanwatchPreFecBerNearLimit; past the limit, errors get through.",
    "Post-FEC BER": "Bit error ratio after FEC: anything above 0 is corrupted frames and drops.",
    "OSNR against the required OSNR": "Optical signal-to-noise ratio (0.1 nm) per wave, and the OSNR "
    "each link's optics profile requires (dashed: the default profile's). Less than 2 dB of margin "
    "raises SpanwatchOsnrMarginLow.",
    "ESNR and Q factor": "Electrical SNR and Q factor the DSP reports per wave; they move with OSNR.",
    "Chromatic dispersion": "Chromatic dispersion the coherent DSP compensates per wave: about "
    "17 ps/nm per km of G.652 fibre, so it measures the route's length.",
    "Polarization mode dispersion (DGD)": "Differential group delay per wave: fast changes come with "
    "fibre handling (or a cable being moved).",
    "Step time": "Mean seconds per training step over the steps that ended in the last few seconds "
    "(spanwatch follow's --recent), beside the clean baseline: the median step no link's physics touched.",
    "Network cost per step, per link": "Seconds per step the network's episodes added on each link: the "
    "analyzer's evidence-based blame (a step's excess over its baseline, shared among the links whose queue, "
    "pauses, losses or waves down explain it) over spanwatch follow's sliding window: the mean over the "
    "recent steps, and the worst recent step (a burst shorter than a step shows there first).",
    "Share of the step the network costs": "What the episodes on all links add to a step, over the step time "
    "(recent steps). 0 is a clean network; the steady round trips and serialization are not counted here.",
    "Communication time per step": "The network's time per step: the clean network's (serialization of the "
    "job's bytes and two round trips of the slowest link) plus what episodes added.",
    "Clean link cost per step": "What each link costs a step when nothing goes wrong: the job's bytes per "
    "step serialized at the link's capacity plus two round trips (probed, else the fibre's).",
    "Unexplained step excess": "Seconds per step above the baseline that no link's physics explains: "
    "compute, stragglers, checkpoints, or a cause the telemetry does not see.",
    "Network events on the links": "Events the analyzer's rules raise on each link (queue, ECN, PFC, drops, "
    "optics, waves down) that overlap the recent steps, by kind.",
    "Steps read and bad log lines": "Step rows read from the training logs per second, and log lines that "
    "could not be parsed (each is logged with its file and line number).",
    "Age of the newest step": "Seconds since the newest step in the logs ended: a job that stopped logging, "
    "or a follow that stopped reading, shows here first.",
    "Window analysis time and clock skew": "How long each analysis of the sliding window takes (it runs "
    "every --interval), and the host-minus-switch clock skew applied to the steps.",
    "Target up (per source)": "1 when the last poll (SNMP) or the stream (gNMI) of the target succeeded.",
    "Time since the last successful poll": "Seconds since the target last answered, per source.",
    "Polls by outcome": "Polls per second by outcome (success, timeout, unreachable, auth error, ...).",
    "Poll duration": "Median and 99th percentile time a poll of the target takes.",
    "gNMI updates and redials": "gNMI updates received and stream redials per second.",
    "Archive rows and write errors": "Rows written to the Parquet archive and failed flushes per second.",
    "Ingest lag (notification or poll to store)": "How far behind the collector is, per source: the "
    "collector's time when a reading reaches the store minus the device's notification time (gNMI) or the "
    "poll's start (SNMP), p50 and p99. Above a sample interval, readings are being folded (next panel).",
    "Backlog and folded readings": "How far behind each target is (gNMI: the oldest reading still waiting, "
    "or one read late after its timestamp, as when it waited in gRPC's buffers), and readings folded into newer ones per second because the target fell a whole interval behind "
    "(counters keep the newest value; gauges their min, max and newest).",
    "Counter discontinuities (resets)": "Counter resets the collector saw (device reboot, cleared "
    "counters): rates across one are corrected, not spikes.",
}


def metric(name: str) -> str:
    """``name``, checked against the catalogue (histograms may take ``_bucket``/``_sum``/``_count``).

    Raises:
        KeyError: the catalogue has no such metric.
    """
    if name in CATALOG:
        return name
    for suffix in HISTOGRAM_SUFFIXES:
        base = CATALOG.get(name.removesuffix(suffix))
        if name.endswith(suffix) and base is not None and base.kind is Kind.HISTOGRAM:
            return name
    raise KeyError(f"{name} is not in collector.contracts.catalog.CATALOG")


def recorded(level: str, name: str, op: str) -> str:
    """A recording rule's name, ``level:metric:op``, whose metric part is a catalogue name."""
    metric(name)
    return f"{level}:{name.removesuffix('_total')}:{op}"


def rate(name: str, by: str, selector: str = DEVICE) -> str:
    """Per-second rate of a catalogue counter over Grafana's ``$__rate_interval``, summed ``by``."""
    return f"sum by ({by}) (rate({metric(name)}{{{selector}}}[$__rate_interval]))"


def query(expr: str, legend: str, ref: str = "A") -> prometheus.Dataquery:
    return prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref).range()


def legend() -> cb.VizLegendOptions:
    return (
        cb.VizLegendOptions()
        .show_legend(True)
        .display_mode(cm.LegendDisplayMode.TABLE)
        .placement(cm.LegendPlacement.BOTTOM)
        .calcs(["lastNotNull", "max"])
    )


def panel(title: str, unit: str, *queries: prometheus.Dataquery, width: int = 12) -> timeseries.Panel:
    """A time series panel with its unit, a table legend and the board's datasource."""
    p = (
        timeseries.Panel()
        .title(title)
        .description(DESCRIPTIONS[title])
        .datasource(DATASOURCE)
        .unit(unit)
        .legend(legend())
        .tooltip(cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI))
        .span(width)
        .height(8)
    )
    for i, q in enumerate(queries):
        p = p.with_target(q.ref_id(chr(ord("A") + i)))
    return p


def limit_line(value: float) -> tuple[db.ThresholdsConfig, cb.GraphThresholdsStyleConfig]:
    steps = [dm.Threshold(value=None, color="green"), dm.Threshold(value=value, color="red")]
    return (
        db.ThresholdsConfig().mode(dm.ThresholdsMode.ABSOLUTE).steps(steps),
        cb.GraphThresholdsStyleConfig().mode(cm.GraphTresholdsStyleMode.DASHED),
    )


def single(title: str, unit: str, expr: str, legend_format: str) -> stat.Panel:
    return (
        stat.Panel()
        .title(title)
        .description(DESCRIPTIONS[title])
        .datasource(DATASOURCE)
        .unit(unit)
        .with_target(query(expr, legend_format))
        .reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]))
        .span(6)
        .height(4)
    )


def variables() -> list[db.QueryVariable | db.DatasourceVariable]:
    """Datasource, site, link and device; each narrows the next."""
    anchor = metric("dci_interface_oper_up")

    def labels(name: str, label: str, selector: str) -> db.QueryVariable:
        return (
            db.QueryVariable(name)
            .label(label)
            .datasource(DATASOURCE)
            .query(
                f"label_values({anchor}{{{selector}}}, {name})"
                if selector
                else f"label_values({anchor}, {name})"
            )
            .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(dm.VariableSort.ALPHABETICAL_ASC)
            .multi(True)
            .include_all(True)
            .all_value(".*")
        )

    return [
        db.DatasourceVariable("datasource").label("Data source").type("prometheus"),
        labels("site", "Site", ""),
        labels("link", "Link", 'site=~"$site"'),
        labels("device", "Device", 'site=~"$site", link=~"$link"'),
    ]


Section = tuple[str, list[timeseries.Panel | stat.Panel]]


def section(heading: str, *panels: timeseries.Panel | stat.Panel) -> Section:
    """A row heading and the panels under it."""
    return heading, list(panels)


def board(uid: str, title: str, sections: list[Section]) -> db.Dashboard:
    """A dashboard of expanded rows, each followed by its panels (Grafana's layout for open rows)."""
    d = (
        db.Dashboard(title)
        .uid(uid)
        .tags(["spanwatch"])
        .editable()
        .refresh("30s")
        .time("now-1h", "now")
        .timezone("utc")
        .tooltip(dm.DashboardCursorSync.CROSSHAIR)
        .variables(list(variables()))
    )
    ident = 0
    for heading, panels in sections:
        ident += 1
        d = d.with_row(db.Row(heading).collapsed(False).id(ident))
        for p in panels:
            ident += 1
            d = d.with_panel(p.id(ident))
    return d


def links_board() -> db.Dashboard:
    lnk = 'link=~"$link"'
    sel = 'link=~"$link", site=~"$site"'
    tx = recorded("link_site", "dci_interface_transmit_bytes_total", "rate1m")
    rx = recorded("link_site", "dci_interface_receive_bytes_total", "rate1m")
    util = recorded("link_site", "dci_interface_transmit_bytes_total", "capacity_ratio1m")
    full, full_style = limit_line(1.0)
    overview = section(
        "Links",
        panel(
            "Throughput into the link, per site",
            "Bps",
            query(f"{tx}{{{sel}}}", "{{link}} sent from {{site}}"),
            query(f"{rx}{{{sel}}}", "{{link}} received at {{site}}"),
        ),
        panel(
            "Utilisation of link capacity",
            "percentunit",
            query(f"{util}{{{sel}}}", "{{link}} from {{site}}"),
        )
        .thresholds(full)
        .thresholds_style(full_style)
        .min(0),
        single(
            "Capacity",
            "Bps",
            f"max by (link) ({metric('dci_link_capacity_bytes_per_second')}{{{lnk}}})",
            "{{link}}",
        ),
        single(
            "One-way propagation delay",
            "s",
            f"max by (link) ({metric('dci_link_propagation_delay_seconds')}{{{lnk}}})",
            "{{link}}",
        ),
        single(
            "Fibre length",
            "lengthm",
            f"max by (link) ({metric('dci_link_distance_meters')}{{{lnk}}})",
            "{{link}}",
        ),
        single(
            "Bandwidth-delay product",
            "bytes",
            f"max by (link) ({metric('dci_link_bandwidth_delay_product_bytes')}{{{lnk}}})",
            "{{link}}",
        ),
        panel(
            "Member interfaces up",
            "bool_on_off",
            query(f'{metric("dci_interface_oper_up")}{{{DEVICE}, link!=""}}', "{{device}} {{interface}}"),
            width=24,
        ),
    )
    q, lbl = "device, interface, queue", "{{device}} {{interface}} q{{queue}}"
    qd, lbld = f"{q}, direction", f"{lbl} {{{{direction}}}}"
    congestion = section(
        "Loss and congestion",
        panel("Queue drops", "pps", query(rate("dci_queue_dropped_packets_total", q), lbl)),
        panel(
            "Interface discards and errors",
            "pps",
            query(
                rate("dci_interface_receive_discards_total", "device, interface"),
                "{{device}} {{interface}} rx discards",
            ),
            query(
                rate("dci_interface_transmit_discards_total", "device, interface"),
                "{{device}} {{interface}} tx discards",
            ),
            query(
                rate("dci_interface_receive_errors_total", "device, interface"),
                "{{device}} {{interface}} rx errors",
            ),
        ),
        panel("ECN marks", "pps", query(rate("dci_queue_ecn_marked_packets_total", q), lbl)),
        panel(
            "PFC pause frames",
            "pps",
            query(
                rate("dci_pfc_pause_frames_total", "device, interface, priority, direction"),
                "{{device}} {{interface}} p{{priority}} {{direction}}",
            ),
        ),
        panel(
            "Time paused by PFC",
            "percentunit",
            query(
                rate("dci_pfc_pause_duration_seconds_total", "device, interface, priority, direction"),
                "{{device}} {{interface}} p{{priority}} {{direction}}",
            ),
        ),
        panel(
            "PFC watchdog storms",
            "short",
            query(
                f"sum by (device, interface, priority) (increase({metric('dci_pfc_watchdog_storms_total')}"
                f"{{{DEVICE}}}[$__rate_interval]))",
                "{{device}} {{interface}} p{{priority}}",
            ),
        ),
    )
    buffers = section(
        "Queues and buffers",
        panel(
            "Queue occupancy and watermark against buffer and BDP",
            "bytes",
            # Ingress queues (direction="rx") are lines of their own; egress lines carry no direction.
            query(f"max by ({qd}) ({metric('dci_queue_occupancy_bytes')}{{{DEVICE}}})", f"{lbld} occupancy"),
            query(f"max by ({qd}) ({metric('dci_queue_watermark_bytes')}{{{DEVICE}}})", f"{lbld} watermark"),
            query(
                f"max by (device, pool) ({metric('dci_buffer_pool_watermark_bytes')}"
                f'{{site=~"$site", device=~"$device"}})',
                "{{device}} pool {{pool}} watermark",
            ),
            query(
                f"max by (link) ({metric('dci_link_bandwidth_delay_product_bytes')}{{{lnk}}})",
                "BDP {{link}}",
            ),
            width=24,
        ),
        panel(
            "Shared buffer pool occupancy",
            "bytes",
            query(
                f"max by (device, pool) ({metric('dci_buffer_pool_occupancy_bytes')}"
                f'{{site=~"$site", device=~"$device"}})',
                "{{device}} {{pool}}",
            ),
        ),
        panel(
            "Propagation delay",
            "s",
            query(
                f"max by (link) ({metric('dci_link_propagation_delay_seconds')}{{{lnk}}})",
                "{{link}} one-way",
            ),
        ),
    )
    return board(
        "spanwatch-links", "spanwatch / inter-DC links", [overview, round_trip(), congestion, buffers]
    )


def round_trip() -> Section:
    """Measured round trips beside fibre physics: distance x 4.9 us/km, and the length the CD gives."""
    lnk = 'link=~"$link"'
    rtt = f"{metric('dci_link_rtt_seconds')}"
    fibre_rtt = f"2 * max by (link) ({metric('dci_link_propagation_delay_seconds')}{{{lnk}}})"
    # CD / 17 ps/nm/km is the fibre's length in km; x 2 x 4.9 us/km its round trip.
    cd_km = (
        f"avg by (link) (abs({metric('dci_optics_chromatic_dispersion_ps_per_nm')}{{{lnk}}}))"
        f" / {fibre.DISPERSION_PS_PER_NM_KM:g}"
    )
    longer, _ = limit_line(ROUTE_LONGER_FACTOR)
    return section(
        "Round trip",
        panel(
            "Measured round trip against the fibre",
            "s",
            query(f"max by (link, target) ({rtt}_avg{{{lnk}}})", "{{link}} to {{target}} avg"),
            query(f"min by (link, target) ({rtt}_min{{{lnk}}})", "{{link}} to {{target}} min"),
            query(fibre_rtt, "{{link}} fibre: configured distance"),
            query(
                f"{cd_km} * {2 * fibre.DELAY_US_PER_KM * 1e-6:g}",
                "{{link}} fibre: length from chromatic dispersion",
            ),
            width=16,
        ),
        single(
            "Round trip over the fibre's",
            "none",
            f"min by (link) ({rtt}_min{{{lnk}}}) / on (link) ({fibre_rtt})",
            "{{link}}",
        )
        .thresholds(longer)
        .span(8),
        panel(
            "Fibre length: configured and from dispersion",
            "lengthkm",
            query(
                f"max by (link) ({metric('dci_link_distance_meters')}{{{lnk}}}) / 1000", "{{link}} configured"
            ),
            query(cd_km, "{{link}} from chromatic dispersion"),
        ),
        panel(
            "Round-trip jitter and probe loss",
            "s",
            query(
                f"max by (link, target) ({metric('dci_link_rtt_jitter_seconds')}{{{lnk}}})",
                "{{link}} to {{target}} jitter",
            ),
            query(
                f"max by (link, target) ({metric('dci_link_probe_loss_ratio')}{{{lnk}}})",
                "{{link}} to {{target}} loss (ratio)",
            ),
        ),
    )


def optics_board() -> db.Dashboard:
    per_lane = f"{WAVE} lane {{{{lane}}}}"
    per_if = WAVE
    lnk = 'link=~"$link"'

    def gauge(name: str) -> str:
        return f"{metric(name)}{{{DEVICE}}}"

    ber_limit, ber_style = limit_line(PRE_FEC_BER_LIMIT)
    osnr_limit, osnr_style = limit_line(REQUIRED_OSNR_DB)
    log10 = cb.ScaleDistributionConfig().type(cm.ScaleDistribution.LOG).log(10)
    power = section(
        "Power",
        panel("Rx power per lane", "dBm", query(gauge("dci_optics_rx_power_dbm"), per_lane)),
        panel("Tx power per lane", "dBm", query(gauge("dci_optics_tx_power_dbm"), per_lane)),
        panel("Laser bias current", "amp", query(gauge("dci_optics_laser_bias_current_amperes"), per_lane)),
        panel("Module temperature", "celsius", query(gauge("dci_optics_temperature_celsius"), per_if)),
    )
    signal = section(
        "Signal quality",
        panel(
            "Pre-FEC BER against the FEC limit",
            "sci",
            query(gauge("dci_optics_pre_fec_ber"), per_if),
            query(gauge("dci_optics_pre_fec_ber_max"), f"{per_if} max"),
            query(
                f"max by (link) ({metric('dci_link_optics_fec_ber_limit')}{{{lnk}}})", "FEC limit {{link}}"
            ),
        )
        .scale_distribution(log10)
        .thresholds(ber_limit)
        .thresholds_style(ber_style),
        panel("Post-FEC BER", "sci", query(gauge("dci_optics_post_fec_ber"), per_if)).scale_distribution(
            cb.ScaleDistributionConfig().type(cm.ScaleDistribution.SYMLOG).log(10).linear_threshold(1e-15)
        ),
        panel(
            "OSNR against the required OSNR",
            "dB",
            query(gauge("dci_optics_osnr_db"), per_if),
            query(
                f"max by (link) ({metric('dci_link_optics_required_osnr_db')}{{{lnk}}})",
                "required {{link}}",
            ),
        )
        .thresholds(osnr_limit)
        .thresholds_style(osnr_style),
        panel(
            "ESNR and Q factor",
            "dB",
            query(gauge("dci_optics_esnr_db"), f"{per_if} ESNR"),
            query(gauge("dci_optics_q_factor_db"), f"{per_if} Q"),
        ),
    )
    dispersion = section(
        "Dispersion",
        panel(
            "Chromatic dispersion",
            "suffix:ps/nm",
            query(gauge("dci_optics_chromatic_dispersion_ps_per_nm"), per_if),
        ),
        panel(
            "Polarization mode dispersion (DGD)",
            "s",
            query(gauge("dci_optics_polarization_mode_dispersion_seconds"), per_if),
        ),
    )
    return board("spanwatch-optics", "spanwatch / optics", [power, signal, dispersion])


def collector_board() -> db.Dashboard:
    dev = 'device=~"$device"'
    health = section(
        "Targets",
        panel(
            "Target up (per source)",
            "bool_on_off",
            query(f"{metric('spanwatch_target_up')}{{{dev}}}", "{{device}} {{source}}"),
        ),
        panel(
            "Time since the last successful poll",
            "s",
            query(
                f"time() - {metric('spanwatch_last_success_timestamp_seconds')}{{{dev}}}",
                "{{device}} {{source}}",
            ),
        ),
        panel(
            "Polls by outcome",
            "reqps",
            query(rate("spanwatch_polls_total", "source, status", dev), "{{source}} {{status}}"),
        ),
        panel(
            "Poll duration",
            "s",
            query(
                f"histogram_quantile(0.5, {rate('spanwatch_poll_duration_seconds_bucket', 'le, source', dev)})",
                "p50 {{source}}",
            ),
            query(
                f"histogram_quantile(0.99, {rate('spanwatch_poll_duration_seconds_bucket', 'le, source', dev)})",
                "p99 {{source}}",
            ),
        ),
    )
    behind = section(
        "Keeping up (lag, backlog, folding)",
        panel(
            "Ingest lag (notification or poll to store)",
            "s",
            query(
                f"histogram_quantile(0.5, {rate('spanwatch_ingest_lag_seconds_bucket', 'le, source', dev)})",
                "p50 {{source}}",
            ),
            query(
                f"histogram_quantile(0.99, {rate('spanwatch_ingest_lag_seconds_bucket', 'le, source', dev)})",
                "p99 {{source}}",
            ),
        ),
        panel(
            "Backlog and folded readings",
            "short",
            query(
                f"max by (device, source) ({metric('spanwatch_ingest_backlog_seconds')}{{{dev}}})",
                "{{device}} {{source}} backlog s",
            ),
            query(
                rate("spanwatch_coalesced_samples_total", "device, source", dev),
                "{{device}} {{source}} folded/s",
            ),
        ),
    )
    streams = section(
        "Streams, archive and counters",
        panel(
            "gNMI updates and redials",
            "short",
            query(rate("spanwatch_gnmi_updates_total", "device", dev), "{{device}} updates/s"),
            query(rate("spanwatch_gnmi_reconnects_total", "device", dev), "{{device}} redials/s"),
        ),
        panel(
            "Archive rows and write errors",
            "short",
            query(f"sum(rate({metric('spanwatch_archive_rows_total')}[$__rate_interval]))", "rows/s"),
            query(
                f"sum(rate({metric('spanwatch_archive_write_errors_total')}[$__rate_interval]))",
                "errors/s",
            ),
        ),
        panel(
            "Counter discontinuities (resets)",
            "short",
            query(
                f"sum by (device, metric) (increase({metric('dci_counter_discontinuities_total')}{{{dev}}}"
                "[$__rate_interval]))",
                "{{device}} {{metric}}",
            ),
        ),
    )
    return board("spanwatch-collector", "spanwatch / collector health", [health, behind, streams])


class PrometheusAnnotation(dm.AnnotationQuery):
    """An annotation query with the Prometheus fields the SDK's model lacks: the title and tags from labels."""

    def __init__(self, name: str, expr: str, color: str, title: str, tags: str) -> None:
        super().__init__(name=name, datasource=DATASOURCE, enable=True, icon_color=color, expr=expr)
        self.title, self.tags = title, tags

    def to_json(self) -> dict[str, object]:
        return {**super().to_json(), "titleFormat": self.title, "tagKeys": self.tags, "step": "5s"}


class Annotation:
    """A builder for ``PrometheusAnnotation`` (``Dashboard.annotation`` takes builders)."""

    def __init__(self, name: str, expr: str, color: str, title: str, tags: str) -> None:
        self.query = PrometheusAnnotation(name, expr, color, title, tags)

    def build(self) -> dm.AnnotationQuery:
        return self.query


# A recent step losing more than the larger of these on a link shows as an event on the training board: the
# level past which the scorer calls a step's blame real (spanwatch.score's false-blame floor and share);
# bench/bench_follow.py measures detection at the same level.
COST_EVENT_SHARE = 0.05
COST_EVENT_SECONDS = 0.005


def training_board() -> db.Dashboard:
    """The run as ``spanwatch follow`` sees it: steps, what the network costs them per link, and events."""
    lnk = 'link=~"$link"'
    step = metric("spanwatch_training_step_seconds")
    network = metric("spanwatch_training_network_seconds")
    steps = section(
        "Training run",
        panel(
            "Step time",
            "s",
            query(step, "step"),
            query(metric("spanwatch_training_step_baseline_seconds"), "clean baseline"),
        ),
        panel(
            "Network cost per step, per link",
            "s",
            query(f"{network}{{{lnk}}}", "{{link}}"),
            query(f"{metric('spanwatch_training_network_peak_seconds')}{{{lnk}}}", "{{link}} worst step"),
        ),
        panel(
            "Share of the step the network costs",
            "percentunit",
            # Per follow instance: a bare sum() drops the instance label the step time keeps, and matches nothing.
            query(f"sum by (instance) ({network}) / sum by (instance) ({step})", "all links"),
        ).min(0),
        panel(
            "Communication time per step",
            "s",
            query(metric("spanwatch_training_communication_seconds"), "clean network + episodes"),
        ),
        panel(
            "Clean link cost per step",
            "s",
            query(f"{metric('spanwatch_training_steady_seconds')}{{{lnk}}}", "{{link}}"),
        ),
        panel(
            "Unexplained step excess",
            "s",
            query(metric("spanwatch_training_unexplained_seconds"), "not the network"),
        ),
        panel(
            "Network events on the links",
            "short",
            query(f"{metric('spanwatch_training_network_events')}{{{lnk}}} > 0", "{{link}} {{kind}}"),
            width=24,
        ),
    )
    health = section(
        "Follow",
        panel(
            "Steps read and bad log lines",
            "cps",
            query(f"rate({metric('spanwatch_training_steps_total')}[$__rate_interval])", "step rows"),
            query(
                f"rate({metric('spanwatch_training_malformed_lines_total')}[$__rate_interval])", "bad lines"
            ),
            width=8,
        ),
        panel(
            "Age of the newest step",
            "s",
            query(f"time() - {metric('spanwatch_training_last_step_timestamp_seconds')}", "age"),
            width=8,
        ),
        panel(
            "Window analysis time and clock skew",
            "s",
            query(metric("spanwatch_training_analysis_seconds"), "analysis"),
            query(metric("spanwatch_training_clock_skew_seconds"), "host - switch skew"),
            width=8,
        ),
    )
    # Faster than the other boards: an episode should show within seconds of follow seeing it.
    d = (
        board("spanwatch-training", "spanwatch: training run", [steps, health])
        .refresh("5s")
        .time("now-15m", "now")
    )
    return (
        d.annotation(
            Annotation(
                "Network cost on a link",
                f"{metric('spanwatch_training_network_peak_seconds')}{{{lnk}}} > ignoring (link) group_left () "
                f"clamp_min({COST_EVENT_SHARE} * {step}, {COST_EVENT_SECONDS})",
                "red",
                "{{link}} costs the step",
                "link",
            )
        )
        .annotation(
            Annotation(
                "Network events",
                f"{metric('spanwatch_training_network_events')}{{{lnk}}} > 0",
                "orange",
                "{{kind}} on {{link}}",
                "link,kind",
            )
        )
        .annotation(
            Annotation(
                "Alerts",
                'ALERTS{alertstate="firing", alertname=~"Spanwatch.*"}',
                "purple",
                "{{alertname}}",
                "alertname,link,device",
            )
        )
    )


BOARDS: dict[str, Callable[[], db.Dashboard]] = {
    "spanwatch-links.json": links_board,
    "spanwatch-optics.json": optics_board,
    "spanwatch-collector.json": collector_board,
    "spanwatch-training.json": training_board,
}
"""Every board: its file name in ``dashboards/`` and the function that builds it."""


def render() -> dict[str, str]:
    """File name -> the dashboard JSON text, as committed."""
    return {
        name: json.dumps(build().build(), cls=JSONEncoder, indent=2, sort_keys=True) + "\n"
        for name, build in BOARDS.items()
    }


def main(argv: list[str] | None = None) -> int:
    """Write the boards, or with ``--check`` report the stale ones and exit 1."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--check", action="store_true", help="exit 1 if a committed board differs")
    p.add_argument("--out", type=Path, default=OUT, help="the folder to write (default: dashboards/)")
    args = p.parse_args(argv)
    stale = []
    for name, text in render().items():
        path = args.out / name
        current = path.read_text() if path.is_file() else None
        if current != text:
            stale.append(name)
            if not args.check:
                path.write_text(text)
    if args.check and stale:
        print(f"stale: {', '.join(stale)} (run python dashboards/build.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
