"""The report as one self-contained HTML file (``report.html``): inline CSS and inline SVG charts, no
JavaScript, no external URL, so it opens offline and can be mailed as is.

The page is ``templates/report.html.j2`` rendered by Jinja2 with autoescaping; the charts come from
``charts`` and the table cells from the same helpers as the Markdown, so both say the same thing.
"""

from __future__ import annotations

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from analyzer.report import charts
from analyzer.report.markdown import (
    OPTICS_STATUS,
    VERDICT,
    bus_rows,
    claim_cells,
    coverage_rows,
    glance_rows,
    methodology_rows,
    summary_lines,
)
from analyzer.report.model import ReportData
from analyzer.report.units import data_bytes, format_value, number, seconds


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("analyzer.report", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(seconds=seconds, data_bytes=data_bytes, number=number, format_value=format_value)
    return env


def chart_svgs(data: ReportData) -> dict[str, Markup]:
    """Every chart of the report as inline SVG, keyed by section (absent when there is nothing to draw).

    Args:
        data: the report's data.

    Returns:
        Section -> SVG markup.
    """
    out: dict[str, Markup] = {}
    if data.timeline.step:
        out["timeline"] = Markup(charts.timeline(data.timeline))
    if data.link_exposure:
        out["link_exposure"] = Markup(charts.link_exposure(data.link_exposure))
    if data.distributions:
        out["distributions"] = Markup(charts.distributions(data.distributions))
    if data.optics.series:
        out["optics"] = Markup(charts.optics(data.optics))
    if data.bus_bandwidth is not None:
        out["bus_bandwidth"] = Markup(charts.bus_bandwidth(data.bus_bandwidth))
    return out


def render(data: ReportData) -> str:
    """The whole report as an HTML document.

    Args:
        data: the report's data.

    Returns:
        The document.
    """
    template = _environment().get_template("report.html.j2")
    return template.render(
        data=data,
        glance=glance_rows(data.glance),
        charts=chart_svgs(data),
        claim_cells=claim_cells,
        summary_lines=summary_lines(data),
        coverage_rows=coverage_rows(data),
        bus_rows=bus_rows(data),
        methodology_rows=methodology_rows(data),
        verdict=VERDICT,
        optics_status=OPTICS_STATUS,
    )
