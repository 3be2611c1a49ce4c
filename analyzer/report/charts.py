"""The report's charts, drawn with matplotlib's SVG backend and inlined into the HTML.

Why matplotlib to SVG: the report is mailed to vendors and opened offline, so charts must be inside the one
HTML file, need no JavaScript (nothing to fail in a browser console, nothing to fetch) and stay small;
vector SVG prints cleanly into a PDF. matplotlib gives log axes (BER), step CDFs and shaded spans without
hand-written axis code, and is imported only when a report is rendered. Text stays text
(``svg.fonttype = none``), ids are salted with a constant so output is reproducible, and the XML prologue,
DOCTYPE, metadata and namespace URLs are stripped so the HTML holds no external URL at all.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from analyzer.kinds import KINDS
from analyzer.report.model import Band, BusBandwidth, LinkExposure, Optics, Timeline, VendorDistributions

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# One colour per event kind, from the kind's declaration (analyzer.kinds: Paul Tol's colour-blind-safe
# "muted" palette), so a shaded band is told apart by colour alone, whatever the reader's colour vision.
# The step time a link cost is stacked by the blame's causes (analyzer.blame) as well as by event kind: the
# causes take Tol's "bright" palette, and the time nothing explains a neutral grey.
CAUSE_COLORS = {
    "lost_capacity": "#4477AA",  # blue
    "queueing": "#CCBB44",  # yellow
    "pause": "#AA3377",  # purple
    "loss_recovery": "#EE6677",  # red
    "unexplained": "#BBBBBB",  # grey
}
KIND_COLORS = {**CAUSE_COLORS, **{name: kind.colour for name, kind in KINDS.items()}}
UNKNOWN_KIND = "#DDDDDD"  # pale grey: a kind neither analyzer.kinds nor the blame declares
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9")  # series other than kinds
LIMIT = "#000000"  # threshold lines: black, never a series colour
DASHES = ("-", "--", ":", "-.")  # series over series: equal curves stay visible through the gaps
CDF_MIN_VALUES = 5  # non-zero values a distribution needs to be drawn; fewer are listed as numbers
ROLLING_ABOVE = 2000  # steps beyond which the step-time line becomes rolling percentiles
ROLLING_BINS = 400
_STRIP = (
    re.compile(r"<\?xml[^>]*\?>\s*"),
    re.compile(r"<!DOCTYPE[^>]*>\s*"),
    re.compile(r"<metadata>.*?</metadata>\s*", re.S),
    re.compile(r'\s+xmlns(:xlink)?="[^"]*"'),
)


@contextmanager
def _figure(width: float, height: float) -> Iterator[Figure]:
    import matplotlib as mpl
    from matplotlib.figure import Figure

    style: dict[str, Any] = {
        "svg.fonttype": "none",
        "svg.hashsalt": "spanwatch",
        "font.size": 9,
        "axes.grid": True,
        "grid.alpha": 0.3,
    }
    with mpl.rc_context(style):  # type: ignore[arg-type]
        yield Figure(figsize=(width, height), layout="constrained")


# matplotlib names clip paths (p) and markers (m) by a hash of their geometry at full float precision.
_HASHED_ID = re.compile(r"(?<=[#\"])([mp])([0-9a-f]{10})(?=[\")])")


def _svg(figure: Figure) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    for pattern in _STRIP:
        text = pattern.sub("", text)
    return stable_ids(text.strip())


def stable_ids(svg: str) -> str:
    """The SVG with matplotlib's hashed ids renamed from what it draws: a float that differs below the
    printed precision (one engine summing in another order) moves a clip box's hash, never the picture,
    so the same picture gets the same ids. Each id is the hash of the drawing with its ids blanked and the
    id's place among them: unique in the chart, and across charts unless two draw the same."""
    skeleton = hashlib.sha256(_HASHED_ID.sub(r"\1", svg).encode()).hexdigest()
    order = {name: n for n, name in enumerate(dict.fromkeys(m.group(0) for m in _HASHED_ID.finditer(svg)))}

    def renamed(match: re.Match[str]) -> str:
        digest = hashlib.sha256(f"{skeleton}:{order[match.group(0)]}".encode()).hexdigest()
        return match.group(1) + digest[:10]

    return _HASHED_ID.sub(renamed, svg)


def _shade(ax: Axes, bands: list[Band]) -> None:
    seen: set[str] = set()
    for band in bands:
        label = band.kind if band.kind not in seen else None
        seen.add(band.kind)
        ax.axvspan(
            band.start_s,
            max(band.end_s, band.start_s + 0.05),
            color=KIND_COLORS.get(band.kind, UNKNOWN_KIND),
            alpha=0.3,
            lw=0,
            label=label,
        )


def _legend_right(ax: Axes) -> None:
    """A legend beside the plot, never over the data; nothing when nothing is labelled."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)


def rolling_percentiles(
    t: list[float], y: list[float], bins: int = ROLLING_BINS
) -> tuple[list[float], list[float], list[float]]:
    """Per time bin: its middle, the median and the 99th percentile of ``y`` (empty bins left out).

    Args:
        t: times.
        y: values.
        bins: how many equal time bins.

    Returns:
        ``(times, p50, p99)``.
    """
    import numpy as np

    times, values = np.asarray(t, dtype=float), np.asarray(y, dtype=float)
    edges = np.linspace(times.min(), times.max(), bins + 1)
    index = np.clip(np.searchsorted(edges, times, side="right") - 1, 0, bins - 1)
    middle, p50, p99 = [], [], []
    for b in range(bins):
        chunk = values[index == b]
        if chunk.size:
            middle.append(float((edges[b] + edges[b + 1]) / 2))
            p50.append(float(np.percentile(chunk, 50)))
            p99.append(float(np.percentile(chunk, 99)))
    return middle, p50, p99


def held(values: list[float]) -> list[float]:
    """``values`` with the last repeated: the height a "steps-post" line keeps up to its last step's end."""
    return [*values, values[-1]] if values else []


def timeline(data: Timeline) -> str:
    """Step time over the run, one panel per link with its events shaded by kind.

    Long runs (more than ``ROLLING_ABOVE`` steps) are drawn as rolling p50 and p99 over time bins, not one
    point per step; the y axis stops at 1.5 x the 99.5th percentile so one slow step does not flatten the
    rest (the clipped steps are counted in the panel title).

    Args:
        data: the timeline section.

    Returns:
        The SVG element.
    """
    import numpy as np

    links = sorted({b.link for b in data.bands}) or ["(no events)"]
    millis = [s * 1e3 for s in data.step_seconds]
    top = float(np.percentile(millis, 99.5)) * 1.5 if millis else 1.0
    clipped = sum(v > top for v in millis)
    # Each step's start, then the last step's end: a "steps-post" line ends where its last step does.
    ends = [*data.t, data.t[-1] + data.step_seconds[-1]] if data.t else []
    with _figure(10.0, 1.2 + 1.9 * len(links)) as fig:
        axes = fig.subplots(len(links), 1, sharex=True, squeeze=False)[:, 0]
        for ax, link in zip(axes, links, strict=True):
            _shade(ax, [b for b in data.bands if b.link == link])
            if len(data.t) > ROLLING_ABOVE:
                middle, p50, p99 = rolling_percentiles(data.t, millis)
                ax.fill_between(
                    middle, p50, p99, color="#0072B2", alpha=0.25, lw=0, label="step time p50-p99"
                )
                ax.plot(middle, p50, color="#0072B2", lw=1.0, label="step time p50")
            else:
                # Each step's time held over its own length from its start (a slow step is a plateau, not
                # a ramp drawn from the step before), the last one's included.
                ax.plot(
                    ends, held(millis), color="#0072B2", lw=1.0, label="step time", drawstyle="steps-post"
                )
            ax.plot(
                ends,
                held([s * 1e3 for s in data.baseline_seconds]),
                color=LIMIT,
                lw=0.8,
                ls="--",
                label="baseline",
                drawstyle="steps-post",
            )
            ax.set_ylim(0, top)
            more = f" ({clipped} slower step{'s' if clipped > 1 else ''} above the axis)" if clipped else ""
            ax.set_title(f"link {link}{more}", loc="left", fontsize=9)
            ax.set_ylabel("step time (ms)")
            _legend_right(ax)
        axes[-1].set_xlabel(f"seconds since {data.start or 'start'}")
        return _svg(fig)


def link_exposure(rows: list[LinkExposure]) -> str:
    """Exposed network time per link, split by the kind of event it is attributed to.

    Args:
        rows: the per-link section.

    Returns:
        The SVG element.
    """
    kinds = sorted({k for r in rows for k in r.by_kind})
    with _figure(9.0, 0.9 + 0.45 * max(len(rows), 1)) as fig:
        ax = fig.subplots()
        names = [r.link for r in rows]
        left = [0.0] * len(rows)
        for kind in kinds:
            widths = [r.by_kind.get(kind, 0.0) for r in rows]
            color = KIND_COLORS.get(kind, UNKNOWN_KIND)
            ax.barh(names, widths, left=left, color=color, label=kind, edgecolor="white", lw=0.5)
            left = [a + b for a, b in zip(left, widths, strict=True)]
        ax.set_xlabel("exposed step time, summed over steps (s)")
        _legend_right(ax)
        return _svg(fig)


def _cdf(ax: Axes, series: list[tuple[str, list[float]]], scale: float, xlabel: str) -> None:
    """One CDF per series, each in its own colour and dash so that equal curves stay visible one over the
    other; a series with fewer than ``CDF_MIN_VALUES`` non-zero values is listed as numbers instead."""
    percent = [i / 100 for i in range(101)]
    listed = []
    for index, (name, values) in enumerate(series):
        if not values:
            continue
        if sum(v > 0 for v in values) < CDF_MIN_VALUES:
            nonzero = sorted({round(v * scale, 3) for v in values if v > 0}, reverse=True)
            listed.append(f"{name}: {', '.join(f'{v:g}' for v in nonzero) or 'all 0'}")
            continue
        ax.step(
            [v * scale for v in values],
            percent,
            where="post",
            color=PALETTE[index % len(PALETTE)],
            ls=DASHES[index % len(DASHES)],
            lw=1.6 - 0.3 * (index % len(DASHES)),
            label=name,
        )
    if listed:
        ax.text(
            0.02,
            0.5,
            "too few non-zero values for a distribution:\n" + "\n".join(listed),
            transform=ax.transAxes,
            fontsize=7,
            va="center",
        )
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction at or below")
    ax.set_ylim(0, 1.02)


def distributions(rows: list[VendorDistributions]) -> str:
    """CDFs of per-step inflation and of queue watermarks, vendors side by side.

    Args:
        rows: one entry per vendor.

    Returns:
        The SVG element.
    """
    with _figure(9.0, 3.4) as fig:
        left, right = fig.subplots(1, 2)
        _cdf(
            left,
            [(r.vendor, r.step_inflation_seconds.values) for r in rows],
            1e3,
            "network time attributed per step (ms)",
        )
        left.set_title("network time per step, attributed to the vendor", loc="left", fontsize=9)
        _cdf(right, [(r.vendor, r.queue_watermark_bytes.values) for r in rows], 1e-6, "queue watermark (MB)")
        right.set_title("queue watermarks (link interfaces)", loc="left", fontsize=9)
        found = dict(zip(*reversed((*left.get_legend_handles_labels(),)), strict=True))
        for handle, label in zip(*right.get_legend_handles_labels(), strict=True):
            found.setdefault(label, handle)
        labels, handles = list(found), list(found.values())
        if handles:
            fig.legend(
                handles, labels, loc="outside lower center", ncols=len(handles), fontsize=7, frameon=False
            )
        return _svg(fig)


def optics(data: Optics) -> str:
    """Pre-FEC BER (log scale) against the FEC limit, and OSNR against the required OSNR, over time.

    Interfaces that crossed an event level are drawn in colour and named; the rest in grey.

    Args:
        data: the optics section.

    Returns:
        The SVG element.
    """
    with _figure(9.0, 3.2) as fig:
        ber, osnr = fig.subplots(1, 2)
        _optics_panel(ber, data, "dci_optics_pre_fec_ber", lambda y: y >= data.ber_event_level)
        ber.set_yscale("log")
        ber.axhline(data.fec_limit_ber, color=LIMIT, lw=1, label=f"FEC limit {data.fec_limit_ber:.1e}")
        ber.axhline(data.ber_event_level, color=LIMIT, lw=0.8, ls=":", label="event level")
        ber.set_ylabel("pre-FEC BER")
        _optics_panel(osnr, data, "dci_optics_osnr_db", lambda y: y < data.osnr_event_level_db)
        osnr.axhline(data.osnr_required_db, color=LIMIT, lw=1, label=f"required {data.osnr_required_db:g} dB")
        osnr.axhline(data.osnr_event_level_db, color=LIMIT, lw=0.8, ls=":", label="event level")
        osnr.set_ylabel("OSNR (dB)")
        for ax in (ber, osnr):
            ax.set_xlabel("seconds since start")
            ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncols=2, frameon=False)
        return _svg(fig)


def bus_bandwidth(data: BusBandwidth) -> str:
    """nccl-tests bus bandwidth against message size (log), with the link capacity and planned goodput.

    Args:
        data: the section.

    Returns:
        The SVG element.
    """
    with _figure(9.0, 3.0) as fig:
        ax = fig.subplots()
        series: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for r in data.rows:
            if r.busbw_gbps is not None and r.size_bytes > 0:
                series.setdefault((r.source, r.collective), []).append((r.size_bytes, r.busbw_gbps))
        for index, ((source, collective), points) in enumerate(series.items()):
            x, y = zip(*sorted(points), strict=True)
            ax.plot(
                x,
                y,
                marker=".",
                lw=1.2,
                color=PALETTE[index % len(PALETTE)],
                label=f"{collective} ({source})",
            )
        if data.link_capacity_gbps:
            ax.axhline(data.link_capacity_gbps, color=LIMIT, lw=1, label="link capacity")
        if data.planned_goodput_gbps:
            ax.axhline(data.planned_goodput_gbps, color=LIMIT, lw=0.8, ls=":", label="planned goodput")
        ax.set_xscale("log")
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("bus bandwidth (GB/s)")
        _legend_right(ax)
        return _svg(fig)


def _optics_panel(ax: Axes, data: Optics, metric: str, bad: object) -> None:
    colour = 0
    for series in (s for s in data.series if s.metric == metric):
        positive = [
            (t, y)
            for t, y in zip(series.t, series.y, strict=True)
            if y > 0 or metric != "dci_optics_pre_fec_ber"
        ]
        if not positive:
            continue
        t, y = zip(*positive, strict=True)
        if any(bad(v) for v in y):  # type: ignore[operator]
            ax.plot(
                t,
                y,
                lw=1.2,
                color=PALETTE[colour % len(PALETTE)],
                label=f"{series.device} {series.interface}",
            )
            colour += 1
        else:
            ax.plot(t, y, lw=0.6, color="#b0b0b0")
