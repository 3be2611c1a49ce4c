"""The report's charts, drawn with matplotlib's SVG backend and inlined into the HTML.

Why matplotlib to SVG: the report is mailed to vendors and opened offline, so charts must be inside the one
HTML file, need no JavaScript (nothing to fail in a browser console, nothing to fetch) and stay small;
vector SVG prints cleanly into a PDF. matplotlib gives log axes (BER), step CDFs and shaded spans without
hand-written axis code, and is imported only when a report is rendered. Text stays text
(``svg.fonttype = none``), ids are salted with a constant so output is reproducible, and the XML prologue,
DOCTYPE, metadata and namespace URLs are stripped so the HTML holds no external URL at all.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from analyzer.report.model import Band, LinkExposure, Optics, Timeline, VendorDistributions

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

COLORS = {"congestion": "#f2a541", "optical": "#7b5ea7", "down": "#d1495b"}
PALETTE = ("#00798c", "#d1495b", "#edae49", "#30638e", "#66a182", "#8d96a3")
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


def _svg(figure: Figure) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    for pattern in _STRIP:
        text = pattern.sub("", text)
    return text.strip()


def _shade(ax: Axes, bands: list[Band]) -> None:
    seen: set[str] = set()
    for band in bands:
        label = band.category if band.category not in seen else None
        seen.add(band.category)
        ax.axvspan(
            band.start_s,
            max(band.end_s, band.start_s + 0.05),
            color=COLORS[band.category],
            alpha=0.25,
            lw=0,
            label=label,
        )


def timeline(data: Timeline) -> str:
    """Step time over the run, one panel per link with its events shaded by category.

    Args:
        data: the timeline section.

    Returns:
        The SVG element.
    """
    links = sorted({b.link for b in data.bands}) or ["(no events)"]
    with _figure(9.0, 1.2 + 1.8 * len(links)) as fig:
        axes = fig.subplots(len(links), 1, sharex=True, squeeze=False)[:, 0]
        for ax, link in zip(axes, links, strict=True):
            _shade(ax, [b for b in data.bands if b.link == link])
            ax.plot(data.t, [s * 1e3 for s in data.step_seconds], color="#1d3557", lw=1.2, label="step time")
            ax.plot(
                data.t,
                [s * 1e3 for s in data.baseline_seconds],
                color="#1d3557",
                lw=0.8,
                ls="--",
                label="baseline",
            )
            ax.set_title(f"link {link}", loc="left", fontsize=9)
            ax.set_ylabel("step time (ms)")
            ax.legend(loc="upper right", fontsize=7, ncols=5)
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
        for index, kind in enumerate(kinds):
            widths = [r.by_kind.get(kind, 0.0) for r in rows]
            ax.barh(names, widths, left=left, color=PALETTE[index % len(PALETTE)], label=kind)
            left = [a + b for a, b in zip(left, widths, strict=True)]
        ax.set_xlabel("exposed step time, summed over steps (s)")
        if kinds:
            ax.legend(fontsize=7, ncols=min(len(kinds), 8), loc="lower right")
        return _svg(fig)


def _cdf(ax: Axes, series: list[tuple[str, list[float]]], scale: float, xlabel: str) -> None:
    percent = [i / 100 for i in range(101)]
    for index, (name, values) in enumerate(series):
        if values:
            ax.step(
                [v * scale for v in values],
                percent,
                where="post",
                color=PALETTE[index % len(PALETTE)],
                label=name,
            )
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction at or below")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=7, loc="lower right")


def distributions(rows: list[VendorDistributions]) -> str:
    """CDFs of per-step inflation and of queue watermarks, vendors side by side.

    Args:
        rows: one entry per vendor.

    Returns:
        The SVG element.
    """
    with _figure(9.0, 3.0) as fig:
        left, right = fig.subplots(1, 2)
        _cdf(
            left,
            [(r.vendor, r.step_inflation_seconds.values) for r in rows],
            1e3,
            "network time per step (ms)",
        )
        left.set_title("step inflation", loc="left", fontsize=9)
        _cdf(right, [(r.vendor, r.queue_watermark_bytes.values) for r in rows], 1e-6, "queue watermark (MB)")
        right.set_title("queue watermarks (link interfaces)", loc="left", fontsize=9)
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
        ber.axhline(data.fec_limit_ber, color="#d1495b", lw=1, label=f"FEC limit {data.fec_limit_ber:.1e}")
        ber.axhline(data.ber_event_level, color="#edae49", lw=1, ls="--", label="event level")
        ber.set_ylabel("pre-FEC BER")
        _optics_panel(osnr, data, "dci_optics_osnr_db", lambda y: y < data.osnr_event_level_db)
        osnr.axhline(
            data.osnr_required_db, color="#d1495b", lw=1, label=f"required {data.osnr_required_db:g} dB"
        )
        osnr.axhline(data.osnr_event_level_db, color="#edae49", lw=1, ls="--", label="event level")
        osnr.set_ylabel("OSNR (dB)")
        for ax in (ber, osnr):
            ax.set_xlabel("seconds since start")
            ax.legend(fontsize=6, loc="best")
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
