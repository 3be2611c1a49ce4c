"""The coherent optics of every wave, per receiver, updated at 100 Hz (physics.py states the relations).

Values move as a real module's do: Rx power and OSNR wander (small random walks), the DSP's CD estimate
jitters around distance x 17 ps/nm/km, DGD around 0.1 ps/sqrt(km) x sqrt(distance), and the carrier
frequency offset drifts within +/-200 MHz. An optical loss episode lowers Rx power and OSNR together, dB
for dB; ESNR, pre-FEC BER, Q, post-FEC BER and frame loss follow from OSNR by the stated chain, shifted
per link so that the pre-FEC BER reaches the link's optics profile's FEC limit exactly at its required
OSNR (``collector/contracts/optics.py``). A wave that is down reads loss of signal: -40 dBm Rx power, and
no signal to measure: OSNR, ESNR, Q, BER, CD, PMD, PDL and CFO are NaN (not exported).

Arrays are flat per (receiving device, wave), like the fabric's. Each update also feeds ten 100 ms stat
windows behind the OpenConfig min/max/avg leaves (the last second).
"""

from __future__ import annotations

import numpy as np

from spanwatch.sim import physics
from spanwatch.sim.layout import Layout

QUANTITIES = (
    "rx_power",
    "tx_power",
    "osnr",
    "esnr",
    "q",
    "pre_fec_ber",
    "post_fec_ber",
    "cd",
    "pmd",
    "pdl",
    "cfo",
    "bias",
)
INDEX = {name: i for i, name in enumerate(QUANTITIES)}
UPDATE_S = 0.01
FRAME_BYTES = 4096.0  # the job's RoCE frames (fabric.FRAME_BYTES)
TX_POWER_DBM = -10.0
RX_POWER_DBM = -12.0  # after the last in-line amplifier
LOS_DBM = -40.0
WINDOWS = 10


class _Lit:
    """``np.where(up, x, dark)``: ``x`` where a wave has light; ``x`` itself when every wave has (the usual
    case, where the copy is all the ``where`` would do)."""

    def __init__(self, up: np.ndarray) -> None:
        self.up = up
        self.every = bool(up.all())

    def __call__(self, x: np.ndarray, dark: float) -> np.ndarray:
        return x if self.every else np.where(self.up, x, dark)


class Optics:
    """Optical state per (receiving device, wave).

    Args:
        lay: the fabric's layout (arrays are receiver-indexed, like its receive-side rows).
        rng: the model's random generator.
        dt: the model's step.
    """

    def __init__(self, lay: Layout, rng: np.random.Generator, dt: float) -> None:
        self.rng = rng
        self.every = max(1, round(UPDATE_S / dt))
        self.freq_hz = physics.frequencies_hz(int(lay.wave.max()) + 1)[lay.wave]
        self.cd0 = physics.chromatic_dispersion_ps_nm(lay.distance_km, self.freq_hz)
        self.dgd0 = np.asarray([physics.mean_dgd_ps(d) for d in lay.distance_km])
        self.osnr0 = np.asarray([physics.nominal_osnr_db(d) for d in lay.distance_km])
        limits = {
            p.name: (p.fec_ber_limit, physics.osnr_at_limit(p.fec_ber_limit) - p.required_osnr_db)
            for p in lay.profiles
        }
        self.fec_limit = np.asarray([limits[lay.profiles[li].name][0] for li in lay.link_of])
        self.osnr_shift = np.asarray([limits[lay.profiles[li].name][1] for li in lay.link_of])
        self.chain = physics.Chain()
        self.frame_bytes = FRAME_BYTES
        self.peer = lay.peer
        size = lay.size
        self.walk_osnr = np.zeros(size)
        self.walk_power = np.zeros(size)
        self.walk_dgd = np.zeros(size)
        self.cfo = rng.uniform(-100e6, 100e6, size)
        self.temperature = 45 + rng.uniform(-2, 2, size)
        self.values = np.zeros((len(QUANTITIES), size))
        self.frame_loss_rx = np.zeros(size)
        self.block_error_rx = np.zeros(size)
        self.block_uncorrectable_rx = np.zeros(size)
        self.lossy = False
        k = len(QUANTITIES)
        self.mins = np.full((WINDOWS, k, size), np.inf)
        self.maxs = np.full((WINDOWS, k, size), -np.inf)
        self.sums = np.zeros((WINDOWS, k, size))
        self.counts_q = np.zeros((WINDOWS, k, size))
        self.window = 0
        self.update(np.zeros(size), np.ones(size, dtype=bool))

    def update(self, penalty_db: np.ndarray, up: np.ndarray) -> None:
        """Recompute every optical value.

        Args:
            penalty_db: optical loss per (receiver, wave), dB.
            up: whether each (device, wave) has light.
        """
        rng, v, size = self.rng, self.values, penalty_db.shape
        self.walk_osnr = 0.98 * self.walk_osnr + rng.normal(0, 0.03, size)
        self.walk_power = 0.98 * self.walk_power + rng.normal(0, 0.02, size)
        self.walk_dgd = 0.99 * self.walk_dgd + rng.normal(0, 0.02, size)
        self.cfo = np.minimum(
            np.maximum(self.cfo + rng.normal(0, 2e6, size), -200e6), 200e6
        )  # np.clip, faster
        osnr = self.osnr0 + self.walk_osnr - penalty_db
        esnr, pre, q = self.chain(osnr + self.osnr_shift)
        post = np.maximum(pre - self.fec_limit, 0.0)
        nan = np.nan
        lit = _Lit(up)
        v[INDEX["rx_power"]] = lit(RX_POWER_DBM + self.walk_power - penalty_db, LOS_DBM)
        v[INDEX["tx_power"]] = lit(TX_POWER_DBM + 0.1 * self.walk_power[self.peer], TX_POWER_DBM)
        v[INDEX["osnr"]] = lit(osnr, nan)
        v[INDEX["esnr"]] = lit(esnr, nan)
        v[INDEX["q"]] = lit(q, nan)
        v[INDEX["pre_fec_ber"]] = lit(pre, nan)
        v[INDEX["post_fec_ber"]] = lit(post, nan)
        v[INDEX["cd"]] = lit(self.cd0 + rng.normal(0, 0.5, size), nan)
        v[INDEX["pmd"]] = lit(self.dgd0 * np.exp(self.walk_dgd), nan)
        v[INDEX["pdl"]] = lit(0.4 + 0.05 * np.abs(self.walk_dgd), nan)
        v[INDEX["cfo"]] = lit(self.cfo, nan)
        v[INDEX["bias"]] = 0.150 + 0.001 * self.walk_power
        self.frame_loss_rx = lit(physics.frame_loss(post, self.frame_bytes), 1.0)
        self.lossy = bool(np.count_nonzero(self.frame_loss_rx))
        self.block_error_rx = lit(-np.expm1(-pre * physics.FEC_BLOCK_BITS), 0.0)
        self.block_uncorrectable_rx = lit(-np.expm1(-post * physics.FEC_BLOCK_BITS), 0.0)
        i = self.window
        np.fmin(self.mins[i], v, out=self.mins[i])  # a wave down in the window leaves its NaN out
        np.fmax(self.maxs[i], v, out=self.maxs[i])
        self.sums[i] += np.nan_to_num(v)
        self.counts_q[i] += ~np.isnan(v)

    def roll(self) -> None:
        """Start the next 100 ms stat window (the oldest of the ten is forgotten)."""
        self.window = i = (self.window + 1) % WINDOWS
        self.mins[i] = np.inf
        self.maxs[i] = -np.inf
        self.sums[i] = 0.0
        self.counts_q[i] = 0

    def value(self, name: str) -> np.ndarray:
        """The instant value of one quantity, per (receiver, wave)."""
        return np.asarray(self.values[INDEX[name]])

    def stats(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(min, max, avg) over the last second, each shaped (quantity, queue); NaN where no signal."""
        count = self.counts_q.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            avg = np.where(count > 0, self.sums.sum(axis=0) / np.maximum(count, 1), np.nan)
        lo, hi = self.mins.min(axis=0), self.maxs.max(axis=0)
        return np.where(np.isinf(lo), np.nan, lo), np.where(np.isinf(hi), np.nan, hi), np.asarray(avg)
