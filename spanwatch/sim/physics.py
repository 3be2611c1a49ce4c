"""Physics of the simulated inter-DC link, vectorised over waves (numpy).

Stated relations (each function says which it implements):

- Propagation: light in standard single-mode fibre (group index ~1.47) takes ``FIBRE_DELAY_S_PER_KM`` =
  4.9 us per km, so a 100 km route is 0.49 ms one way and about 1 ms round trip; 500 km about 5 ms.
- Chromatic dispersion: ``CD_PS_PER_NM_KM`` = 17 ps/nm/km at 1550 nm (G.652), with a slope of
  0.057 ps/nm^2/km across the C band; a 100 km route accumulates about 1,700 ps/nm.
- Polarisation-mode dispersion: mean DGD = 0.1 ps/sqrt(km) x sqrt(distance).
- OSNR (0.1 nm reference bandwidth): ``OSNR_ONE_SPAN_DB`` for one 80 km amplified span, minus
  10 log10(spans) as ASE noise adds per span, minus any optical loss event (a loss before the
  pre-amplifier lowers OSNR dB for dB).
- Electrical SNR: SNR = OSNR x 12.5 GHz / Rs (Rs the symbol rate), minus the transceiver's implementation
  penalty; the ESNR the DSP reports is that SNR in dB.
- Pre-FEC BER of Gray-coded DP-16QAM (the 800ZR format): BER ~= (3/8) erfc(sqrt(SNR / 10)).
- Q factor from BER: BER = 0.5 erfc(Q / sqrt(2)) (Q linear), Q_dB = 20 log10(Q).
- FEC: oFEC corrects up to a pre-FEC BER of ``OFEC_LIMIT`` (2e-2; CFEC's is 1.22e-2; per link, the optics
  profile's limit). Below the limit the
  post-FEC BER is zero; past it the residual errors are the excess, post = pre - limit, and a frame of
  ``b`` bits is lost (FCS error) with probability 1 - exp(-post x b).
- Serialisation: a wave of ``WAVE_BPS`` bits/s moves WAVE_BPS / 8 bytes per second; bytes in flight over a
  round trip (the bandwidth-delay product) at 800G x 1 ms is 100 MB.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from collector.contracts import fibre
from collector.contracts import optics as profiles

Array = npt.NDArray[np.float64]

# The shared contracts are the one source of these constants (collector/contracts/).
FIBRE_DELAY_S_PER_KM = fibre.DELAY_US_PER_KM * 1e-6
CD_PS_PER_NM_KM = fibre.DISPERSION_PS_PER_NM_KM
CD_SLOPE_PS_PER_NM2_KM = 0.057
PMD_PS_PER_SQRT_KM = 0.1
SPAN_KM = 80.0
OSNR_ONE_SPAN_DB = 38.0  # leaves 800ZR+ (28 dB required) about 1.5 dB of margin at 500 km
SYMBOL_RATE_BAUD = 118.2e9  # 800ZR DP-16QAM
REFERENCE_BW_HZ = 12.5e9  # 0.1 nm at 1550 nm
IMPLEMENTATION_PENALTY_DB = 1.5
OFEC_LIMIT = profiles.OFEC_BER_LIMIT
CFEC_LIMIT = profiles.CFEC_BER_LIMIT
WAVE_BPS = 800e9
WAVE_BYTES_PER_S = WAVE_BPS / 8
GRID_START_THZ = 193.1
GRID_SPACING_GHZ = 150.0  # 800G coherent waves need a 150 GHz slot
SPEED_OF_LIGHT = 299_792_458.0
FEC_BLOCK_BITS = 10_240.0  # the block a FEC counter counts (oFEC-class codeword size)


def propagation_delay_s(distance_km: float) -> float:
    """One-way fibre delay (the fibre contract's us/km x distance)."""
    return fibre.one_way_delay_s(distance_km)


def bandwidth_delay_bytes(distance_km: float, bytes_per_s: float = WAVE_BYTES_PER_S) -> float:
    """Bytes in flight over one round trip: rate x 2 x one-way delay."""
    return bytes_per_s * 2 * propagation_delay_s(distance_km)


def frequencies_hz(waves: int) -> Array:
    """The carrier frequency of each wave on a 150 GHz grid from 193.1 THz."""
    return (GRID_START_THZ * 1e12 + np.arange(waves) * GRID_SPACING_GHZ * 1e9).astype(np.float64)


def chromatic_dispersion_ps_nm(distance_km: float | Array, freq_hz: Array) -> Array:
    """Accumulated CD per wave: distance x (17 + slope x (wavelength - 1550 nm)) ps/nm."""
    wavelength_nm = SPEED_OF_LIGHT / freq_hz * 1e9
    return np.asarray(distance_km * (CD_PS_PER_NM_KM + CD_SLOPE_PS_PER_NM2_KM * (wavelength_nm - 1550.0)))


def mean_dgd_ps(distance_km: float) -> float:
    """Mean differential group delay: 0.1 ps/sqrt(km) x sqrt(distance)."""
    return PMD_PS_PER_SQRT_KM * math.sqrt(distance_km)


def nominal_osnr_db(distance_km: float) -> float:
    """OSNR of an undisturbed route: one-span OSNR minus 10 log10(number of 80 km spans)."""
    spans = max(1, math.ceil(distance_km / SPAN_KM))
    return OSNR_ONE_SPAN_DB - 10 * math.log10(spans)


def erfc(x: Array) -> Array:
    """Complementary error function, vectorised (Numerical Recipes' Chebyshev fit, relative error < 1.2e-7)."""
    z = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -1.26551223 + t * (
        1.00002368
        + t
        * (
            0.37409196
            + t
            * (
                0.09678418
                + t
                * (
                    -0.18628806
                    + t
                    * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))
                )
            )
        )
    )
    ans = t * np.exp(-z * z + poly)
    return np.asarray(np.where(x >= 0, ans, 2.0 - ans))


def esnr_db(osnr_db: Array) -> Array:
    """Electrical SNR (dB): OSNR x 12.5 GHz / Rs, less the implementation penalty."""
    return np.asarray(osnr_db + 10 * np.log10(REFERENCE_BW_HZ / SYMBOL_RATE_BAUD) - IMPLEMENTATION_PENALTY_DB)


def pre_fec_ber(esnr: Array) -> Array:
    """Gray-coded 16QAM: BER ~= (3/8) erfc(sqrt(SNR / 10)), SNR linear from ESNR dB."""
    snr = 10 ** (esnr / 10)
    return np.asarray(0.375 * erfc(np.sqrt(snr / 10)))


def q_from_ber(ber: Array) -> Array:
    """Linear Q with BER = 0.5 erfc(Q / sqrt(2)), by Newton's method on log(BER)."""
    ber = np.clip(ber, 1e-300, 0.49)
    q = np.sqrt(np.maximum(-2 * np.log(2 * ber), 0.01))
    for _ in range(8):
        tail = np.maximum(0.5 * erfc(q / math.sqrt(2)), 1e-300)
        density = np.exp(-q * q / 2) / math.sqrt(2 * math.pi)
        q = np.maximum(q + (np.log(tail) - np.log(ber)) * tail / density, 1e-3)
    return np.asarray(q)


def q_db(ber: Array) -> Array:
    """Q factor in dB: 20 log10(Q)."""
    return np.asarray(20 * np.log10(q_from_ber(ber)))


def post_fec_ber(pre: Array, limit: float = OFEC_LIMIT) -> Array:
    """Residual BER after FEC: zero up to the limit, the excess past it."""
    return np.asarray(np.maximum(pre - limit, 0.0))


def frame_loss(post: Array, frame_bytes: float) -> Array:
    """Probability that a frame of ``frame_bytes`` carries an uncorrected error (an FCS error)."""
    return np.asarray(-np.expm1(-post * frame_bytes * 8))


def osnr_at_limit(limit: float = OFEC_LIMIT) -> float:
    """The OSNR (dB) at which the pre-FEC BER reaches ``limit`` (bisection on the chain above)."""
    lo, hi = 0.0, 40.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if float(pre_fec_ber(esnr_db(np.array([mid])))[0]) > limit:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


class Chain:
    """OSNR (dB) -> (ESNR dB, pre-FEC BER, Q dB), tabulated every 0.01 dB from the formulas above.

    The model asks for 64 waves 100 times a second; a table lookup is exact to the formulas within the
    interpolation (log BER is smooth in dB), and much cheaper than erfc and Newton each time.
    """

    def __init__(self, lo: float = -10.0, hi: float = 45.0) -> None:
        self.osnr = np.arange(lo, hi, 0.01)
        esnr = esnr_db(self.osnr)
        ber = pre_fec_ber(esnr)
        self.log_ber = np.log10(np.maximum(ber, 1e-300))
        self.q = q_db(ber)
        self.offset = 10 * math.log10(REFERENCE_BW_HZ / SYMBOL_RATE_BAUD) - IMPLEMENTATION_PENALTY_DB

    def __call__(self, osnr_db: Array) -> tuple[Array, Array, Array]:
        """ESNR (dB), pre-FEC BER and Q (dB) for each OSNR."""
        ber = 10 ** np.interp(osnr_db, self.osnr, self.log_ber)
        return (
            np.asarray(osnr_db + self.offset),
            np.asarray(ber),
            np.asarray(np.interp(osnr_db, self.osnr, self.q)),
        )
