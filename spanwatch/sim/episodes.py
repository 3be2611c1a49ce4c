"""Injected episodes: what goes wrong on the simulated link, and when.

Four kinds, each on one wave: ``congestion`` (another tenant's traffic takes capacity of one egress queue),
``incast`` (short microbursts at a multiple of line rate into one queue), ``optical_degradation`` (an
optical loss that lowers Rx power and OSNR at one receiver, ramping to its worst at mid-episode and back,
so the pre-FEC BER climbs toward and past the FEC limit), and ``wave_down`` (the wave loses light; both
ends go down). ``Schedule`` turns the active episodes at a time into flat per-(device, wave) arrays
(index ``device * waves + wave``), rebuilt only when something changes, because the model asks every step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spanwatch.sim.physics import Array

KINDS = ("congestion", "incast", "optical_degradation", "wave_down")


@dataclass(frozen=True)
class Episode:
    """One injected episode.

    Attributes:
        kind: one of ``KINDS``.
        start_s / end_s: model time it covers.
        device: the device index it shows at (egress queue for congestion/incast, receiver for optics;
            for wave_down both ends go down and this is the end named first).
        wave: wave index.
        magnitude: congestion: tenant rate / capacity; incast: burst rate / capacity; optical: worst
            OSNR penalty (dB); wave_down: unused.
        burst_s / period_s: incast burst length and spacing.
    """

    kind: str
    start_s: float
    end_s: float
    device: int
    wave: int
    magnitude: float = 0.0
    burst_s: float = 0.004
    period_s: float = 0.1

    def active(self, t: float) -> bool:
        return self.start_s <= t < self.end_s

    def bursting(self, t: float) -> bool:
        """For incast: whether a burst is on at ``t``."""
        return self.active(t) and (t - self.start_s) % self.period_s < self.burst_s


@dataclass
class Effects:
    """Flat per-(device, wave) arrays: extra offered load (fraction of capacity) and waves down."""

    load: Array
    down: np.ndarray
    key: tuple[object, ...]


class Schedule:
    """The episodes of a run, evaluated cheaply every model step.

    Args:
        episodes: the episodes.
        waves: waves in the link.
    """

    def __init__(self, episodes: list[Episode], waves: int) -> None:
        self.episodes = sorted(episodes, key=lambda e: e.start_s)
        self.waves = waves
        self._fx = Effects(np.zeros(2 * waves), np.zeros(waves, dtype=bool), ())

    def effects(self, t: float) -> Effects:
        """Extra load and waves down at ``t`` (the same object until something changes)."""
        key = tuple(
            (i, e.bursting(t) if e.kind == "incast" else True)
            for i, e in enumerate(self.episodes)
            if e.active(t) and e.kind != "optical_degradation"
        )
        if key == self._fx.key:
            return self._fx
        load = np.zeros(2 * self.waves)
        down = np.zeros(self.waves, dtype=bool)
        for i, on in key:
            e = self.episodes[i]
            if e.kind == "congestion" or (e.kind == "incast" and on):
                load[e.device * self.waves + e.wave] += e.magnitude
            elif e.kind == "wave_down":
                down[e.wave] = True
        self._fx = Effects(load, down, key)
        return self._fx

    def osnr_penalty_db(self, t: float) -> Array:
        """Optical loss (dB) per (receiver, wave) at ``t``: a triangle peaking mid-episode."""
        out = np.zeros(2 * self.waves)
        for e in self.episodes:
            if e.kind == "optical_degradation" and e.active(t):
                half = (e.end_s - e.start_s) / 2
                out[e.device * self.waves + e.wave] += e.magnitude * (1 - abs(t - e.start_s - half) / half)
        return out


def default_episodes(duration_s: float, waves: int, worst_penalty_db: float) -> list[Episode]:
    """One episode of each kind spread over a run of ``duration_s``, on different waves where possible.

    Args:
        duration_s: run length.
        waves: waves in the link.
        worst_penalty_db: the optical episode's worst OSNR penalty (the caller picks one that goes just
            past the FEC limit).

    Returns:
        the episodes, in time order.
    """
    T = duration_s
    return [
        Episode("congestion", 0.12 * T, 0.27 * T, device=0, wave=1 % waves, magnitude=0.8),
        Episode("incast", 0.35 * T, 0.45 * T, device=1, wave=2 % waves, magnitude=3.0),
        Episode(
            "optical_degradation", 0.50 * T, 0.70 * T, device=1, wave=3 % waves, magnitude=worst_penalty_db
        ),
        Episode("wave_down", 0.80 * T, 0.88 * T, device=0, wave=0),
    ]
