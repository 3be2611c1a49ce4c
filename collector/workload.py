"""How many processes ``spanwatch collect`` runs by default: by load, not by core count (issue 33).

Every process costs an interpreter with the collector imported (about 38 MB); a worker pays off only
when one process cannot keep up. So the load of the configured targets is estimated from the collector's
own measured costs (``bench/bench_scale.py`` on the 2-core reference machine), and the targets get one
process while that load fits in ``PROCESS_SHARE`` of a core, else one worker per share, never more than the
cores nor than the targets (a target lives in one worker):

- an SNMP poll of a 64-interface switch (ifTable and ifXTable) takes ``SNMP_POLL_CPU_SECONDS`` of CPU:
  200 such targets every 10 s load 0.19 of a core;
- a gNMI target is reckoned as a 64-interface switch streaming 16 counters per interface each sample
  interval (``GNMI_UPDATES_PER_SAMPLE``), decoded at ``GNMI_UPDATES_PER_CPU_SECOND``: 50 targets every
  second load 0.23 of a core, every 500 ms 0.47 (one process), every 333 ms 0.70 (two).

``--workers N`` overrides the choice; the start-up log says what was chosen and why.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from collector.config import Config

SNMP_POLL_CPU_SECONDS = 0.0094  # measured: 200 targets x 64 interfaces, main 8a531f6 (issue 33)
GNMI_UPDATES_PER_SAMPLE = 64 * 16  # a 64-interface switch, 16 counters per interface
# measured: one process, 50 targets at 51-154k updates/s, 222-262k an update per CPU second in six runs
# (the least, rounded down; bench/README.md, issue 33, stop 60)
GNMI_UPDATES_PER_CPU_SECOND = 220_000
PROCESS_SHARE = 0.5  # the load one process is given: headroom for bursts, scrapes and the relay


@dataclass(frozen=True)
class Choice:
    """The default process count and why."""

    workers: int
    load: float  # estimated cores
    reason: str


def cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def estimate(config: Config) -> tuple[float, float]:
    """The estimated load of ``config``'s targets in cores: (SNMP, gNMI)."""
    snmp = gnmi = 0.0
    for target in config.targets:
        if target.snmp is not None:
            interval = target.snmp.interval or config.defaults.interval
            snmp += SNMP_POLL_CPU_SECONDS / interval
        if target.gnmi is not None:
            gnmi += GNMI_UPDATES_PER_SAMPLE / target.gnmi.sample_interval / GNMI_UPDATES_PER_CPU_SECOND
    return snmp, gnmi


def choose(config: Config, available: int | None = None) -> Choice:
    """The default worker count for ``config`` on ``available`` cores (default: this machine's)."""
    available = available or cores()
    snmp, gnmi = estimate(config)
    load = snmp + gnmi
    wanted = math.ceil(load / PROCESS_SHARE)
    workers = max(1, min(wanted, available, len(config.targets)))
    what = (
        f"{len(config.targets)} targets estimated at {load:.2f} of a core, SNMP {snmp:.2f} + gNMI {gnmi:.2f}"
    )
    if workers == 1:
        reason = f"{what}: one process fits them"
    else:
        reason = (
            f"{what}: {workers} worker processes of at most {PROCESS_SHARE:g} core each, {available} cores"
        )
    return Choice(workers, load, reason)
