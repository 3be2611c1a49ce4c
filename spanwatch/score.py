"""``spanwatch score``: an analysis against a simulated fabric's truth, figure by figure, with its control.

The contract is ``../shared/spec/scenarios.md`` ("What the scorer reads", "Scoring"). The scorer is
independent of the analyzer on purpose: it imports nothing from ``analyzer`` or ``spanwatch.sim`` and reads
only files: ``truth.json`` and an analysis folder's ``attribution``, ``events``, ``steps`` and ``links``
Parquet tables. A folder's ``control/`` subfolder is the same analysis with the step log shifted by
``CONTROL_SHIFT_FACTOR`` x the longest episode (``spanwatch analyze --truth`` writes both); a score passes
only when the real run meets every goal and the control fails one of the goals the timing link decides.

Every attribution figure is computed per step and per link, never from totals that let errors cancel. Per
(step, link) each side is the mean over its ranks of that step; where both sides have per-rank rows for a
step, only the ranks present on both sides count. A job-wide row (rank null) is already the step's figure:
it is added as it is, never divided among ranks.
A figure that cannot be computed (the analysis has no such output, or it is undefined) is null and fails.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from collector.errors import SpanwatchError

# The goals of the spec's scoring table: figure -> (comparison, level). The one place they live.
GOALS: dict[str, tuple[str, float]] = {
    "step_error": ("<=", 0.15),
    "false_blame": ("<=", 0.02),
    "link_error": ("<=", 0.10),
    "misplaced_blame": ("<=", 0.05),
    "event_recall": (">=", 0.95),
    "event_precision": (">=", 0.90),
    "steady_error": ("<=", 0.10),
}
# The figures the timing link between logs and telemetry decides. Events and steady figures come from the
# telemetry alone, so a shifted log cannot move them: the control must fail one of these.
TIMING_FIGURES: tuple[str, ...] = ("step_error", "false_blame", "link_error", "misplaced_blame")
EVENT_FIGURES: tuple[str, ...] = ("event_recall", "event_precision")

# Kind families: an event matches an episode only within one family. Truth kinds and the analyzer's
# event kinds (analyzer/events.py RULES) side by side; a kind in no family never matches.
FAMILIES: dict[str, frozenset[str]] = {
    "congestion": frozenset(
        {"congestion", "incast", "burst", "queue", "ecn", "pfc", "drops", "drop", "pause", "discards"}
    ),
    "optical": frozenset(
        {"optical_degradation", "osnr", "ber", "rx_power", "fcs", "fec_uncorrectable", "q_factor", "esnr"}
    ),
    "outage": frozenset({"wave_down", "link_down", "oper_down", "down"}),
}

CLEAN_STEP_SECONDS = 1e-3  # false_blame: a step with less true episode cost than this is clean
BLAME_FLOOR_SECONDS = 5e-3  # ... and it is falsely blamed past max(this, BLAME_STEP_SHARE of the step)
BLAME_STEP_SHARE = 0.05
LINK_RUN_SHARE = 0.01  # link_error: only links whose true cost exceeds this share of the run
# The diagnosis: a logged line's true cost this many step-noise deviations above zero is one a step log can
# show; the MAD of a normal distribution times MAD_TO_SIGMA is its standard deviation.
VISIBLE_SIGMAS = 3.0
MAD_TO_SIGMA = 1.4826
ZERO_SECONDS = 1e-9  # truth writes microseconds: anything below this is no cost
CONTROL_SHIFT_FACTOR = 10.0
CONTROL = "control"
# Event time rules beyond "overlapping": an episode's edges are seen up to a poll interval late and bursts
# shorter than a poll show as one poll, so the episode is widened by EVENT_SLACK_SECONDS; an event must lie
# mostly (EVENT_INSIDE_SHARE of its length) inside the episodes it may match (their union: a burst that
# runs into a congestion of the same queue fills one queue, which no reading can tell apart), so a warning
# spanning the whole run matches nothing.
EVENT_SLACK_SECONDS = 2.0
EVENT_INSIDE_SHARE = 0.5
SHIFT_TOLERANCE_SECONDS = 1e-3  # the control's measured shift against the one the truth calls for
JOB_WIDE = -1  # rank key of a job-wide row (rank null), so that it joins like any rank
NO_LINK = "(no link)"  # attribution to no link: never a true cause

TIME = pl.Datetime("us", "UTC")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(us|µs|ms|s|m|h)\s*$")
_UNITS = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_QUEUE = r"(?i)^\s*(?:tc|uc|mc|queue|q|prio|priority|class)?[-_ /]?(\d+)\s*$"
_KIND_FAMILY = {kind: name for name, kinds in FAMILIES.items() for kind in kinds}


class ScoreError(SpanwatchError):
    """An input the scorer cannot use; the message names the file and what is wrong."""

    def __init__(self, where: object, reason: str) -> None:
        super().__init__(f"{where}: {reason}")


@dataclass(frozen=True)
class Truth:
    """What ``truth.json`` says, as frames.

    Attributes:
        episodes: ``kind``, ``family``, ``link``, ``wave``, ``places`` (interfaces and components),
            ``queues``, ``start_time``, ``end_time``, ``affects_job``.
        costs: ``step``, ``rank``, ``link``, ``seconds``: episode cost per (step, rank, link).
        steps: ``step``, ``rank``, ``start_time``, ``end_time``, ``compute_seconds`` (null where not given).
        links: per link name the steady figures (``round_trip_seconds``, ``serialization_seconds``).
        job: the truth's ``job`` object (``log_every``, ``clock_skew_seconds``, ...), for the diagnosis.
    """

    episodes: pl.DataFrame
    costs: pl.DataFrame
    steps: pl.DataFrame
    links: dict[str, dict[str, float]]
    job: dict[str, Any]


@dataclass(frozen=True)
class Analysis:
    """The analysis tables the scorer reads (only the columns it needs).

    Attributes:
        attribution: ``step``, ``rank``, ``link``, ``seconds``.
        events: ``kind``, ``link``, ``device``, ``interface``, ``queue``, ``start_time``, ``end_time``.
        steps: ``step``, ``rank``, ``start_time``, ``duration_seconds``.
        links: the links table as written.
        skew_seconds: the clock skew the analysis used (``summary.json``), None where it does not say.
    """

    attribution: pl.DataFrame
    events: pl.DataFrame
    steps: pl.DataFrame
    links: pl.DataFrame
    skew_seconds: float | None = None


# -- reading truth.json --------------------------------------------------------------------------------


def family(kind: str | None) -> str | None:
    """The family (``congestion``, ``optical``, ``outage``) of a truth or event kind, or None."""
    return _KIND_FAMILY.get((kind or "").strip().lower())


def parse_seconds(value: Any, where: str) -> float:
    """A duration as the scenario writes it (``30s``, ``200ms``, ``1m``) or a number of seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    m = _DURATION.match(str(value))
    if m is None:
        raise ScoreError(where, f"not a duration: {value!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


def parse_time(value: Any, where: str) -> datetime:
    """An RFC 3339 time (``Z`` or an offset) or epoch seconds, as an aware UTC datetime."""
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return datetime.fromtimestamp(float(value), UTC)
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except (ValueError, OverflowError, OSError):
        raise ScoreError(where, f"not a time: {value!r}") from None
    if parsed.tzinfo is None:
        raise ScoreError(where, f"a time needs a zone (Z or an offset): {value!r}")
    return parsed.astimezone(UTC)


def _is_time(value: Any) -> bool:
    return isinstance(value, str) and _DURATION.match(value) is None


def _names(values: Any, keys: tuple[str, ...]) -> list[str]:
    """Names from a list of strings, numbers or objects (the first of ``keys`` an object has)."""
    out = []
    for value in values if isinstance(values, list) else [] if values is None else [values]:
        name = (
            next((value.get(k) for k in keys if value.get(k) is not None), None)
            if isinstance(value, dict)
            else value
        )
        if name is not None:
            out.append(str(name))
    return out


def queue_name(value: str) -> str:
    """One spelling per queue: ``3``, ``tc3``, ``UC3`` and ``queue-3`` are all ``3``; a queue named by its
    place (``device/interface/3``, as the simulator's truth writes them) is its last component."""
    last = value.rsplit("/", 1)[-1]
    m = re.match(_QUEUE, last)
    return m.group(1) if m else value.strip()


def _episode(item: Any, i: int, run_start: datetime | None, path: Path) -> dict[str, Any]:
    where = f"{path}: episodes[{i}]"
    if not isinstance(item, dict) or "kind" not in item:
        raise ScoreError(where, "an episode must be an object with a kind")
    start, end = _episode_times(item, run_start, where)
    places = _names(item.get("interfaces"), ("interface", "name"))
    places += _names(item.get("components"), ("component", "name"))
    places += _names(item.get("interface"), ()) + _names(item.get("component"), ())
    queues = _names(item.get("queues"), ("queue", "traffic_class", "priority", "name"))
    queues += _names(item.get("traffic_class"), ())
    return {
        "kind": str(item["kind"]),
        "family": family(str(item["kind"])),
        "link": None if item.get("link") is None else str(item["link"]),
        "wave": None if item.get("wave") is None else str(item["wave"]),
        "places": sorted(set(places)),
        "queues": sorted({queue_name(q) for q in queues}),
        "start_time": start,
        "end_time": end,
        "affects_job": item.get("affects_job"),
        # Absent (an older truth, a real lab's) is shown: only a simulator that watched says otherwise.
        "shown": item.get("shown") is not False,
    }


def _episode_times(item: dict[str, Any], run_start: datetime | None, where: str) -> tuple[datetime, datetime]:
    """Absolute ``start_time``/``end_time`` (or ``start``/``end``), else ``start`` + ``duration`` from the run."""
    start_value = item.get("start_time", item.get("start"))
    if start_value is None:
        raise ScoreError(where, "an episode needs start (or start_time)")
    if _is_time(start_value) or "start_time" in item:
        start = parse_time(start_value, where)
    elif run_start is None:
        raise ScoreError(where, "start is relative to the run, but truth.json has no run start_time")
    else:
        start = run_start + timedelta(seconds=parse_seconds(start_value, where))
    end_value = item.get("end_time", item.get("end"))
    if end_value is not None:
        return start, parse_time(end_value, where)
    if item.get("duration") is None:
        raise ScoreError(where, "an episode needs duration (or end_time)")
    return start, start + timedelta(seconds=parse_seconds(item["duration"], where))


def _cost_rows(item: dict[str, Any], where: str) -> dict[str, float]:
    """A step row's episode cost per link: ``network_seconds.by_link`` (the simulator's truth, which also
    carries the step's ``total`` and ``by_cause`` there) or ``by_link`` beside it."""
    network = item.get("network_seconds")
    by_link = network.get("by_link") if isinstance(network, dict) else item.get("by_link")
    if not isinstance(by_link, dict):
        raise ScoreError(where, "a step needs by_link {link: seconds}")
    try:
        return {str(link): float(s) for link, s in by_link.items()}
    except (TypeError, ValueError):
        raise ScoreError(where, "by_link must map link names to seconds") from None


def _steps(raw: Any, path: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    if not isinstance(raw, list):
        raise ScoreError(path, "truth needs steps: a list of (step, rank) rows")
    costs, times = [], []
    for i, item in enumerate(raw):
        where = f"{path}: steps[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("step"), int):
            raise ScoreError(where, "a step row needs an integer step")
        rank = item.get("rank")
        if rank is not None and (not isinstance(rank, int) or rank < 0):
            raise ScoreError(where, f"rank must be a non-negative integer or null, not {rank!r}")
        rank = JOB_WIDE if rank is None else rank
        start, end = item.get("start_time", item.get("start")), item.get("end_time", item.get("end"))
        times.append(
            {
                "step": item["step"],
                "rank": rank,
                "start_time": None if start is None else parse_time(start, where),
                "end_time": None if end is None else parse_time(end, where),
                "compute_seconds": _number(item.get("compute_seconds")),
            }
        )
        for link, seconds in _cost_rows(item, where).items():
            costs.append({"step": item["step"], "rank": rank, "link": link, "seconds": seconds})
    cost_schema = {"step": pl.Int64(), "rank": pl.Int64(), "link": pl.String(), "seconds": pl.Float64()}
    time_schema = {
        "step": pl.Int64(),
        "rank": pl.Int64(),
        "start_time": TIME,
        "end_time": TIME,
        "compute_seconds": pl.Float64(),
    }
    return pl.DataFrame(costs, schema=cost_schema), pl.DataFrame(times, schema=time_schema)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _links(raw: dict[str, Any], path: Path) -> dict[str, dict[str, float]]:
    """Steady figures per link, from ``links`` as an object keyed by name or a list with ``name``."""
    links = raw.get("links")
    if isinstance(links, dict):
        links = [{"name": k, **v} if isinstance(v, dict) else v for k, v in links.items()]
    items = links or []
    if not isinstance(items, list):
        raise ScoreError(path, "links must be an object keyed by link name or a list of objects")
    out: dict[str, dict[str, float]] = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict) or item.get("name") is None:
            raise ScoreError(f"{path}: links[{i}]", "a link needs a name")
        figures: dict[str, float] = {}
        if isinstance(item.get("round_trip_seconds"), int | float):
            figures["round_trip_seconds"] = float(item["round_trip_seconds"])
        capacity, per_step = item.get("capacity_bytes_per_second"), item.get("job_bytes_per_step")
        if isinstance(capacity, int | float) and isinstance(per_step, int | float) and capacity > 0:
            figures["serialization_seconds"] = float(per_step) / float(capacity)
        out[str(item["name"])] = figures
    return out


def _run_start(raw: dict[str, Any], path: Path) -> datetime | None:
    """Where relative episode times count from: ``start_time`` (or ``run_start``, ``run.start_time``)."""
    run = raw.get("run")
    nested = run.get("start_time") if isinstance(run, dict) else None
    value = raw.get("start_time", raw.get("run_start", nested))
    return None if value is None else parse_time(value, f"{path}: start_time")


def read_truth(path: Path) -> Truth:
    """Read ``truth.json``.

    Args:
        path: the file.

    Returns:
        The truth as frames.

    Raises:
        ScoreError: the file is missing, not JSON, or lacks what an episode or step needs.
    """
    try:
        raw = json.loads(path.read_text())
    except OSError as exc:
        raise ScoreError(path, f"cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ScoreError(path, f"not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ScoreError(path, "truth must be a JSON object with episodes, steps and links")
    run_start = _run_start(raw, path)
    episodes_raw = raw.get("episodes", [])
    if not isinstance(episodes_raw, list):
        raise ScoreError(path, "episodes must be a list")
    rows = [_episode(item, i, run_start, path) for i, item in enumerate(episodes_raw)]
    schema = {
        "kind": pl.String(),
        "family": pl.String(),
        "link": pl.String(),
        "wave": pl.String(),
        "places": pl.List(pl.String()),
        "queues": pl.List(pl.String()),
        "start_time": TIME,
        "end_time": TIME,
        "affects_job": pl.Boolean(),
        "shown": pl.Boolean(),
    }
    costs, steps = _steps(raw.get("steps"), path)
    job = raw.get("job")
    return Truth(
        pl.DataFrame(rows, schema=schema),
        costs,
        steps,
        _links(raw, path),
        job if isinstance(job, dict) else {},
    )


# -- reading an analysis folder ------------------------------------------------------------------------

NEEDED: dict[str, tuple[str, ...]] = {
    "attribution": ("step", "rank", "link", "attributed_seconds"),
    "events": ("kind", "link", "start_time", "end_time"),
    "steps": ("step", "rank"),
    "links": ("link",),
}


def _table(folder: Path, name: str) -> pl.DataFrame:
    path = folder / f"{name}.parquet"
    if not path.is_file():
        raise ScoreError(path, "not found (is this a `spanwatch analyze` output folder?)")
    try:
        frame = pl.read_parquet(path)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise ScoreError(path, f"not a readable Parquet file: {exc}") from None
    missing = [c for c in NEEDED[name] if c not in frame.columns]
    if missing:
        raise ScoreError(path, f"missing column(s) {', '.join(missing)}")
    return frame


def _optional(frame: pl.DataFrame, name: str, dtype: pl.DataType) -> pl.Expr:
    return (pl.col(name) if name in frame.columns else pl.lit(None)).cast(dtype).alias(name)


def read_analysis(folder: Path) -> Analysis:
    """Read the tables of one analysis folder.

    Args:
        folder: what ``spanwatch analyze --out`` wrote.

    Returns:
        The tables, narrowed to what the scorer reads.

    Raises:
        ScoreError: a table is missing, unreadable or lacks a needed column.
    """
    if not folder.is_dir():
        raise ScoreError(folder, "not a folder")
    attribution = _table(folder, "attribution")
    events = _table(folder, "events")
    steps = _table(folder, "steps")
    try:
        narrow = _narrow(attribution, events, steps, _table(folder, "links"))
    except pl.exceptions.PolarsError as exc:
        raise ScoreError(folder, f"a column does not hold what the scorer reads: {exc}") from None
    return replace(narrow, skew_seconds=_skew(folder))


def _skew(folder: Path) -> float | None:
    """The clock skew in ``summary.json`` (for the diagnosis only: an analysis need not write it)."""
    try:
        skew = json.loads((folder / "summary.json").read_text()).get("skew_seconds")
    except (OSError, ValueError, AttributeError):
        return None
    return float(skew) if isinstance(skew, int | float) and not isinstance(skew, bool) else None


def _narrow(
    attribution: pl.DataFrame, events: pl.DataFrame, steps: pl.DataFrame, links: pl.DataFrame
) -> Analysis:
    """The columns the scorer reads, in its types (job-wide ranks and unlinked rows given their keys)."""
    return Analysis(
        attribution=attribution.select(
            pl.col("step").cast(pl.Int64),
            pl.col("rank").cast(pl.Int64).fill_null(JOB_WIDE),
            pl.col("link").cast(pl.String).fill_null(NO_LINK),
            seconds=pl.col("attributed_seconds").cast(pl.Float64).fill_null(0.0),
        ),
        events=events.select(
            pl.col("kind").cast(pl.String),
            pl.col("link").cast(pl.String),
            _optional(events, "device", pl.String()),
            pl.coalesce(
                _optional(events, "interface", pl.String()), _optional(events, "component", pl.String())
            ).alias("interface"),
            _optional(events, "queue", pl.String()),
            pl.col("start_time").cast(TIME),
            pl.col("end_time").cast(TIME),
        ),
        steps=steps.select(
            pl.col("step").cast(pl.Int64),
            pl.col("rank").cast(pl.Int64).fill_null(JOB_WIDE),
            _optional(steps, "start_time", TIME),
            _optional(steps, "duration_seconds", pl.Float64()),
        ),
        links=links,
    )


# -- per (step, link) figures ----------------------------------------------------------------------------


def _kept_ranks(truth: pl.DataFrame, ours: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The (step, rank) pairs each side is read over: per-rank rows only for the ranks both sides have at
    a step where they share some, else all of the side's; job-wide rows always."""
    wide = pl.col("rank") == JOB_WIDE
    common = truth.filter(~wide).join(ours.filter(~wide), on=["step", "rank"], how="inner")

    def side(ranks: pl.DataFrame) -> pl.DataFrame:
        per_rank = ranks.filter(~wide).join(common, on="step", how="anti")
        return pl.concat([per_rank, common, ranks.filter(wide)])

    return side(truth), side(ours)


def _mean_over_ranks(rows: pl.DataFrame, kept: pl.DataFrame, name: str) -> pl.DataFrame:
    """Per (step, link): the mean of ``seconds`` over the kept ranks, plus any job-wide row's seconds."""
    wide = pl.col("rank") == JOB_WIDE
    counts = kept.filter(~wide).group_by("step").agg(ranks=pl.len())
    rows = rows.join(kept, on=["step", "rank"], how="semi")
    per_rank = (
        rows.filter(~wide)
        .group_by("step", "link")
        .agg(pl.col("seconds").sum())
        .join(counts, on="step")
        .select("step", "link", seconds=pl.col("seconds") / pl.col("ranks"))
    )
    job_wide = rows.filter(wide).group_by("step", "link").agg(pl.col("seconds").sum())
    both = pl.concat([per_rank, job_wide]).group_by("step", "link").agg(pl.col("seconds").sum())
    return both.rename({"seconds": name})


def step_link_table(truth: Truth, analysis: Analysis) -> tuple[pl.DataFrame, pl.DataFrame]:
    """T(s, l) and E(s, l), and per step the totals and the step's length.

    Args:
        truth: from ``read_truth``.
        analysis: from ``read_analysis``.

    Returns:
        ``(cells, steps)``: ``step``, ``link``, ``truth_seconds``, ``estimated_seconds`` (every pair either
        side names, zeros filled); ``step``, ``truth_seconds``, ``estimated_seconds``, ``step_seconds``
        (every step either side has).
    """
    truth_ranks = truth.steps.select("step", "rank").unique()
    our_ranks = pl.concat(
        [analysis.steps.select("step", "rank"), analysis.attribution.select("step", "rank")]
    ).unique()
    kept_truth, kept_ours = _kept_ranks(truth_ranks, our_ranks)
    t = _mean_over_ranks(truth.costs, kept_truth, "truth_seconds")
    e = _mean_over_ranks(analysis.attribution, kept_ours, "estimated_seconds")
    cells = t.join(e, on=["step", "link"], how="full", coalesce=True).with_columns(
        pl.col("truth_seconds", "estimated_seconds").fill_null(0.0)
    )
    lengths = _step_lengths(truth, analysis, kept_truth, kept_ours)
    totals = cells.group_by("step").agg(pl.col("truth_seconds", "estimated_seconds").sum())
    every = pl.concat([kept_truth.select("step"), kept_ours.select("step")]).unique()
    steps = (
        every.join(totals, on="step", how="left")
        .join(lengths, on="step", how="left")
        .with_columns(pl.col("truth_seconds", "estimated_seconds", "step_seconds").fill_null(0.0))
        .sort("step")
    )
    return cells.sort("step", "link"), steps


def _step_lengths(
    truth: Truth, analysis: Analysis, kept_truth: pl.DataFrame, kept_ours: pl.DataFrame
) -> pl.DataFrame:
    """A step's length: the truth's mean (end - start) over its kept ranks, else the analysis's."""
    true_length = (pl.col("end_time") - pl.col("start_time")).dt.total_microseconds() / 1e6
    theirs = (
        truth.steps.join(kept_truth, on=["step", "rank"], how="semi")
        .group_by("step")
        .agg(truth_length=true_length.mean())
    )
    ours = (
        analysis.steps.join(kept_ours, on=["step", "rank"], how="semi")
        .group_by("step")
        .agg(our_length=pl.col("duration_seconds").mean())
    )
    joined = theirs.join(ours, on="step", how="full", coalesce=True)
    return joined.select("step", step_seconds=pl.coalesce("truth_length", "our_length"))


def _ratio(numerator: float, denominator: float) -> float | None:
    """numerator / denominator; 0 / 0 is 0 (nothing to get wrong), x / 0 is undefined (None)."""
    if denominator > 0:
        return numerator / denominator
    return 0.0 if numerator <= ZERO_SECONDS else None


def step_error(steps: pl.DataFrame) -> float | None:
    """sum over s of |sum_l E - sum_l T| over the sum of T."""
    wrong = float(steps.select((pl.col("estimated_seconds") - pl.col("truth_seconds")).abs().sum()).item())
    return _ratio(wrong, float(steps["truth_seconds"].sum()))


def false_blame(steps: pl.DataFrame) -> tuple[float, int, int]:
    """Share of clean steps (sum T < 1 ms) whose sum E exceeds max(5 ms, 5 % of the step).

    Returns:
        The share (0 when there is no clean step), the clean steps and the blamed ones.
    """
    clean = steps.filter(pl.col("truth_seconds") < CLEAN_STEP_SECONDS)
    floor = pl.max_horizontal(pl.lit(BLAME_FLOOR_SECONDS), pl.col("step_seconds") * BLAME_STEP_SHARE)
    blamed = int(clean.select((pl.col("estimated_seconds") > floor).sum()).item())
    return (blamed / clean.height if clean.height else 0.0), clean.height, blamed


def per_link(cells: pl.DataFrame, run_seconds: float) -> pl.DataFrame:
    """Per link: the summed T and E, whether the link is judged (T > 1 % of the run) and its error."""
    sums = cells.group_by("link").agg(pl.col("truth_seconds", "estimated_seconds").sum())
    judged = pl.col("truth_seconds") > LINK_RUN_SHARE * run_seconds
    error = (pl.col("estimated_seconds") - pl.col("truth_seconds")).abs() / pl.col("truth_seconds")
    return sums.with_columns(judged=judged, error=pl.when(judged).then(error)).sort("link")


def link_error(links: pl.DataFrame) -> float:
    """The worst relative error over judged links (0 when no link is judged)."""
    worst = links["error"].max()
    return 0.0 if worst is None else float(worst)  # type: ignore[arg-type]


def misplaced_blame(cells: pl.DataFrame) -> float | None:
    """E on (step, link) pairs whose T is 0, over the sum of T."""
    misplaced = float(cells.filter(pl.col("truth_seconds") <= ZERO_SECONDS)["estimated_seconds"].sum())
    return _ratio(misplaced, float(cells["truth_seconds"].sum()))


def run_seconds(truth: Truth, steps: pl.DataFrame) -> float:
    """The run's length: the truth's steps from first start to last end, else the summed step lengths."""
    span = truth.steps.select(pl.col("end_time").max() - pl.col("start_time").min()).item()
    return span.total_seconds() if span is not None else float(steps["step_seconds"].sum())


# -- events ----------------------------------------------------------------------------------------------


def event_matches(episodes: pl.DataFrame, events: pl.DataFrame) -> pl.DataFrame:
    """The (episode, event) pairs that match: same link, same family, the episode's wave and queue where it
    names them, overlapping time, and the event lying mostly inside the time of the episodes it overlaps
    so (their union, each widened by the slack).

    Args:
        episodes: ``Truth.episodes`` with an ``episode`` index.
        events: ``Analysis.events`` with an ``event`` index.

    Returns:
        Columns ``episode``, ``event``.
    """
    slack = timedelta(seconds=EVENT_SLACK_SECONDS)
    t = episodes.select(
        "episode",
        "link",
        "family",
        "wave",
        "places",
        "queues",
        lo=pl.col("start_time") - slack,
        hi=pl.col("end_time") + slack,
    )
    e = events.select(
        "event",
        "link",
        "interface",
        # The truth may name a place as ``device/interface`` (the simulator does): both spellings match.
        place=pl.concat_str(pl.col("device"), pl.lit("/"), pl.col("interface")),
        family=pl.col("kind").str.strip_chars().str.to_lowercase().replace_strict(_KIND_FAMILY, default=None),
        event_queues=pl.col("queue")
        .str.split(",")
        .list.eval(pl.coalesce(pl.element().str.extract(_QUEUE), pl.element().str.strip_chars()))
        .fill_null([]),
        e_start="start_time",
        e_end="end_time",
    )
    pairs = t.join(e, on=["link", "family"], how="inner")
    overlap = (
        pl.min_horizontal("e_end", "hi") - pl.max_horizontal("e_start", "lo")
    ).dt.total_microseconds() / 1e6
    named = pl.col("places").list.contains(pl.col("interface")) | pl.col("places").list.contains(
        pl.col("place")
    )
    wave = pl.col("wave").is_null() | named.fill_null(False)
    queue = (pl.col("queues").list.len() == 0) | (
        pl.col("event_queues").list.set_intersection("queues").list.len() > 0
    )
    candidates = pairs.filter((overlap >= 0) & wave & queue)
    length = (pl.col("e_end") - pl.col("e_start")).dt.total_microseconds() / 1e6
    inside = _inside_union(candidates).filter(pl.col("inside") >= EVENT_INSIDE_SHARE * length)
    return candidates.join(inside.select("event"), on="event", how="semi").select("episode", "event")


def _inside_union(candidates: pl.DataFrame) -> pl.DataFrame:
    """Per event of the candidate pairs: ``e_start``, ``e_end`` and ``inside``, the seconds of it within
    the union of its candidate episodes' widened windows (``lo``, ``hi``)."""
    reach = pl.col("hi").cum_max().shift(1).over("event")
    blocks = (
        candidates.sort("event", "lo")
        .with_columns(block=(pl.col("lo") > reach).fill_null(True).cast(pl.Int64).cum_sum().over("event"))
        .group_by("event", "block")
        .agg(pl.col("lo").min(), pl.col("hi").max(), pl.col("e_start").first(), pl.col("e_end").first())
    )
    shared = pl.min_horizontal("e_end", "hi") - pl.max_horizontal("e_start", "lo")
    return blocks.group_by("event").agg(
        pl.col("e_start").first(),
        pl.col("e_end").first(),
        inside=(shared.dt.total_microseconds() / 1e6).clip(lower_bound=0.0).sum(),
    )


def event_scores(truth: Truth, events: pl.DataFrame) -> dict[str, Any]:
    """Recall over the network episodes and precision over the events inside the run.

    Recall counts every network episode, as the spec defines it. The simulator's truth also says whether
    the network showed an episode (``shown``, ``spanwatch.sim.witness``: a queue of its class above the
    marking threshold, a drop or a pause on its ports, its wave lit); the misses it did not show are counted
    apart (``missed_unshown``), a diagnosis, never a goal: on 101 random runs 8 of 48 unshown episodes were
    found anyway, so "unshown" is not yet a proof that no instrument could see one.

    Returns:
        ``event_recall`` and ``event_precision`` (None when there is nothing to judge), and counts.
    """
    network = truth.episodes.filter(pl.col("family").is_not_null()).with_row_index("episode")
    window = _run_window(truth)
    judged = events
    if window is not None:  # an archive may hold more than the run the truth describes
        judged = events.filter(pl.col("end_time") >= window[0], pl.col("start_time") <= window[1])
    judged = judged.with_row_index("event")
    pairs = event_matches(network, judged)
    found, right = pairs["episode"].n_unique(), pairs["event"].n_unique()
    missed = network.join(pairs, on="episode", how="anti")
    return {
        "event_recall": found / network.height if network.height else None,
        "event_precision": right / judged.height if judged.height else None,
        "episodes": network.height,
        "episodes_unshown": network.height - network["shown"].sum(),
        "missed_unshown": missed.height - missed["shown"].sum(),
        "episodes_found": found,
        "episodes_missed": [_describe(row) for row in missed.iter_rows(named=True)],
        # Missed episodes that did not slow the job, by kind (a diagnosis: an incast is seen only through
        # the traffic it holds back, so one while the job sent nothing on its link moved no counter).
        "missed_harmless": dict(
            missed.filter(~pl.col("affects_job").fill_null(True))  # unknown is not harmless
            .group_by("kind")
            .len()
            .sort("kind")
            .iter_rows()
        ),
        "events": judged.height,
        "events_matched": right,
        "events_outside_run": events.height - judged.height,
        "unmatched_events_by_kind": dict(
            judged.join(pairs, on="event", how="anti").group_by("kind").len().sort("kind").iter_rows()
        ),
    }


def _describe(episode: dict[str, Any]) -> str:
    wave = f" wave {episode['wave']}" if episode["wave"] is not None else ""
    return f"{episode['kind']} on {episode['link']}{wave} at {episode['start_time'].isoformat()}"


def _run_window(truth: Truth) -> tuple[datetime, datetime] | None:
    """The run the truth describes (its steps and episodes), widened by the event slack."""
    times = pl.concat(
        [
            truth.steps.select(first="start_time", last="end_time"),
            truth.episodes.select(first="start_time", last="end_time"),
        ]
    )
    first, last = times.select(pl.col("first").min(), pl.col("last").max()).row(0)
    if not isinstance(first, datetime) or not isinstance(last, datetime):
        return None
    slack = timedelta(seconds=EVENT_SLACK_SECONDS)
    return first - slack, last + slack


# -- steady figures --------------------------------------------------------------------------------------


def steady_error(truth: Truth, links: pl.DataFrame) -> tuple[float | None, dict[str, Any]]:
    """Per link, the measured round trip and serialization against the truth's steady figures.

    Returns:
        The worst relative error (None when the truth has no steady figure or the analysis lacks one it
        has), and per link the truth, the measure and the error, or why it is missing.
    """
    detail: dict[str, Any] = {}
    worst: float | None = 0.0
    measured = {row["link"]: row for row in links.iter_rows(named=True)}
    for link, figures in sorted(truth.links.items()):
        for figure, true_value in sorted(figures.items()):
            ours = measured.get(link, {}).get(figure)
            key = f"{link}.{figure}"
            if ours is None or not math.isfinite(ours):
                detail[key] = {
                    "truth": true_value,
                    "measured": None,
                    "why": f"links.parquet has no {figure} for {link}",
                }
                worst = None
                continue
            error = _steady_error(float(ours), true_value)
            detail[key] = {"truth": true_value, "measured": float(ours), "error": error}
            worst = None if worst is None or error is None else max(worst, error)
    if not detail:
        return None, {"why": "truth.json has no steady figures per link"}
    return worst, detail


# -- the score -------------------------------------------------------------------------------------------


def _steady_error(measured: float, true_value: float) -> float | None:
    """Relative error; a truth of zero (a link the job does not use carries none of its bytes) is met only
    by a measure of zero (error 0), anything else is wholly wrong (error 1)."""
    if true_value > 0:
        return abs(measured - true_value) / true_value
    if true_value == 0:
        return 0.0 if abs(measured) <= ZERO_SECONDS else 1.0
    return None


def met(figure: str, value: float | None) -> bool:
    """Whether a figure meets its goal (a missing figure never does)."""
    if value is None:
        return False
    op, goal = GOALS[figure]
    return value <= goal if op == "<=" else value >= goal


def figures(truth: Truth, analysis: Analysis) -> dict[str, Any]:
    """Every figure of the scoring table for one analysis, with what failed and why.

    Args:
        truth: from ``read_truth``.
        analysis: from ``read_analysis``.

    Returns:
        The figures (keys as ``GOALS``), ``failed`` (figure -> reason) and ``detail``.
    """
    cells, steps = step_link_table(truth, analysis)
    links = per_link(cells, run_seconds(truth, steps))
    blame, clean, blamed = false_blame(steps)
    events = event_scores(truth, analysis.events)
    steady, steady_detail = steady_error(truth, analysis.links)
    out: dict[str, Any] = {
        "step_error": step_error(steps),
        "false_blame": blame,
        "link_error": link_error(links),
        "misplaced_blame": misplaced_blame(cells),
        "event_recall": events.pop("event_recall"),
        "event_precision": events.pop("event_precision"),
        "steady_error": steady,
    }
    # 0/0 is no verdict: a truth with no network episode leaves nothing to recall, an analysis with no
    # event inside the run nothing to be precise about. The other figure still judges (an event invented
    # on a quiet network fails precision, an episode missed fails recall), so this hides no error.
    unjudged = [name for name in EVENT_FIGURES if out[name] is None]
    out["failed"] = {
        name: _why(name, out[name]) for name in GOALS if name not in unjudged and not met(name, out[name])
    }
    if unjudged:
        out["not_applicable"] = unjudged
    out["detail"] = {
        "steps": steps.height,
        "truth_seconds": float(steps["truth_seconds"].sum()),
        "estimated_seconds": float(steps["estimated_seconds"].sum()),
        "clean_steps": clean,
        "falsely_blamed_steps": blamed,
        "links": links.to_dicts(),
        "events": events,
        "steady": steady_detail,
        "diagnosis": diagnosis(truth, steps, analysis.skew_seconds),
    }
    return out


def diagnosis(truth: Truth, steps: pl.DataFrame, skew_seconds: float | None) -> dict[str, Any]:
    """Why a run fails, read against its truth (diagnostics, never goals):

    - ``line_error``: ``step_error`` over the logged lines (each interval line's steps summed on both
      sides): small beside a large ``step_error``, the cost is right per line and misplaced inside lines;
    - ``skew_error_seconds``: the analysis' clock skew minus the truth's;
    - ``truth_visible``: whether some logged line's true cost stands ``VISIBLE_SIGMAS`` above the step
      timing noise (the robust spread of the truth's compute times, times the root of the line's steps);
      when none does, no step log can show the cost, only the physics can.
    Each is None where the truth or the analysis does not say.

    Args:
        truth: from ``read_truth``.
        steps: ``step_link_table``'s steps.
        skew_seconds: the analysis' clock skew.
    """
    every = truth.job.get("log_every")
    every = every if isinstance(every, int) and every > 0 else 1
    line = (pl.col("step") - 1) // every
    per_line = steps.group_by(line).agg(pl.col("truth_seconds", "estimated_seconds").sum())
    compute = pl.col("compute_seconds")
    per_rank = (
        truth.steps.filter(compute.is_not_null())
        .group_by("rank")
        .agg(spread=(compute - compute.median()).abs().median() * MAD_TO_SIGMA)
    )
    noise = float(per_rank["spread"].median()) if per_rank.height else None  # type: ignore[arg-type]
    costs = truth.costs.group_by("rank", line).agg(pl.col("seconds").sum())["seconds"]
    visible = None if noise is None else bool((costs > VISIBLE_SIGMAS * noise * every**0.5).any())
    theirs = truth.job.get("clock_skew_seconds")
    skew_error = None
    if skew_seconds is not None and isinstance(theirs, int | float):
        skew_error = skew_seconds - theirs
    return {"line_error": step_error(per_line), "skew_error_seconds": skew_error, "truth_visible": visible}


def _why(figure: str, value: float | None) -> str:
    op, goal = GOALS[figure]
    if value is None:
        return "missing or undefined"
    return f"{value:.4g} is not {op} {goal}"


def control_shift_seconds(truth: Truth) -> float:
    """How far the control shifts the step log: 10 x the longest episode (the run's length without one)."""
    lengths = truth.episodes.select((pl.col("end_time") - pl.col("start_time")).dt.total_microseconds() / 1e6)
    longest = lengths.to_series().max() if truth.episodes.height else None
    if longest is None or float(longest) <= 0:  # type: ignore[arg-type]
        span = truth.steps.select(pl.col("end_time").max() - pl.col("start_time").min()).item()
        return span.total_seconds() if span is not None else 0.0
    return CONTROL_SHIFT_FACTOR * float(longest)  # type: ignore[arg-type]


def measured_shift(real: Analysis, control: Analysis) -> float | None:
    """The control's step log shift as its steps show it: the median start difference per (step, rank)."""
    joined = real.steps.join(control.steps, on=["step", "rank"], suffix="_control")
    delta = (pl.col("start_time_control") - pl.col("start_time")).dt.total_microseconds() / 1e6
    value = joined.select(delta.median()).item()
    return None if value is None else float(value)


def _control(truth: Truth, real: Analysis, folder: Path) -> dict[str, Any]:
    """The control's figures, whether its shift is the one called for, and whether it failed a timing goal."""
    if not folder.is_dir():
        return {"missing": f"{folder}: no control analysis (run `spanwatch analyze --truth` to make one)"}
    control = read_analysis(folder)
    out = figures(truth, control)
    expected, shift = control_shift_seconds(truth), measured_shift(real, control)
    out["shift_seconds"] = shift
    out["expected_shift_seconds"] = expected
    out["shift_ok"] = shift is not None and abs(shift - expected) <= SHIFT_TOLERANCE_SECONDS
    out["fails_timing_goal"] = any(name in out["failed"] for name in TIMING_FIGURES)
    return out


# Figures relative to the truth's total episode cost: on a quiet run they divide by (next to) nothing.
RELATIVE_FIGURES: tuple[str, ...] = ("step_error", "misplaced_blame")


def is_quiet(truth: Truth) -> bool:
    """Whether no episode cost the job anything the scoring counts (scenarios.md: a quiet run): no step of
    any rank lost ``CLEAN_STEP_SECONDS`` or more to episodes, so every step is clean by ``false_blame``'s
    own definition. A cost below that is below the scoring's resolution: asking for its size within 15 %
    would fail an analysis that rightly reads nothing there (an episode below the step noise must not be
    invented)."""
    per_step = truth.costs.group_by("step", "rank").agg(pl.col("seconds").sum())
    worst = per_step["seconds"].max()
    return worst is None or float(worst) < CLEAN_STEP_SECONDS  # type: ignore[arg-type]


def _control_problem(control: dict[str, Any]) -> str | None:
    """Why a control does not do its job (missing, shifted wrongly, or still passing), or None."""
    if "missing" in control:
        return str(control["missing"])
    if not control["shift_ok"]:
        return f"its steps are shifted by {control['shift_seconds']} s, not {control['expected_shift_seconds']} s"
    if not control["fails_timing_goal"]:
        return "the shifted run still meets every goal the timing link decides"
    return None


def score(truth: Truth, folder: Path) -> dict[str, Any]:
    """Score an analysis folder and its ``control/`` against the truth.

    Args:
        truth: from ``read_truth``.
        folder: the analysis folder.

    Returns:
        The figures, ``failed``, ``detail``, ``goals``, ``control`` (with ``not_applicable`` on a quiet run),
        ``passed`` and ``why`` (the reasons it did not pass).

    Raises:
        ScoreError: a table of either analysis is unusable.
    """
    real = read_analysis(folder)
    out = figures(truth, real)
    control = _control(truth, real, folder / CONTROL)
    out["goals"] = {name: f"{op} {goal}" for name, (op, goal) in GOALS.items()}
    out["control"] = control
    quiet = is_quiet(truth)
    if quiet:
        # Nothing costs the job, so there is no timing for the shifted log to break: a control that meets
        # every goal says nothing against the analysis, and the real run's figures decide alone; those
        # relative to the truth's total are shown but not judged (false_blame judges every step instead).
        control["not_applicable"] = (
            f"a quiet run: no episode cost any step {CLEAN_STEP_SECONDS * 1e3:g} ms or more in the truth"
        )
        out["not_applicable"] = [*out.get("not_applicable", []), *RELATIVE_FIGURES]
        out["failed"] = {k: v for k, v in out["failed"].items() if k not in RELATIVE_FIGURES}
    why = [f"{name}: {reason}" for name, reason in out["failed"].items()]
    problem = None if quiet else _control_problem(control)
    if problem is not None:
        why.append(f"control: {problem}")
    out["passed"] = not why
    out["why"] = why
    return out


def verdict(result: dict[str, Any]) -> str:
    """A score's outcome in one line: ``passed``, or ``failed: `` and every reason."""
    return "passed" if result["passed"] else "failed: " + "; ".join(result["why"])


def headline(result: dict[str, Any]) -> dict[str, Any]:
    """The figures of a score and of its control, ``passed`` and ``why``, without the detail."""
    control = result["control"]
    return {
        **{name: result[name] for name in GOALS},
        "control": {"missing": control["missing"]}
        if "missing" in control
        else {
            name: control[name]
            for name in (*GOALS, "shift_seconds", "fails_timing_goal", "not_applicable")
            if name in control
        },
        "passed": result["passed"],
        "why": result["why"],
        **({"not_applicable": result["not_applicable"]} if "not_applicable" in result else {}),
    }


def arguments(p: argparse.ArgumentParser) -> None:
    """``spanwatch score`` options."""
    p.add_argument("--truth", type=Path, required=True, help="the simulated fabric's truth.json")
    p.add_argument(
        "--analysis", type=Path, required=True, help="a `spanwatch analyze` output folder (and its control/)"
    )


def run(args: argparse.Namespace) -> int:
    """Print the score as JSON; 0 once it is computed (pass or fail), 1 on unusable input (raised)."""
    print(json.dumps(score(read_truth(args.truth), args.analysis), indent=2, default=str))
    return 0
