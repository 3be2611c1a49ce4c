"""The lab's YAML (``DEFAULT``, the built-in two-links lab, and ``examples/lab/*.yaml``): links, the job,
episodes, validated strictly.

Like a scenario file (``../shared/spec/scenarios.md``) but for real namespaces: each link is a veth pair
between the two DCI routers whose bottleneck is an ``htb`` class per traffic class with a fifo of a set
depth; rates are in Mbit/s because the lab runs on a small machine, not at 800G. Unknown keys, an episode
outside the run, a link no one declared: one problem each with its location (``ConfigError``, exit 1).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from collector.config import Duration
from collector.errors import ConfigError
from collector.yaml_input import read_yaml

# Queue depth of each profile, bytes: deep holds ~80 ms at 100 Mbit/s, shallow ~5 ms.
BUFFERS = {"deep": 1_000_000, "shallow": 64_000}
KINDS = ("congestion", "rate_cut", "link_down", "compute_stall")
SITES = ("a", "b")
DEFAULT = Path(__file__).with_name("two-links.yaml")  # the lab `spanwatch lab` runs without --config


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LinkSpec(Strict):
    """One inter-site link: a veth pair, shaped per traffic class on both routers' egress."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,15}$")
    distance_km: float = Field(default=100.0, gt=0, le=20_000)
    job_mbit: float = Field(default=100.0, gt=0, le=2000)
    background_mbit: float = Field(default=50.0, gt=0, le=2000)
    buffer: Literal["deep", "shallow"] | int = "deep"

    @property
    def buffer_bytes(self) -> int:
        return BUFFERS[self.buffer] if isinstance(self.buffer, str) else int(self.buffer)

    @property
    def profile(self) -> str:
        return self.buffer if isinstance(self.buffer, str) else f"{self.buffer}B"

    @property
    def port_mbit(self) -> float:
        """The link's shaped rate (its htb root: both classes), what its ports report as their speed."""
        return self.job_mbit + self.background_mbit


class JobSpec(Strict):
    """The data-parallel job: 2 ranks per site, an MLP whose gradients cross the sites every step."""

    width: int = Field(default=256, ge=8, le=4096)
    hidden: int = Field(default=512, ge=8, le=8192)
    batch: int = Field(default=64, ge=1, le=4096)
    traffic_class: int = Field(default=3, ge=0, le=7)
    background_class: int = Field(default=0, ge=0, le=7)
    dscp: int = Field(default=24, ge=0, le=63, description="the job's class on the wire (CS3)")
    host_share: float = Field(
        default=0.9,
        gt=0,
        le=1,
        description="each training host's NIC rate, as a share of the slowest link's job class",
    )
    profile: bool = False

    @property
    def params(self) -> int:
        return 2 * self.width * self.hidden + self.hidden + self.width

    @model_validator(mode="after")
    def _classes_differ(self) -> JobSpec:
        if self.traffic_class == self.background_class:
            raise ValueError("traffic_class and background_class must differ")
        return self


class EpisodeSpec(Strict):
    """One episode; times from the run's start."""

    kind: Literal["congestion", "rate_cut", "link_down", "compute_stall"]
    start: Duration
    duration: Duration
    link: str | None = None
    direction: Literal["a-b", "b-a"] | None = Field(
        default=None, description="which router's egress (default: the way the job's data flows there)"
    )
    traffic_class: int | None = Field(default=None, ge=0, le=7)
    load: float = Field(default=0.7, gt=0, le=5, description="congestion: UDP at this share of the class")
    factor: float = Field(default=0.4, gt=0, lt=1, description="rate_cut: the rate left")
    ranks: tuple[int, ...] = ()


class LabConfig(Strict):
    name: str = "lab"
    seed: int = 1
    duration: Duration = 120.0
    control: Duration = Field(
        default=30.0,
        description="seconds of the clean control run (the noise level; the reference where none is near)",
    )
    interval: Duration = Field(default=1.0, description="telemetry interval")
    links: tuple[LinkSpec, ...] = Field(min_length=2, max_length=4)
    job: JobSpec = JobSpec()
    episodes: tuple[EpisodeSpec, ...] = ()

    @model_validator(mode="after")
    def _cross(self) -> LabConfig:
        names = [link.name for link in self.links]
        if len(set(names)) != len(names):
            raise ValueError("links: names must be unique")
        problems = []
        for i, e in enumerate(self.episodes):
            where = f"episodes[{i}]"
            if e.kind == "compute_stall":
                if not e.ranks or any(not 0 <= r < 2 * len(SITES) for r in e.ranks):
                    problems.append(f"{where}.ranks: name ranks 0 to {2 * len(SITES) - 1}")
            elif e.link not in names:
                problems.append(f"{where}.link: {e.link!r} is not one of {names}")
            if e.start + e.duration > self.duration:
                problems.append(
                    f"{where}: ends at {e.start + e.duration:g} s, after the run ({self.duration:g} s)"
                )
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def link(self, name: str) -> LinkSpec:
        return next(link for link in self.links if link.name == name)


def _located(err: Any) -> list[str]:
    """One line per problem; the cross-checks' problems already carry their own location."""
    message = err["msg"].removeprefix("Value error, ")
    where = ".".join(str(p) for p in err["loc"])
    return [f"{where}: {m}" if where else m for m in message.split("; ")]


def load(path: Path, duration: float | None = None) -> LabConfig:
    """Read and validate a lab file; ``duration`` overrides the file's run length.

    Raises:
        ConfigError: every problem, each with its location.
    """
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the lab file must be a mapping")
    if duration is not None:
        raw = {**raw, "duration": f"{duration:g}s"}
    try:
        return LabConfig.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(*(line for err in e.errors() for line in _located(err))) from None
