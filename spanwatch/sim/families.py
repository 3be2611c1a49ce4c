"""Random scenario families (scenarios.md, "Random scenario families"): ``spanwatch scenarios sample``.

``sample(seed)`` draws one ordinary scenario document from the spec's whole space, the same for the same
seed; ``--seed S --count N`` writes the files of seeds S .. S+N-1, so a failing file is redrawn from its own
seed alone (``--seed X --count 1``). Every file is validated by ``scenario.parse`` before it is written.

The space (each axis drawn independently unless a line says otherwise):

- 2-4 sites joined as a line, a star, a ring or a full mesh; 1-4 links per pair of sites in use (at most 8
  links, the schema's limit); 20-600 km; 1-8 waves of 400 or 800G (ZR within 120 km, ZR+ beyond); deep,
  shallow or byte-sized buffers (1 MB-8 GB); lossless or lossy; switch and optics vendors from three each.
- A data, pipeline or DiLoCo job (outer sync every 1-500 inner steps); 2-8 ranks per site; 3e8-2e10
  parameters; 100-800 ms of compute with 1-5 % jitter; the job's traffic class and its links (all, or a
  subset); a jsonl, Megatron or torchtitan log every 1-20 iterations; clock skew -3 s..+3 s; checkpoints
  (none, or every 10-100 steps for 0.5-3 s); runs of 60-300 s; SNMP and gNMI, or gNMI alone.
- 1-8 episodes of every kind, about a third of them placed inside another episode (on the same link or on
  another), so episodes overlap in time on one link and across links; traffic episodes in the job's class
  or in one other class; per-rank stragglers and job-wide stalls; degradations and waves down during
  congestion.

The corners it avoids, and why (everything else of the spec it draws, including episodes whose true cost is
below the step noise: the analyzer must not invent them):

- No episode in the first ``WARM_UP_S`` seconds: counters need two polls for a rate and the analyzer needs
  clean steps to know the job's usual step before anything happens.
- No episode in the last ``TAIL_S`` seconds, nor in the last two log intervals: a log line that is still
  open when the run ends is never written, so its steps have no record to score.
- Episodes cover at most ``MAX_EPISODE_SHARE`` of the run (their union): a run without clean steps has no
  baseline, which is a different question (an always-congested link) from the one scored here.
- A log prints at least ``MIN_LOG_LINES`` lines: fewer interval averages cannot be placed in time.
- A wave down never takes a link's last wave (the model has no reroute to another link: a link with no
  wave left would never finish the job's collective); single-wave links get optical degradations only.
- No run with SNMP alone: the simulated switches' SNMP agents serve IF-MIB, EtherLike and the optics
  (``spanwatch.sim.snmp_mib``), no per-queue MIB, so such a run has no job-class queue, ECN mark or PFC
  pause to measure; the analyzer would be judged on what the simulator does not serve. (A real SNMP-only
  deployment reads its vendor's queue MIBs: ``arista_queue``, ``arista_pfc``.)
- An incast is in the job's class, on a link the job's traffic uses: the simulator models an incast as the
  far hosts draining the job's class at 1/fan_in of line rate (``spanwatch.sim.episodes``), so one on a link
  the job does not use throttles nothing, and one in another class is not modelled (the scenario check
  refuses it). Either would be an episode in the truth that the network never showed.
- A burst is shorter than a poll (that is what the kind means in the spec); the telemetry interval stays at
  the collector's default 1 s: the spec does not vary it, and the goals were set for it.

What it cannot avoid, because only the run decides it: a light congestion that every queue absorbs below
its marking threshold, an incast the far buffer takes, a degradation of a wave that is down all along. The
truth marks those ``shown: false`` (``spanwatch.sim.witness``); event recall still judges them (the spec's
figure), and the score counts their misses apart (``missed_unshown``), so a run that fails only on them is
told from one that missed what the network showed.
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
from pathlib import Path
from typing import Any

import yaml

from spanwatch.sim import scenario as scenarios

SITES = ("a", "b", "c", "d")
SHAPES = ("line", "star", "ring", "mesh")
SWITCH_VENDORS = ("vendor-a", "vendor-b", "vendor-c")
OPTICS_VENDORS = ("vendor-x", "vendor-y", "vendor-z")
LOG_FORMATS = ("jsonl", "megatron", "torchtitan")
PARALLELISMS = ("data", "pipeline", "diloco")
NETWORK_KINDS = ("congestion", "incast", "burst", "optical_degradation", "wave_down")
KINDS = (*NETWORK_KINDS, "compute_stall")
MAX_LINKS = 8  # the schema's limit
TELEMETRY_INTERVAL_S = 1.0
WARM_UP_S = 10.0
TAIL_S = 5.0
MAX_EPISODE_SHARE = 0.5
MIN_LOG_LINES = 15
OVERLAP_SHARE = 0.35  # of episodes placed inside an earlier one
ZR_REACH_KM = 120.0  # ZR profiles' reach (collector/contracts/optics.py); beyond it ZR+ optics


def _log_uniform(r: random.Random, low: float, high: float) -> float:
    return math.exp(r.uniform(math.log(low), math.log(high)))


def _round(value: float, digits: int = 2) -> float:
    """``value`` to ``digits`` significant digits (files a person can read)."""
    return float(f"{value:.{digits}g}")


def _scientific(value: float) -> str:
    """``value`` written as the spec writes parameter counts (``7e9``, ``4.6e8``)."""
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{mantissa.removesuffix('.0')}e{int(exponent)}"


def _pairs(r: random.Random, sites: tuple[str, ...]) -> list[tuple[str, str]]:
    """The pairs of sites joined by links, by a random shape (every site reached)."""
    shape = r.choice(SHAPES) if len(sites) > 2 else "line"
    if shape == "line":
        return list(itertools.pairwise(sites))
    if shape == "star":
        return [(sites[0], s) for s in sites[1:]]
    if shape == "ring":
        return [*itertools.pairwise(sites), (sites[-1], sites[0])]
    return [(a, b) for i, a in enumerate(sites) for b in sites[i + 1 :]]


def _per_pair(r: random.Random, pairs: int) -> list[int]:
    """1-4 links per pair, at most ``MAX_LINKS`` in all (the largest counts give way first)."""
    counts = [r.randint(1, 4) for _ in range(pairs)]
    while sum(counts) > MAX_LINKS:
        counts[counts.index(max(counts))] -= 1
    return counts


def _buffer(r: random.Random) -> str:
    pick = r.choice(("deep", "shallow", "bytes"))
    return pick if pick != "bytes" else f"{_round(_log_uniform(r, 1e6, 8e9) / 1e6):g}MB"


def _links(r: random.Random, pairs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    links = []
    for (a, b), count in zip(pairs, _per_pair(r, len(pairs)), strict=True):
        route_km = r.uniform(20.0, 600.0)
        for k in range(count):
            # parallel links between two sites may take different routes (up to 30 % longer)
            km = round(min(600.0, route_km * r.uniform(1.0, 1.3)), 1)
            gbps = r.choice((400, 800))
            zr = km <= ZR_REACH_KM
            links.append(
                {
                    "name": f"{a}{b}-{k + 1}",
                    "between": [a, b],
                    "distance_km": km,
                    "waves": r.randint(1, 8),
                    "wave_gbps": gbps,
                    "optics": ("400ZR" if zr else "OpenZR+")
                    if gbps == 400
                    else ("800ZR" if zr else "800ZR+"),
                    "buffer": _buffer(r),
                    "lossless": r.random() < 0.5,
                    "vendor": {"switch": r.choice(SWITCH_VENDORS), "optics": r.choice(OPTICS_VENDORS)},
                }
            )
    return links


def _job(r: random.Random, links: list[dict[str, Any]], duration: float) -> dict[str, Any]:
    names = [link["name"] for link in links]
    compute = round(r.uniform(0.1, 0.8), 3)
    parallelism = r.choice(PARALLELISMS)
    job: dict[str, Any] = {
        "ranks_per_site": r.randint(2, 8),
        "params": _scientific(_log_uniform(r, 3e8, 2e10)),
        "bytes_per_param": r.choice((2, 2, 2, 4)),
        "parallelism": parallelism,
        "compute": f"{compute * 1000:g}ms",
        "compute_jitter": f"{round(r.uniform(1.0, 5.0), 1)}%",
        "traffic_class": r.randint(0, 7),
        "clock_skew": f"{round(r.uniform(-3.0, 3.0), 2)}s",
    }
    if parallelism == "diloco":
        job["sync_every"] = round(_log_uniform(r, 1, 500))
    if len(names) > 1 and r.random() < 0.4:
        job["links"] = sorted(r.sample(names, r.randint(1, len(names) - 1)))
    # At least MIN_LOG_LINES lines: a step takes at least its compute (communication only adds to it).
    most_every = max(1, min(20, int(duration / (compute * 1.5) / MIN_LOG_LINES)))
    job["log"] = {"format": r.choice(LOG_FORMATS), "every": r.randint(1, most_every)}
    if r.random() < 0.5:
        job["checkpoint"] = {"every": r.randint(10, 100), "seconds": round(r.uniform(0.5, 3.0), 2)}
    return job


def _telemetry(r: random.Random) -> dict[str, Any]:
    # SNMP and gNMI, or gNMI alone (SNMP alone: see the corners avoided)
    return {"interval": f"{TELEMETRY_INTERVAL_S:g}s", "gnmi": True, "snmp": r.random() < 0.75}


class _Episodes:
    """Draws the episodes of one run inside its window ``[lo, hi]``."""

    def __init__(self, r: random.Random, links: list[dict[str, Any]], job: dict[str, Any], duration: float):
        self.r, self.links, self.duration = r, {link["name"]: link for link in links}, duration
        log_interval = job["log"]["every"] * float(job["compute"].removesuffix("ms")) / 1000
        self.lo, self.hi = WARM_UP_S, duration - max(TAIL_S, 2 * log_interval)
        self.ranks = job["ranks_per_site"] * len({s for link in links for s in link["between"]})
        self.job_class = job["traffic_class"]
        self.job_links = job.get("links")
        self.other_class = r.choice([c for c in range(8) if c != self.job_class])
        self.drawn: list[dict[str, Any]] = []

    def draw(self, count: int) -> list[dict[str, Any]]:
        for _ in range(count):
            episode = self._one()
            if episode is not None:
                self.drawn.append(episode)
        self._fit_share()
        return sorted(self.drawn, key=lambda e: e["_start"])

    def _one(self) -> dict[str, Any] | None:
        r = self.r
        anchor = r.choice(self.drawn) if self.drawn and r.random() < OVERLAP_SHARE else None
        kind = r.choice(KINDS)
        if anchor is not None and "link" in anchor and r.random() < 0.5:
            link = anchor["link"]  # on the same link as the episode it overlaps
        else:
            link = r.choice(sorted(self.links))
        if kind == "wave_down" and self.links[link]["waves"] < 2:
            kind = "optical_degradation"
        if kind == "incast" and self.job_links and link not in self.job_links:
            link = r.choice(self.job_links)  # see the corners avoided
        length = self._length(kind)
        if anchor is not None:
            start = r.uniform(anchor["_start"], anchor["_start"] + anchor["_length"])
        else:
            start = r.uniform(self.lo, self.hi - length)
        start = max(self.lo, min(start, self.hi - length))
        length = min(length, self.hi - start)
        if length <= 0:
            return None
        episode = {"kind": kind, "_start": start, "_length": length, **self._what(kind, link)}
        if kind == "wave_down" and not self._leaves_a_wave(episode):
            return None
        return episode

    def _length(self, kind: str) -> float:
        r, run = self.r, self.hi - self.lo
        if kind == "burst":
            return r.uniform(0.05, 0.8) * TELEMETRY_INTERVAL_S  # shorter than a poll
        if kind in ("incast", "compute_stall"):
            return r.uniform(0.5, 5.0)
        return r.uniform(2.0, max(2.5, min(40.0, 0.25 * run)))

    def _what(self, kind: str, link: str) -> dict[str, Any]:
        r = self.r
        if kind == "compute_stall":
            job_wide = r.random() < 0.5  # a job-wide stall, else a straggler or two
            return {
                "ranks": list(range(self.ranks))
                if job_wide
                else sorted(r.sample(range(self.ranks), r.randint(1, 2)))
            }
        out: dict[str, Any] = {"link": link}
        # Drawn for an incast too (which stays in the job's class: see the corners), so that a seed's
        # later draws stay what they were.
        in_other_class = kind in ("congestion", "incast", "burst") and r.random() < 0.3
        if in_other_class and kind != "incast":
            out["traffic_class"] = self.other_class
        if kind == "congestion":
            out["load"] = round(r.uniform(0.3, 2.5), 2)
        elif kind == "burst":
            out["load"] = round(r.uniform(1.5, 5.0), 2)
        elif kind == "incast":
            out["fan_in"] = r.randint(2, 32)
        else:
            out["wave"] = r.randint(1, self.links[link]["waves"])
            if kind == "optical_degradation":
                top = scenarios.worst_drop_db(self.links[link]["distance_km"], self.links[link]["optics"])
                out["osnr_drop_db"] = round(r.uniform(0.5, max(1.0, top + 3.0)), 1)
        return out

    def _leaves_a_wave(self, episode: dict[str, Any]) -> bool:
        """Whether the link keeps a wave up through ``episode`` beside the waves already drawn down on it."""
        start, end = episode["_start"], episode["_start"] + episode["_length"]
        down = {
            e["wave"]
            for e in self.drawn
            if e["kind"] == "wave_down"
            and e["link"] == episode["link"]
            and e["_start"] < end
            and start < e["_start"] + e["_length"]
        }
        return len(down | {episode["wave"]}) < int(self.links[episode["link"]]["waves"])

    def _fit_share(self) -> None:
        """Halve the longest episode until their union covers at most ``MAX_EPISODE_SHARE`` of the run."""
        while self.drawn and _union([(e["_start"], e["_length"]) for e in self.drawn]) > (
            MAX_EPISODE_SHARE * self.duration
        ):
            longest = max(self.drawn, key=lambda e: e["_length"])
            longest["_length"] /= 2


def _union(spans: list[tuple[float, float]]) -> float:
    """The length of the union of ``(start, length)`` spans."""
    total, reach = 0.0, -math.inf
    for start, length in sorted(spans):
        end = start + length
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def _finish(episode: dict[str, Any]) -> dict[str, Any]:
    start, length = episode.pop("_start"), episode.pop("_length")
    # milliseconds: the spec's durations are written in ms or s
    return {
        "kind": episode.pop("kind"),
        "start": f"{start * 1000:.0f}ms",
        "duration": f"{max(1.0, length * 1000):.0f}ms",
        **episode,
    }


def sample(seed: int) -> dict[str, Any]:
    """One random scenario document (valid; the same for the same seed).

    Args:
        seed: the scenario's seed (also its ``seed`` field, so the fabric's own draws follow it).
    """
    r = random.Random(seed)
    duration = float(r.randint(60, 300))
    sites = SITES[: r.randint(2, 4)]
    links = _links(r, _pairs(r, sites))
    job = _job(r, links, duration)
    episodes = _Episodes(r, links, job, duration).draw(r.randint(1, 8))
    doc = {
        "name": f"random-{seed}",
        "seed": seed,
        "duration": f"{duration:g}s",
        "sites": list(sites),
        "links": links,
        "job": job,
        "telemetry": _telemetry(r),
        "episodes": [_finish(e) for e in episodes],
    }
    scenarios.parse(doc, f"random-{seed}")  # a sampler bug is an error here, never a file on disk
    return doc


def write(seed: int, count: int, out: Path) -> list[Path]:
    """Write the files of seeds ``seed`` .. ``seed + count - 1`` into ``out``; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for s in range(seed, seed + count):
        path = out / f"random-{s}.yaml"
        header = f"# random scenario of seed {s} (spanwatch scenarios sample --seed {s} --count 1)\n"
        path.write_text(
            header + yaml.safe_dump(sample(s), sort_keys=False, width=110, default_flow_style=None)
        )
        paths.append(path)
    return paths


def arguments(p: argparse.ArgumentParser) -> None:
    """``spanwatch scenarios`` options."""
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    s = sub.add_parser("sample", help="write random scenario files drawn from the spec's whole space")
    s.add_argument("--seed", type=int, required=True, help="the first file's seed (file k: seed + k)")
    s.add_argument("--count", type=int, default=1, help="how many files")
    s.add_argument("--out", type=Path, required=True, help="the folder to write them into")


def run(args: argparse.Namespace) -> int:
    """Write the files and name them."""
    if args.count < 1:
        print("spanwatch scenarios sample: --count must be at least 1")
        return 2
    for path in write(args.seed, args.count, args.out):
        print(path)
    return 0
