"""The fluid model's physics, per link: conservation, line rate, PFC only when lossless, congestion control,
no signal on a dark wave, harmless classes, compute-side pauses, and truth.json's shape."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spanwatch.sim import fabric as fab
from spanwatch.sim import gnmi_tree, physics, snmp_mib
from spanwatch.sim.fabric import Fabric
from spanwatch.sim.scenario import Scenario, parse
from spanwatch.sim.snapshot import take
from spanwatch.sim.training import airport, compute_end
from spanwatch.sim.truth import Truth
from spanwatch.sim.truth_build import build_truth


def scenario(links: list[dict[str, Any]], episodes: list[dict[str, Any]], **job: Any) -> Scenario:
    sites = sorted({s for lk in links for s in lk["between"]})
    return parse(
        {
            "name": "t",
            "seed": 1,
            "duration": "20s",
            "sites": sites,
            "links": links,
            "job": {"ranks_per_site": 2, "params": "2e9", "compute": "100ms", **job},
            "episodes": episodes,
        }
    )


def link(name: str = "ab", **kw: Any) -> dict[str, Any]:
    return {"name": name, "between": ["a", "b"], "distance_km": 100, "waves": 2, **kw}


def test_seed_figures() -> None:
    assert math.isclose(2 * physics.propagation_delay_s(100), 0.98e-3, rel_tol=0.03)
    assert math.isclose(2 * physics.propagation_delay_s(500), 4.9e-3, rel_tol=0.03)
    cd = physics.chromatic_dispersion_ps_nm(100, physics.frequencies_hz(4))
    assert np.all(np.abs(cd - 1700) < 30)


def test_q_and_ber_agree() -> None:
    ber = np.array([1e-9, 1e-5, 1e-3, 2e-2])
    back = np.array([0.5 * math.erfc(x / math.sqrt(2)) for x in physics.q_from_ber(ber)])
    assert np.allclose(back, ber, rtol=1e-4)


def test_airport_split() -> None:
    assert np.allclose(airport(np.array([0.010, 0.0]), 0.010), [0.010, 0.0])  # alone late: all of it
    assert np.allclose(airport(np.array([0.010, 0.008]), 0.010), [0.006, 0.004])  # share only what both
    assert airport(np.array([0.004, 0.004, 0.0]), 0.004).sum() == pytest.approx(0.004)


def test_compute_end_freezes() -> None:
    assert compute_end(0.0, 1.0, [(0.5, 1.5)]) == pytest.approx(2.0)
    assert compute_end(1.0, 1.0, [(0.5, 1.5)]) == pytest.approx(2.5)
    assert compute_end(0.0, 1.0, [(3.0, 4.0)]) == pytest.approx(1.0)


EPISODES = [
    {"kind": "congestion", "link": "ab", "start": "0.1s", "duration": "0.5s", "load": 1.4},
    {"kind": "incast", "link": "ab", "start": "0.2s", "duration": "0.3s", "fan_in": 8},
    {
        "kind": "optical_degradation",
        "link": "ab",
        "wave": 1,
        "start": "0.1s",
        "duration": "0.4s",
        "osnr_drop_db": 9,
    },
    {"kind": "wave_down", "link": "ab", "wave": 2, "start": "0.3s", "duration": "0.2s"},
]


@settings(max_examples=10, deadline=None)
@given(
    km=st.floats(50, 500),
    waves=st.integers(2, 6),
    buffer=st.sampled_from(["deep", "shallow"]),
    lossless=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_conservation_line_rate_and_counters(
    km: float, waves: int, buffer: str, lossless: bool, seed: int
) -> None:
    s = scenario(
        [
            link(distance_km=km, waves=waves, buffer=buffer, lossless=lossless, optics="800ZR+"),
            link("ab2", lossless=not lossless),
        ],
        EPISODES,
    ).model_copy(update={"seed": seed})
    f = Fabric(s)
    prev = take(f, 0, 0.0)
    tx_prev = f.acc[[fab.TX_T, fab.TX_X, fab.TX_O]].sum(axis=0)
    for i in range(60):
        f.advance(0.01)
        tx = f.acc[[fab.TX_T, fab.TX_X, fab.TX_O]].sum(axis=0)
        # utilisation never above line rate (a tiny float slack)
        assert np.all(tx - tx_prev <= f.cap * 0.01 * (1 + 1e-9) + 1.0)
        tx_prev = tx
        if i % 10 == 9:
            snap = take(f, i, f.t, prev)
            for name, rows in snap.counters.items():
                assert all(
                    np.all(np.asarray(a) >= np.asarray(b))
                    for a, b in zip(rows, prev.counters[name], strict=True)
                ), name
            prev = snap
        c = f.conservation()
        assert math.isclose(
            c.admitted, c.transmitted + c.queued + c.dropped + c.flushed, rel_tol=1e-9, abs_tol=16.0
        )
        assert np.all(f.occupancy() <= f.lay.buffer * (1 + 1e-9))
    lossy = ~f.lay.lossless
    assert np.all(f.acc[fab.PAUSE_HOST][lossy] == 0) and np.all(
        f.acc[fab.PAUSE_RX][lossy] == 0
    )  # PFC only lossless
    assert np.all(
        f.acc[[fab.DROP_T, fab.DROP_X]][:, f.lay.lossless] == 0
    )  # lossless: no tail drop in the class


def test_congestion_control_cuts_and_recovers() -> None:
    s = scenario(
        [link(buffer="shallow", lossless=False)],
        [{"kind": "congestion", "link": "ab", "start": "0s", "duration": "2s", "load": 0.8}],
    )
    f = Fabric(s)
    lowest = 1.0
    while f.t < 1.5:
        f.advance(0.05)
        lowest = min(lowest, float(f.rate.min()))
    assert lowest < 0.6  # ECN and drops cut the job's rate, not only resends
    f.advance(1.5)
    assert f.rate.min() > 0.99  # and it recovers once the congestion is gone


def test_received_pauses_only_when_the_far_end_is_lossless() -> None:
    incast = [{"kind": "incast", "link": "ab", "start": "0s", "duration": "3s", "fan_in": 32}]
    lossless = Fabric(scenario([link(buffer="deep", lossless=True)], incast, params="7e9"))
    lossless.advance(2.0)
    near = lossless.lay.block(0, 0)
    assert lossless.acc[fab.PAUSE_RX][near].sum() > 0  # the far switch paused the near one over the wave
    assert lossless.acc[fab.DROP_RX_T].sum() == 0
    snap = take(lossless, 0, 2.0)
    assert sum(snap.counters["pfc_rx_frames"][0]) > 0 and sum(snap.counters["pfc_tx_frames"][1]) > 0
    lossy = Fabric(scenario([link(buffer="shallow", lossless=False)], incast, params="7e9"))
    lossy.advance(2.0)
    assert lossy.acc[fab.PAUSE_RX].sum() == 0 and lossy.acc[fab.DROP_RX_T].sum() > 0


def test_a_down_wave_reports_no_signal() -> None:
    s = scenario(
        [link(waves=2)], [{"kind": "wave_down", "link": "ab", "wave": 2, "start": "0s", "duration": "5s"}]
    )
    f = Fabric(s)
    f.advance(1.5)
    snap = take(f, 0, f.t)
    assert math.isnan(snap.gauges["osnr"][0][1]) and math.isnan(snap.gauges["pre_fec_ber"][1][1])
    assert snap.gauges["osnr"][0][0] > 20 and snap.gauges["rx_power"][1][1] == -40.0
    leaves = {
        "/".join(name for name, _ in g.prefix) + "/" + "/".join(n for n, _ in path)
        for g in gnmi_tree.groups(snap, 1, 0)
        if any(k.get("name") == "OpticalChannel1/2" for _, k in g.prefix)
        for path, _ in g.leaves
    }
    assert not any("osnr" in leaf or "pre-fec-ber" in leaf for leaf in leaves)
    assert any("input-power" in leaf for leaf in leaves)
    oids, _ = snmp_mib.build(snap, 1, "dci-ab-b")
    pm = snmp_mib.JNX_OPTICS
    assert not any(o[: len(pm)] == pm and o[-1] == 2 and o[len(pm)] == 6 for o in oids)  # no ESNR for wave 2
    assert any(o[: len(pm)] == pm and o[-1] == 1 and o[len(pm)] == 6 for o in oids)


def _ends(s: Scenario) -> list[float]:
    f = Fabric(s)
    f.advance(6.0)
    return [r.end_s for r in f.job.completed]


def test_another_class_does_not_slow_the_job() -> None:
    quiet = scenario([link(), link("ab2")], [])
    busy = scenario(
        [link(), link("ab2")],
        [
            {
                "kind": "congestion",
                "link": "ab",
                "start": "1s",
                "duration": "3s",
                "load": 3.0,
                "traffic_class": 0,
            },
            {
                "kind": "burst",
                "link": "ab2",
                "start": "2s",
                "duration": "0.2s",
                "load": 5.0,
                "traffic_class": 0,
            },
        ],
    )
    assert _ends(quiet) == _ends(busy)
    harmful = scenario(
        [link(), link("ab2")],
        [{"kind": "congestion", "link": "ab", "start": "1s", "duration": "3s", "load": 1.5}],
    )
    assert _ends(harmful)[-1] > _ends(quiet)[-1] + 0.01


def test_stalls_and_checkpoints_are_not_network_time() -> None:
    s = scenario(
        [link()],
        [{"kind": "compute_stall", "start": "1s", "duration": "0.5s", "ranks": [1]}],
        checkpoint={"every": 5, "seconds": 0.3},
    )
    f = Fabric(s)
    f.advance(4.0)
    truth = build_truth(s, f, f.job.completed, 1000.0)
    assert all(row.network_seconds.total == 0 for row in truth.steps)
    by_step: dict[int, dict[int, Any]] = {}
    for row in truth.steps:
        by_step.setdefault(row.step, {})[row.rank] = row
    stalled = [rows for rows in by_step.values() if rows[1].compute_seconds > rows[0].compute_seconds + 0.3]
    assert stalled and all(rows[0].wait_seconds > 0.3 and rows[1].wait_seconds == 0 for rows in stalled)
    assert any(row.checkpoint and row.compute_seconds > 0.35 for row in truth.steps)
    (stall,) = truth.episodes
    assert stall.affects_job and stall.devices == [] and stall.ranks == [1]


def test_clean_run_costs_only_the_steady_figures() -> None:
    s = scenario([link(distance_km=300, optics="800ZR+"), link("ab2", waves=4)], [])
    f = Fabric(s)
    f.advance(3.0)
    truth = build_truth(s, f, f.job.completed, 0.0)
    assert all(row.network_seconds.total < 1e-3 for row in truth.steps)
    for r in f.job.completed:
        assert abs((r.end_s - r.comm_start_s) - r.clean_s) < 1e-3
    ab = truth.links["ab"]
    assert ab.round_trip_seconds == pytest.approx(2 * 300 * 4.9e-6)
    assert ab.capacity_bytes_per_second == 2 * 100e9 and ab.job_bytes_per_step == 2e9 * 2 / 2
    assert ab.steady_seconds == pytest.approx(ab.serialization_seconds + 2 * ab.round_trip_seconds)


TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def test_truth_shape_and_sums() -> None:
    s = scenario(
        [link(), link("ab2", buffer="shallow", lossless=False)],
        [
            {"kind": "congestion", "link": "ab", "start": "1s", "duration": "2s", "load": 1.4},
            {"kind": "congestion", "link": "ab2", "start": "2s", "duration": "2s", "load": 1.0},
            {"kind": "wave_down", "link": "ab", "wave": 1, "start": "4s", "duration": "1s"},
        ],
        clock_skew="2s",
    )
    f = Fabric(s)
    f.advance(6.0)
    truth = build_truth(s, f, f.job.completed, 1_800_000_000.0)
    again = Truth.model_validate_json(truth.model_dump_json())
    assert again == truth
    assert len(truth.steps) == len(f.job.completed) * s.ranks
    assert {(r.step, r.rank) for r in truth.steps} == {
        (k + 1, r) for k in range(len(f.job.completed)) for r in range(s.ranks)
    }
    for row in truth.steps:
        assert TIME.match(row.start_time) and TIME.match(row.end_time)
        n = row.network_seconds
        assert set(n.by_link) == {"ab", "ab2"}
        assert sum(n.by_link.values()) == pytest.approx(n.total, abs=1e-8)
        assert sum(n.by_cause.model_dump().values()) == pytest.approx(n.total, abs=1e-8)
    first = f.job.completed[0]
    assert truth.steps[0].start_time.startswith("2027-01-15T08:00:02.")  # 1.8e9 s + skew 2 s
    assert first.start_s == 0.0
    assert sum(r.network_seconds.by_link["ab"] for r in truth.steps) > 0
    assert sum(r.network_seconds.by_cause.lost_capacity for r in truth.steps) > 0
    kinds = {e.kind: e for e in truth.episodes}
    assert kinds["wave_down"].interfaces == ["dci-ab-a/Ethernet1/1", "dci-ab-b/Ethernet1/1"]
    assert kinds["wave_down"].components == ["dci-ab-a/OpticalChannel1/1", "dci-ab-b/OpticalChannel1/1"]
    assert truth.episodes[0].queues[0] == "dci-ab-a/Ethernet1/1/3" and truth.episodes[0].affects_job


def test_the_receive_stage_is_the_far_ingress_queue() -> None:
    incast = [{"kind": "incast", "link": "ab", "start": "0s", "duration": "3s", "fan_in": 16}]
    f = Fabric(scenario([link(buffer="deep", lossless=True)], incast, params="7e9"))
    f.advance(1.5)
    far = f.lay.block(0, 1)
    held = f.ingress_occupancy()
    assert held[far].sum() > 0 and held[f.lay.block(0, 0)].sum() == 0  # only the incast's end holds bytes
    assert np.all(f.ingress_watermark() >= held)
    snap = take(f, 0, 1.5)
    assert snap.gauges["ingress_occupancy"][1] == pytest.approx(held[far].tolist())
    pool_occupancy, _ = snap.pool[1]
    assert pool_occupancy >= int(held[far].sum())  # one buffer: the pool holds the receive stage too
    ingress = {
        tuple(n for n, _ in g.prefix): {path[0][0]: val.uint_val for path, val in g.leaves}
        for g in gnmi_tree.groups(snap, 1, 0)
        if any(n == "input" for n, _ in g.prefix) and g.prefix[2][1]["interface-id"] == "Ethernet1/1"
    }
    (leaves,) = ingress.values()
    assert leaves["instant-queue-len"] == int(held[far][0]) > 0
    assert leaves["max-queue-len"] >= leaves["instant-queue-len"]
