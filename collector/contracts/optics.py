"""Coherent optics profiles: the limits a link's optics must stay within, by the agreement they follow.

One named profile per kind of optic, selectable per link (``links[].optics``) in the config and used
alike by the simulator, the analyzer's event rules and report, the alert rules and the boards.

Sources (the figures are the agreements' own where they define them, typical datasheet values otherwise):

- 400ZR: OIF-400ZR-01.0 (2020). DP-16QAM at 59.8 GBd with concatenated FEC (CFEC), whose pre-FEC BER
  threshold is 1.22e-2; required OSNR 26 dB (0.1 nm) for the amplified DWDM application; chromatic
  dispersion tolerance 2,400 ps/nm; single-span amplified reach 80-120 km.
- 800ZR: OIF-800ZR-01.0 (2024). DP-16QAM at 118.2 GBd with open FEC (oFEC, threshold 2.0e-2); CD
  tolerance 2,400 ps/nm; reach 80-120 km. Required OSNR about 29 dB (0.1 nm) in vendor datasheets.
- 800ZR+: 800G ZR+ / OpenZR+ 800G modules (oFEC 2.0e-2); about 28 dB required OSNR at 800G 16QAM and
  CD tolerance of 20,000 ps/nm in vendor datasheets; amplified metro/regional reach (about 600 km at 800G).
- OpenZR+: OpenZR+ MSA 400G (2020), DP-16QAM at 60.1 GBd with oFEC (2.0e-2); required OSNR 24 dB;
  CD tolerance 20,000 ps/nm; multi-span amplified reach beyond 1,000 km at 400G.
"""

from __future__ import annotations

from dataclasses import dataclass

CFEC_BER_LIMIT = 1.22e-2  # OIF-400ZR-01.0: CFEC pre-FEC BER threshold for a post-FEC BER below 1e-15
OFEC_BER_LIMIT = 2.0e-2  # oFEC (OpenROADM MSA, OpenZR+, 800ZR): pre-FEC BER threshold


@dataclass(frozen=True)
class OpticsProfile:
    """The limits of one kind of coherent optic.

    Attributes:
        name: the profile's name, as a config names it.
        fec_ber_limit: the pre-FEC BER past which the FEC no longer corrects everything.
        required_osnr_db: the OSNR (0.1 nm) the receiver needs at the FEC limit.
        cd_tolerance_ps_nm: the chromatic dispersion the receiver compensates.
        reach_km: the longest route the agreement targets.
    """

    name: str
    fec_ber_limit: float
    required_osnr_db: float
    cd_tolerance_ps_nm: float
    reach_km: float


PROFILES: dict[str, OpticsProfile] = {
    p.name: p
    for p in (
        OpticsProfile("400ZR", CFEC_BER_LIMIT, 26.0, 2_400.0, 120.0),
        OpticsProfile("800ZR", OFEC_BER_LIMIT, 29.0, 2_400.0, 120.0),
        OpticsProfile("800ZR+", OFEC_BER_LIMIT, 28.0, 20_000.0, 600.0),
        OpticsProfile("OpenZR+", OFEC_BER_LIMIT, 24.0, 20_000.0, 1_000.0),
    )
}
DEFAULT = "800ZR"  # the inter-site waves spanwatch is built for: 800G coherent pluggables


def profile(name: str | None = None) -> OpticsProfile:
    """The named profile (the default when None).

    Raises:
        KeyError: no profile of that name.
    """
    return PROFILES[name or DEFAULT]
