"""Fibre physics every part shares: propagation delay and chromatic dispersion per kilometre.

Light in standard single-mode fibre (G.652, group index about 1.468) travels at about 204,000 km/s, so
each kilometre adds about 4.9 us one way: 100 km is 0.49 ms one way and about 1 ms round trip. G.652 fibre
disperses about 17 ps/nm per km at 1550 nm, so a coherent receiver's measured chromatic dispersion divided
by 17 estimates the fibre's length.
"""

from __future__ import annotations

DELAY_US_PER_KM = 4.9  # one way; the config's default ``fibre_delay_us_per_km``
DISPERSION_PS_PER_NM_KM = 17.0  # G.652 at 1550 nm


def one_way_delay_s(distance_km: float, us_per_km: float = DELAY_US_PER_KM) -> float:
    """Propagation delay over ``distance_km`` of fibre, one way, in seconds."""
    return distance_km * us_per_km * 1e-6


def round_trip_s(distance_km: float, us_per_km: float = DELAY_US_PER_KM) -> float:
    """Propagation delay there and back, in seconds."""
    return 2.0 * one_way_delay_s(distance_km, us_per_km)


def length_from_dispersion_km(dispersion_ps_per_nm: float) -> float:
    """The fibre length a measured chromatic dispersion implies (G.652), in km."""
    return abs(dispersion_ps_per_nm) / DISPERSION_PS_PER_NM_KM
