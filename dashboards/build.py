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

from collector.contracts import optics
from collector.contracts.catalog import CATALOG, Kind

OUT = Path(__file__).resolve().parent

# The optical limits of the default optics profile, as the alert rules use them
# (deploy/prometheus/rules/spanwatch.rules.yml; a test compares them).
PRE_FEC_BER_LIMIT = optics.profile().fec_ber_limit  # past it, post-FEC errors appear
REQUIRED_OSNR_DB = optics.profile().required_osnr_db  # (0.1 nm)

DATASOURCE = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")
# Every device panel filters on the board's variables; "All" is ".*", so series without a link label match.
DEVICE = 'site=~"$site", link=~"$link", device=~"$device"'
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


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
            query(f"max by ({q}) ({metric('dci_queue_occupancy_bytes')}{{{DEVICE}}})", f"{lbl} occupancy"),
            query(f"max by ({q}) ({metric('dci_queue_watermark_bytes')}{{{DEVICE}}})", f"{lbl} watermark"),
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
    return board("spanwatch-links", "spanwatch / inter-DC links", [overview, congestion, buffers])


def optics_board() -> db.Dashboard:
    per_lane = "{{device}} {{interface}} lane {{lane}}"
    per_if = "{{device}} {{interface}}"

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
            f"Pre-FEC BER against the FEC limit ({PRE_FEC_BER_LIMIT:g})",
            "sci",
            query(gauge("dci_optics_pre_fec_ber"), per_if),
            query(gauge("dci_optics_pre_fec_ber_max"), f"{per_if} max"),
        )
        .scale_distribution(log10)
        .thresholds(ber_limit)
        .thresholds_style(ber_style),
        panel("Post-FEC BER", "sci", query(gauge("dci_optics_post_fec_ber"), per_if)).scale_distribution(
            cb.ScaleDistributionConfig().type(cm.ScaleDistribution.SYMLOG).log(10).linear_threshold(1e-15)
        ),
        panel(
            f"OSNR against the required {REQUIRED_OSNR_DB:g} dB",
            "dB",
            query(gauge("dci_optics_osnr_db"), per_if),
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


BOARDS: dict[str, Callable[[], db.Dashboard]] = {
    "spanwatch-links.json": links_board,
    "spanwatch-optics.json": optics_board,
    "spanwatch-collector.json": collector_board,
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
