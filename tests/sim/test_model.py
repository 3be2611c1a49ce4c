"""The fluid model: physics figures, conservation, monotonic counters and episode effects (hypothesis)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from spanwatch.sim import fabric as fab
from spanwatch.sim import physics
from spanwatch.sim.episodes import Episode, Schedule
from spanwatch.sim.fabric import Fabric
from spanwatch.sim.params import FabricParams
from spanwatch.sim.snapshot import take


def test_seed_figures() -> None:
    assert math.isclose(2 * physics.propagation_delay_s(100), 0.98e-3, rel_tol=0.03)
    assert math.isclose(2 * physics.propagation_delay_s(500), 4.9e-3, rel_tol=0.03)
    assert math.isclose(physics.bandwidth_delay_bytes(100), 98e6, rel_tol=0.03)  # ~100 MB at 800G x 1 ms
    cd = physics.chromatic_dispersion_ps_nm(100, physics.frequencies_hz(4))
    assert np.all(np.abs(cd - 1700) < 30)


def test_q_and_ber_agree() -> None:
    ber = np.array([1e-9, 1e-5, 1e-3, 2e-2])
    q = physics.q_from_ber(ber)
    back = np.array([0.5 * math.erfc(x / math.sqrt(2)) for x in q])
    assert np.allclose(back, ber, rtol=1e-4)
    assert physics.post_fec_ber(np.array([1e-3]))[0] == 0.0
    assert physics.post_fec_ber(np.array([3e-2]))[0] > 0.0


def test_table_matches_formula() -> None:
    chain = physics.Chain()
    osnr = np.array([20.0, 24.3, 31.9])
    _esnr, ber, q = chain(osnr)
    exact = physics.pre_fec_ber(physics.esnr_db(osnr))
    assert np.allclose(ber, exact, rtol=1e-3)
    assert np.allclose(q, physics.q_db(exact), atol=1e-3)


def _episodes(waves: int) -> list[Episode]:
    return [
        Episode("congestion", 0.05, 0.4, 0, 1 % waves, 0.9),
        Episode("incast", 0.1, 0.3, 1, 0, 3.0),
        Episode("optical_degradation", 0.1, 0.5, 1, 0, 12.0),
        Episode("wave_down", 0.3, 0.45, 0, 0),
    ]


@settings(max_examples=12, deadline=None)
@given(
    waves=st.integers(1, 8),
    km=st.floats(10, 500),
    buffer=st.sampled_from(["deep", "shallow"]),
    lossless=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_conservation_and_monotonic(waves: int, km: float, buffer: str, lossless: bool, seed: int) -> None:
    f = Fabric(
        FabricParams(distance_km=km, waves=waves, buffer=buffer, lossless=lossless, seed=seed),
        Schedule(_episodes(waves), waves),
    )
    prev = take(f, 0, 0.0)
    for i in range(6):
        f.advance(0.1)
        snap = take(f, i, f.t, prev)
        for name, rows in snap.counters.items():
            assert np.all(np.asarray(rows) >= np.asarray(prev.counters[name])), name
        prev = snap
        c = f.conservation()
        assert math.isclose(
            c.admitted, c.transmitted + c.queued + c.dropped + c.flushed, rel_tol=1e-9, abs_tol=1.0
        )
        occ = f.occupancy()
        assert np.all(occ <= f.buffer_bytes * (1 + 1e-9))
        assert np.all(f.watermark() >= occ - 1e-6)
    if lossless:
        assert f.acc[fab.DROP_T].sum() + f.acc[fab.DROP_O].sum() == 0.0


def test_shallow_lossy_drops_only_when_full() -> None:
    f = Fabric(
        FabricParams(waves=2, buffer="shallow", lossless=False),
        Schedule([Episode("congestion", 0.0, 1.0, 0, 0, 0.9)], 2),
    )
    f.advance(0.05)
    assert f.acc[fab.DROP_T].sum() + f.acc[fab.DROP_O].sum() > 0
    assert math.isclose(f.occupancy()[0], f.buffer_bytes, rel_tol=1e-6)  # full where it drops
    assert f.acc[fab.DROP_O][1] == 0.0  # the other wave was never full


def test_lossless_pauses_instead() -> None:
    f = Fabric(
        FabricParams(waves=2, buffer="shallow", lossless=True),
        Schedule([Episode("congestion", 0.0, 1.0, 0, 0, 0.9)], 2),
    )
    f.advance(0.3)
    assert f.acc[fab.PAUSE_S][0] > 0
    assert f.acc[fab.DROP_T].sum() + f.acc[fab.DROP_O].sum() == 0
    assert f.occupancy()[0] <= f.xoff * (1 + 1e-9)


def test_step_time_comes_from_the_model() -> None:
    ideal = Fabric(FabricParams(distance_km=100, background_load=0.0))
    ideal.advance(1.0)
    steps = ideal.job.completed
    assert steps
    for r in steps:
        # 2 phases x (serialisation + 1 ms RTT), within the model step's resolution
        assert r.network_s >= 2 * ideal.rtt_s
        assert abs(r.network_s - r.ideal_network_s) < 2e-3
    far = Fabric(FabricParams(distance_km=500, background_load=0.0))
    far.advance(1.0)
    assert far.job.completed[0].network_s > steps[0].network_s + 2 * (far.rtt_s - ideal.rtt_s) * 0.9


def test_episodes_are_blamed() -> None:
    waves = 4
    f = Fabric(
        FabricParams(waves=waves, buffer="shallow", lossless=False),
        Schedule([Episode("congestion", 0.0, 3.0, 0, 1, 0.9)], waves),
    )
    f.advance(2.0)
    late = [r for r in f.job.completed if r.culprits]
    assert late
    assert all((0, 1) in r.culprits for r in late[1:])
    assert any("drops" in r.culprits[(0, 1)].causes for r in late if (0, 1) in r.culprits)


def test_optical_degradation_crosses_the_fec_limit() -> None:
    from spanwatch.sim.runtime import worst_penalty_db

    f = Fabric(
        FabricParams(waves=1),
        Schedule([Episode("optical_degradation", 0.0, 1.0, 1, 0, worst_penalty_db(100))], 1),
    )
    f.advance(0.5)  # the worst point
    pre = f.optics.value("pre_fec_ber")
    assert pre[1] > physics.OFEC_LIMIT > pre[0]
    f.advance(0.05)
    assert f.acc[fab.LOST_O][1] > 0 and f.acc[fab.FEC_UNCORR][1] > 0
