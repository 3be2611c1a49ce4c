"""Scenario files (spec: scenarios.md): the fabric, the job and what goes wrong, validated strictly.

Pass one is pydantic with unknown keys rejected; pass two cross-checks what one field cannot see alone (a
link naming no site, an episode outside the run or on an unknown link, a wave index out of range). Every
problem is one line with its location, and ``load`` raises ``ConfigError`` with all of them, which the
command line prints before exiting 1. ``builtin()`` is the two-site demo as a scenario; ``shipped()``
lists the files under ``examples/scenarios/`` (a file's first comment line is its description), or, in an
installed wheel, the same files under ``<prefix>/share/spanwatch/scenarios``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from collector.contracts.optics import PROFILES
from collector.durations import parse_duration
from collector.errors import ConfigError
from collector.yaml_input import read_yaml

# The checkout's folder first (an editable install), then where the wheel's data files land (pyproject.toml).
SHIPPED_FOLDERS = (
    Path(__file__).resolve().parents[2] / "examples" / "scenarios",
    Path(sys.prefix) / "share" / "spanwatch" / "scenarios",
)
NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$")
BUFFERS = {"deep": 2.0e9, "shallow": 32.0e6}  # bytes one egress queue may hold (params.PROFILES)
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB)\s*$", re.IGNORECASE)
_SIZE_UNITS = {"b": 1.0, "kb": 1e3, "mb": 1e6, "gb": 1e9}


def _seconds(value: Any) -> float:
    """A duration (``"500ms"``, ``"2s"``, ``"-1s"`` for a skew); a bare 0 is allowed (nothing to scale)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value == 0:
        return 0.0
    if isinstance(value, str) and value.strip().startswith("-"):
        return -parse_duration(value.strip()[1:])
    return parse_duration(value)


def _number(value: Any) -> Any:
    """YAML 1.1 reads ``7e9`` as a string: accept it as a number."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"not a number: {value!r}") from None
    return value


def _percent(value: Any) -> Any:
    if isinstance(value, str) and value.strip().endswith("%"):
        return _number(value.strip()[:-1]) / 100.0
    return value


def _buffer(value: Any) -> Any:
    if isinstance(value, str) and value not in BUFFERS:
        m = _SIZE.match(value)
        if not m:
            raise ValueError(f"not deep, shallow or a size like 8GB: {value!r}")
        return float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]
    return value


Seconds = Annotated[float, BeforeValidator(_seconds), Field(ge=0)]
Positive = Annotated[float, BeforeValidator(_seconds), Field(gt=0)]
Signed = Annotated[float, BeforeValidator(_seconds)]
Number = Annotated[float, BeforeValidator(_number)]
Name = Annotated[str, Field(pattern=NAME.pattern)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Vendor(Strict):
    switch: str = "spanwatch-sim"
    optics: str = "spanwatch-sim"


class Link(Strict):
    """Parallel coherent waves between two sites, one DCI switch per end."""

    name: Name
    between: tuple[str, str]
    distance_km: float = Field(gt=0, le=1000)
    waves: int = Field(ge=1, le=32)
    wave_gbps: float = Field(default=800.0, gt=0, le=1600)
    buffer: Annotated[
        Literal["deep", "shallow"] | Annotated[float, Field(gt=0)], BeforeValidator(_buffer)
    ] = "deep"
    lossless: bool = True
    vendor: Vendor = Vendor()
    optics: str = "800ZR"  # a profile of collector/contracts/optics.py

    @property
    def buffer_bytes(self) -> float:
        return BUFFERS[self.buffer] if isinstance(self.buffer, str) else float(self.buffer)

    @property
    def buffer_name(self) -> str:
        return self.buffer if isinstance(self.buffer, str) else f"{self.buffer / 1e6:g}MB"


class Log(Strict):
    format: Literal["jsonl", "megatron", "torchtitan"] = "jsonl"
    every: int = Field(default=1, ge=1)


class Checkpoint(Strict):
    every: int = Field(default=0, ge=0)
    seconds: Annotated[float, BeforeValidator(lambda v: v if isinstance(v, int | float) else _seconds(v))] = (
        Field(default=0.0, ge=0)
    )


class Job(Strict):
    ranks_per_site: int = Field(default=4, ge=1, le=64)
    params: Annotated[float, BeforeValidator(_number), Field(gt=0)] = 7e9
    bytes_per_param: Annotated[float, BeforeValidator(_number), Field(gt=0)] = 2.0
    parallelism: Literal["data", "pipeline", "diloco"] = "data"
    sync_every: int = Field(default=1, ge=1)
    compute: Positive = 0.25
    compute_jitter: Annotated[float, BeforeValidator(_percent), Field(ge=0, le=0.5)] = 0.02
    traffic_class: int = Field(default=3, ge=0, le=7)
    links: tuple[str, ...] | None = None  # None: every link
    log: Log = Log()
    clock_skew: Signed = 0.0
    checkpoint: Checkpoint = Checkpoint()


class Telemetry(Strict):
    interval: Positive = 1.0
    gnmi: bool = True
    snmp: bool = True


class _Episode(Strict):
    start: Seconds
    duration: Positive

    @property
    def end(self) -> float:
        return self.start + self.duration


class _OnLink(_Episode):
    link: str


class Congestion(_OnLink):
    kind: Literal["congestion"]
    load: float = Field(gt=0, le=10)
    traffic_class: int | None = Field(default=None, ge=0, le=7)


class Incast(_OnLink):
    kind: Literal["incast"]
    fan_in: int = Field(ge=2, le=1024)
    traffic_class: int | None = Field(default=None, ge=0, le=7)


class Burst(_OnLink):
    kind: Literal["burst"]
    load: float = Field(gt=0, le=10)
    traffic_class: int | None = Field(default=None, ge=0, le=7)


class OpticalDegradation(_OnLink):
    kind: Literal["optical_degradation"]
    wave: int = Field(ge=1)
    osnr_drop_db: float = Field(gt=0, le=40)


class WaveDown(_OnLink):
    kind: Literal["wave_down"]
    wave: int = Field(ge=1)


class ComputeStall(_Episode):
    kind: Literal["compute_stall"]
    ranks: tuple[int, ...] = Field(min_length=1)


Episode = Annotated[
    Congestion | Incast | Burst | OpticalDegradation | WaveDown | ComputeStall, Field(discriminator="kind")
]
KINDS = ("congestion", "incast", "burst", "optical_degradation", "wave_down", "compute_stall")
TrafficEpisode = Congestion | Incast | Burst


class Scenario(Strict):
    """One scenario file (spec: scenarios.md)."""

    name: str
    seed: int = 1
    duration: Positive
    sites: tuple[Name, ...] = Field(min_length=2, max_length=4)
    links: tuple[Link, ...] = Field(min_length=1, max_length=8)
    job: Job = Job()
    telemetry: Telemetry = Telemetry()
    episodes: tuple[Episode, ...] = ()

    def link(self, name: str) -> Link:
        return next(link for link in self.links if link.name == name)

    @property
    def job_links(self) -> tuple[str, ...]:
        return self.job.links if self.job.links is not None else tuple(link.name for link in self.links)

    @property
    def ranks(self) -> int:
        return self.job.ranks_per_site * len(self.sites)

    def traffic_class(self, e: TrafficEpisode) -> int:
        """The class an episode's traffic uses (the job's when it names none)."""
        return self.job.traffic_class if e.traffic_class is None else e.traffic_class

    @property
    def background_class(self) -> int:
        """The one other class modelled: the first a traffic episode names, else 0 (1 if the job uses 0)."""
        for e in self.episodes:
            if isinstance(e, TrafficEpisode) and self.traffic_class(e) != self.job.traffic_class:
                return self.traffic_class(e)
        return 1 if self.job.traffic_class == 0 else 0


def device_name(link: str, site: str) -> str:
    """The DCI switch at ``site``'s end of ``link`` (a valid collector target name)."""
    return f"dci-{link}-{site}"


def _located(err: Any) -> str:
    # A discriminated union puts the tag in the location (episodes[2].congestion.load): drop it.
    loc = [p for p in err["loc"] if not (isinstance(p, str) and p in KINDS)]
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
    message = "unknown key" if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def cross_check(s: Scenario) -> list[str]:
    """What the schema cannot see field by field; one line per problem, with its location."""
    problems: list[str] = []
    sites = set(s.sites)
    if len(sites) != len(s.sites):
        problems.append("sites: a site is named twice")
    names: set[str] = set()
    reached: set[str] = set()
    for i, link in enumerate(s.links):
        where = f"links[{i}]"
        if link.name in names:
            problems.append(f"{where}.name: link {link.name!r} is named twice")
        names.add(link.name)
        for j, site in enumerate(link.between):
            if site not in sites:
                problems.append(f"{where}.between[{j}]: {site!r} names no site (sites: {', '.join(s.sites)})")
        if link.between[0] == link.between[1]:
            problems.append(f"{where}.between: a link joins two different sites")
        reached.update(link.between)
        if link.optics not in PROFILES:
            problems.append(f"{where}.optics: unknown profile {link.optics!r} (one of {', '.join(PROFILES)})")
    for i, site in enumerate(s.sites):
        if site not in reached:
            problems.append(f"sites[{i}]: no link reaches site {site!r}")
    for i, name in enumerate(s.job.links or ()):
        if name not in names:
            problems.append(f"job.links[{i}]: unknown link {name!r}")
    if s.job.links is not None and len(set(s.job.links)) != len(s.job.links):
        problems.append("job.links: a link is named twice")
    if not (s.telemetry.gnmi or s.telemetry.snmp):
        problems.append("telemetry: enable gnmi or snmp (or both)")
    background: int | None = None
    for i, e in enumerate(s.episodes):
        where = f"episodes[{i}]"
        if e.end > s.duration + 1e-9:
            problems.append(
                f"{where}: {e.kind} from {e.start:g}s for {e.duration:g}s ends after the run ({s.duration:g}s)"
            )
        if isinstance(e, ComputeStall):
            for j, rank in enumerate(e.ranks):
                if not 0 <= rank < s.ranks:
                    problems.append(f"{where}.ranks[{j}]: rank {rank} out of range (0..{s.ranks - 1})")
            continue
        if e.link not in names:
            problems.append(f"{where}.link: unknown link {e.link!r}")
            continue
        if isinstance(e, OpticalDegradation | WaveDown) and e.wave > s.link(e.link).waves:
            problems.append(
                f"{where}.wave: wave {e.wave} out of range (link {e.link} has 1..{s.link(e.link).waves})"
            )
        if isinstance(e, Incast) and s.traffic_class(e) != s.job.traffic_class:
            problems.append(
                f"{where}.traffic_class: an incast is modelled in the job's class only (the far switch's"
                f" receive stage drains the job's class; class {s.traffic_class(e)} has none)"
            )
        if isinstance(e, TrafficEpisode) and (tc := s.traffic_class(e)) != s.job.traffic_class:
            if background is not None and tc != background:
                problems.append(
                    f"{where}.traffic_class: one background class is modelled ({background} already)"
                )
            background = tc
    return problems


def parse(raw: Any, where: str = "") -> Scenario:
    """Validate an already-parsed scenario document.

    Raises:
        ConfigError: every problem, each with its location (prefixed with ``where``).
    """
    prefix = f"{where}: " if where else ""
    if not isinstance(raw, dict):
        raise ConfigError(f"{prefix}a scenario must be a mapping")
    try:
        scenario = Scenario.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(*(prefix + _located(err) for err in e.errors())) from None
    problems = cross_check(scenario)
    if problems:
        raise ConfigError(*(prefix + p for p in problems))
    return scenario


def with_duration(s: Scenario, seconds: float, where: str = "") -> Scenario:
    """``s`` run for ``seconds`` instead (its episodes must still fit).

    Raises:
        ConfigError: an episode would end after the run.
    """
    shorter = s.model_copy(update={"duration": seconds})
    problems = cross_check(shorter)
    if problems:
        prefix = f"{where}: " if where else ""
        raise ConfigError(*(f"{prefix}{p} (--duration {seconds:g})" for p in problems))
    return shorter


def scaled(s: Scenario, k: float) -> Scenario:
    """``s`` stretched in time by ``k``: the run and every episode's start and length (a burst keeps its
    length: it must stay shorter than a poll)."""
    episodes = tuple(
        e.model_copy(
            update={"start": e.start * k, "duration": e.duration if isinstance(e, Burst) else e.duration * k}
        )
        for e in s.episodes
    )
    return s.model_copy(update={"duration": s.duration * k, "episodes": episodes})


def load(path: str | Path) -> Scenario:
    """Read and validate a scenario file.

    Raises:
        ConfigError: as ``parse``.
    """
    path = Path(path)
    return parse(read_yaml(path), str(path))


def description(path: Path) -> str:
    """A scenario file's description: its first comment line."""
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            return line.lstrip("# ").strip()
        if line.strip():
            break
    return ""


def shipped() -> list[Path]:
    """The shipped scenario files, by name (from the first folder of ``SHIPPED_FOLDERS`` that has any)."""
    for folder in SHIPPED_FOLDERS:
        found = sorted(folder.glob("*.yaml"))
        if found:
            return found
    return []


def shipped_named(name: str) -> Path | None:
    """The shipped scenario file called ``name`` (with or without ``.yaml``), if there is one."""
    stem = name.removesuffix(".yaml")
    return next((p for p in shipped() if p.stem == stem), None)


def builtin(
    duration: float = 60.0,
    seed: int = 1,
    distance_km: float = 100.0,
    waves: int = 4,
    buffer: str = "deep",
    lossless: bool = True,
    episodes: bool = True,
) -> Scenario:
    """The built-in default: two sites 100 km apart, 4 x 800G deep-buffered lossless waves, one job, one
    episode of each network kind spread over the run (the demo's schedule).

    Raises:
        ConfigError: an option out of range.
    """
    T = duration
    return parse(
        {
            "name": "builtin-two-site",
            "seed": seed,
            "duration": f"{T}s",
            "sites": ["a", "b"],
            "links": [
                {
                    "name": "ab",
                    "between": ["a", "b"],
                    "distance_km": distance_km,
                    "waves": waves,
                    "buffer": buffer,
                    "lossless": lossless,
                    "optics": "800ZR" if distance_km <= 120 else "800ZR+",
                }
            ],
            "job": {
                "ranks_per_site": 1,
                "params": 5e8,
                "bytes_per_param": 2,
                "compute": "200ms",
                "log": {"format": "jsonl", "every": 1},
            },
            "episodes": []
            if not episodes
            else [
                {
                    "kind": "congestion",
                    "link": "ab",
                    "start": f"{0.12 * T}s",
                    "duration": f"{0.15 * T}s",
                    "load": 0.6,
                },
                {
                    "kind": "incast",
                    "link": "ab",
                    "start": f"{0.35 * T}s",
                    "duration": f"{0.1 * T}s",
                    "fan_in": 4,
                },
                {
                    "kind": "optical_degradation",
                    "link": "ab",
                    "wave": waves,
                    "start": f"{0.5 * T}s",
                    "duration": f"{0.2 * T}s",
                    "osnr_drop_db": round(
                        worst_drop_db(distance_km, "800ZR" if distance_km <= 120 else "800ZR+"), 2
                    ),
                },
                {
                    "kind": "wave_down",
                    "link": "ab",
                    "wave": 1,
                    "start": f"{0.8 * T}s",
                    "duration": f"{0.08 * T}s",
                },
            ],
        },
        "builtin",
    )


def worst_drop_db(distance_km: float, optics: str) -> float:
    """An OSNR drop that takes a wave 1 dB past its profile's required OSNR (past the FEC limit)."""
    from collector.contracts.optics import profile
    from spanwatch.sim.physics import nominal_osnr_db

    return nominal_osnr_db(distance_km) - profile(optics).required_osnr_db + 1.0
