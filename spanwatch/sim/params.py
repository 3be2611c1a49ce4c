"""The simulated fabric's parameters: geometry, buffer profiles, traffic and the training job.

Defaults describe the issue's embedded default: two sites 100 km apart joined by 4 parallel 800G coherent
waves through deep-buffered DCI switches. ``validate`` enforces the supported range (up to 500 km and 32
waves).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from collector.errors import SpanwatchError

MAX_DISTANCE_KM = 500.0
MAX_WAVES = 32
QUEUE = "3"  # the egress traffic class the job's RoCE traffic uses (lossless priority 3)
PRIORITY = 3


@dataclass(frozen=True)
class BufferProfile:
    """Egress buffering of one wave's queue, as fractions of the queue's buffer where relative.

    Attributes:
        name: ``deep`` or ``shallow``.
        queue_bytes: the buffer one queue may use (tail drop above it).
        ecn_min / ecn_max: ECN marking ramp (probability 0 at ecn_min to 1 at ecn_max), fraction of
            ``queue_bytes``.
        xoff / xon: PFC pause / resume thresholds, fraction of ``queue_bytes`` (lossless only); the gap from
            xoff to the full buffer is the headroom that absorbs what arrives while the pause takes effect.
    """

    name: str
    queue_bytes: float
    ecn_min: float = 0.05
    ecn_max: float = 0.25
    xoff: float = 0.9
    xon: float = 0.8


PROFILES = {
    # Jericho-class switch with HBM: 8 GB shared, 2 GB a queue is 20x the BDP of 100 km at 800G.
    "deep": BufferProfile("deep", queue_bytes=2.0e9),
    # On-chip SRAM only (Tomahawk-class share of a port): tens of MB, under one BDP at 100 km.
    "shallow": BufferProfile("shallow", queue_bytes=32.0e6),
}


@dataclass(frozen=True)
class TrainingParams:
    """The training job: compute then a gradient sync across the link, every step.

    Attributes:
        compute_s: compute time of a step (jittered by ``compute_jitter``, relative).
        gradient_bytes: bytes each site sends the other per step (split over the up waves).
        phases: sync phases per step (reduce-scatter then all-gather); each ends after its last byte
            arrives and the completion comes back, so it costs one round trip of propagation.
        host_rate_factor: hosts inject at this multiple of a wave's rate (more hosts than waves).
        frame_bytes: RoCE frame size of the job's traffic.
    """

    compute_s: float = 0.2
    compute_jitter: float = 0.02
    gradient_bytes: float = 1.0e9
    phases: int = 2
    host_rate_factor: float = 1.25
    frame_bytes: float = 4096.0


@dataclass(frozen=True)
class FabricParams:
    """The whole simulated fabric.

    Attributes:
        distance_km: fibre route length between the sites.
        waves: parallel 800G waves in the link.
        buffer: ``deep`` or ``shallow`` (``PROFILES``).
        lossless: PFC on the job's priority (pause instead of drop).
        background_load: mean background traffic per wave, fraction of its capacity.
        background_frame_bytes: mean frame size of background traffic.
        step_s: the fluid model's time step.
        seed: random seed (noise, jitter, episode placement).
        training: the job.
    """

    distance_km: float = 100.0
    waves: int = 4
    buffer: str = "deep"
    lossless: bool = True
    background_load: float = 0.3
    background_frame_bytes: float = 1024.0
    step_s: float = 1e-3
    seed: int = 1
    training: TrainingParams = field(default_factory=TrainingParams)

    @property
    def profile(self) -> BufferProfile:
        return PROFILES[self.buffer]

    def validate(self) -> FabricParams:
        """Check the supported range.

        Returns:
            self.

        Raises:
            SpanwatchError: a parameter out of range.
        """
        if not 0 < self.distance_km <= MAX_DISTANCE_KM:
            raise SpanwatchError(f"distance must be in (0, {MAX_DISTANCE_KM:g}] km, not {self.distance_km:g}")
        if not 1 <= self.waves <= MAX_WAVES:
            raise SpanwatchError(f"waves must be 1..{MAX_WAVES}, not {self.waves}")
        if self.buffer not in PROFILES:
            raise SpanwatchError(f"buffer profile must be one of {sorted(PROFILES)}, not {self.buffer!r}")
        if not 0 <= self.background_load < 1:
            raise SpanwatchError("background load must be in [0, 1)")
        if not 1e-5 <= self.step_s <= 1e-2:
            raise SpanwatchError("the model step must be between 10 us and 10 ms")
        return self
