"""Ground truth from the simulated fabric (``truth.json``) and how well the analysis recovers it.

The reader is tolerant, because the simulator's format is defined in parallel. It expects a JSON object::

    {"episodes": [{"kind": "congestion", "start": "...Z", "end": "...Z", "link": "paris-lyon-1",
                   "device": "dci1.site-a", "interface": "Ethernet1/1", "wave": "..."}, ...],
     "steps":    [{"step": 12, "rank": 0, "exposed_seconds": 0.004, "links": ["paris-lyon-1"],
                   "waves": ["..."]}, ...]}

and accepts aliases: ``events``/``injections`` for episodes; ``start_time``/``end_time``; epoch seconds or
RFC 3339 times; ``exposed``/``exposed_network_seconds``/``true_exposed_seconds``/``network_seconds`` for the
exposed time; ``link``/``links``/``cause``/``causes``/``wave``/``waves`` for the cause (a wave or interface
is mapped to its link through the episodes). ``steps`` may also be an object keyed by step number.

Accuracy:

* ``event_recall``: truth episodes met by a detected event at the same place (link, else device and
  interface) of a compatible kind, within the time tolerance;
* ``event_precision``: detected events that meet some truth episode that way;
* ``exposed_latency_relative_error``: per link |estimated - true| / true of the total exposed seconds
  (the largest over links is the headline);
* ``attribution_accuracy``: share of truly inflated steps whose top attributed link is a true cause.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from analyzer import schemas
from analyzer.errors import InputError
from analyzer.ingest._common import parse_wallclock

# Event kinds by family; a truth kind is put in a family by the words in its name.
FAMILIES: dict[str, tuple[str, ...]] = {
    "congestion": ("drops", "ecn", "pfc", "queue"),
    "optical": ("ber", "osnr", "fcs", "fec_uncorrectable"),
    "down": ("wave_down",),
}
_TRUTH_WORDS: dict[str, tuple[str, ...]] = {
    "down": ("down", "cut", "flap", "los", "outage"),
    "optical": ("ber", "osnr", "optic", "fec", "fcs", "degrad", "noise", "snr", "power"),
    "congestion": ("congest", "incast", "drop", "ecn", "pfc", "pause", "queue", "buffer", "burst", "loss"),
}
_EPISODES = ("episodes", "events", "injections", "faults")
_EXPOSED = (
    "exposed_seconds",
    "exposed",
    "exposed_network_seconds",
    "true_exposed_seconds",
    "network_seconds",
)
_CAUSES = ("links", "link", "causes", "cause", "waves", "wave")

TIME = schemas.TIME


def _first(row: dict[str, Any], keys: tuple[str, ...]) -> Any:
    return next((row[k] for k in keys if row.get(k) is not None), None)


def _time(value: Any, where: str) -> datetime:
    try:
        if isinstance(value, int | float):
            return datetime.fromtimestamp(float(value), UTC)
        return parse_wallclock(str(value))
    except (ValueError, OverflowError, OSError):
        raise InputError(where, f"not a time: {value!r}") from None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def family(kind: str | None) -> str | None:
    """The family of a truth kind (``congestion``, ``optical``, ``down``), or None when unknown."""
    text = (kind or "").lower()
    for name in FAMILIES:
        if text in FAMILIES[name] or any(word in text for word in _TRUTH_WORDS[name]):
            return name
    return None


def _episodes(raw: list[Any], path: Path) -> pl.DataFrame:
    rows = []
    for i, item in enumerate(raw):
        where = f"{path}: episodes[{i}]"
        if not isinstance(item, dict):
            raise InputError(where, "an episode must be an object")
        start, end = _first(item, ("start", "start_time")), _first(item, ("end", "end_time"))
        if start is None or end is None:
            raise InputError(where, "an episode needs start and end")
        wave = _first(item, ("wave", "interface"))
        rows.append(
            {
                "kind": str(item.get("kind", "")),
                "family": family(str(item.get("kind", ""))),
                "start_time": _time(start, where),
                "end_time": _time(end, where),
                "link": _text(item.get("link")),
                "device": _text(item.get("device")),
                "interface": _text(item.get("interface")),
                "wave": None if wave is None else str(wave),
            }
        )
    schema = {"kind": pl.String(), "family": pl.String(), "start_time": TIME, "end_time": TIME}
    schema |= {c: pl.String() for c in ("link", "device", "interface", "wave")}
    return pl.DataFrame(rows, schema=schema)


def _cause(value: Any) -> str | None:
    # A cause may be a name or an object such as {"device": ..., "wave": ..., "link": ...}.
    if isinstance(value, dict):
        value = _first(value, ("link", "interface", "wave"))
    return None if value is None else str(value)


def _causes(item: dict[str, Any]) -> list[str]:
    value = _first(item, _CAUSES)
    values = value if isinstance(value, list) else [] if value is None else [value]
    return [c for c in map(_cause, values) if c is not None]


def _steps(raw: Any, path: Path) -> pl.DataFrame:
    items = [{"step": int(k), **v} for k, v in raw.items()] if isinstance(raw, dict) else list(raw or [])
    rows = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or item.get("step") is None:
            raise InputError(f"{path}: steps[{i}]", "a step needs a step number")
        exposed = _first(item, _EXPOSED)
        rows.append(
            {
                "step": int(item["step"]),
                "rank": item.get("rank"),
                "exposed_seconds": float(exposed or 0.0),
                "causes": _causes(item),
            }
        )
    schema = {
        "step": pl.Int64(),
        "rank": pl.Int64(),
        "exposed_seconds": pl.Float64(),
        "causes": pl.List(pl.String()),
    }
    return pl.DataFrame(rows, schema=schema)


def read_truth(path: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Read a truth file.

    Args:
        path: ``truth.json``.

    Returns:
        ``(episodes, steps)``: episodes with ``kind``, ``family``, ``start_time``, ``end_time``, ``link``,
        ``device``, ``interface``, ``wave``; steps with ``step``, ``rank``, ``exposed_seconds``, ``causes``.

    Raises:
        InputError: the file cannot be read, is not JSON, or lacks what an episode or step needs.
    """
    try:
        raw = json.loads(path.read_text())
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise InputError(path, f"not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise InputError(path, "truth must be a JSON object with episodes and steps")
    episodes = _first(raw, _EPISODES) or []
    return _episodes(list(episodes), path), _steps(raw.get("steps", raw.get("per_step")), path)
