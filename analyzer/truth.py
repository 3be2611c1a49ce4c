"""Ground truth from the simulated fabric (``truth.json``) and how well the analysis recovers it.

The simulated fabric (``collector/sim/runtime.py``, ``SimulatedFabric.truth``) writes::

    {"link": "site-a-site-b",
     "episodes": [{"kind": "congestion" | "incast" | "optical_degradation" | "wave_down",
                   "start": "...Z", "end": "...Z", "link": ..., "device": ..., "interface": ..., "wave": 1}],
     "steps":    [{"step": 12, "start": ..., "end": ..., "excess_s": 0.0012,
                   "culprits": [{"device": ..., "interface": ..., "wave": 1, "causes": [...]}]}]}

The reader relies on ``episodes[].kind/start/end/link/device/interface`` (and ``peer``, the other end of a wave that goes down) and ``steps[].step/excess_s/
culprits[].device/interface``, and is tolerant of other spellings: ``events``/``injections`` for episodes,
``start_time``/``end_time``, epoch seconds or RFC 3339 times, ``exposed_seconds``/``exposed`` for the
exposed time, ``links``/``link``/``causes``/``waves`` for the causes, a ``rank`` per step, and ``steps`` as an
object keyed by step number. A culprit ``{device, interface}`` is the wave end ``device/interface``, mapped to
its link through the config's link members (or the episodes).

Accuracy:

* ``event_recall``: truth episodes met by a detected event at the same place (link, else device and
  interface) of a compatible kind, within the time tolerance;
* ``event_precision``: detected events that meet some truth episode that way;
* ``exposed_latency_relative_error``: per link |estimated - true| / true of the total exposed seconds
  (the largest over links is the headline);
* ``attribution_accuracy``: share of truly inflated steps whose top attributed link is a true cause's
  link; ``attribution_accuracy_wave`` the same for the top device/interface (the wave end).
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
from analyzer.kinds import KINDS

# Event kinds by family; a truth kind is put in a family by the words in its name.
FAMILIES: dict[str, tuple[str, ...]] = {
    family: tuple(k.name for k in KINDS.values() if k.family == family)
    for family in ("congestion", "optical", "down")
}
_TRUTH_WORDS: dict[str, tuple[str, ...]] = {
    "down": ("down", "cut", "flap", "los", "outage"),
    "optical": ("ber", "osnr", "optic", "fec", "fcs", "degrad", "noise", "snr", "power"),
    "congestion": ("congest", "incast", "drop", "ecn", "pfc", "pause", "queue", "buffer", "burst", "loss"),
}
_EPISODES = ("episodes", "events", "injections", "faults")
_EXPOSED = ("exposed_seconds", "excess_s", "exposed", "exposed_network_seconds", "true_exposed_seconds")
_CAUSES = ("links", "link", "culprits", "causes", "cause", "waves", "wave")

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
                "peer": _text(item.get("peer")),  # the other end, for episodes that hit both (wave_down)
                "interface": _text(item.get("interface")),
                "wave": None if wave is None else str(wave),
            }
        )
    schema = {"kind": pl.String(), "family": pl.String(), "start_time": TIME, "end_time": TIME}
    schema |= {c: pl.String() for c in ("link", "device", "peer", "interface", "wave")}
    return pl.DataFrame(rows, schema=schema)


def _cause(value: Any) -> str | None:
    # A cause may be a name or an object: {"device": ..., "interface": ...} (a wave's end, written
    # "device/interface" to match ``port``), or {"link": ...}.
    if isinstance(value, dict):
        if value.get("device") is not None and value.get("interface") is not None:
            return port(str(value["device"]), str(value["interface"]))
        value = _first(value, ("link", "interface", "wave"))
    return None if value is None else str(value)


def port(device: str, interface: str) -> str:
    """How a wave's end (one device's interface) is named in causes."""
    return f"{device}/{interface}"


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
