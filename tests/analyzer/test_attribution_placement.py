"""Placement of interval lines' iterations (``analyzer.attribution.placement``)."""

from __future__ import annotations

from datetime import timedelta

import polars as pl
import pytest
from synthetic_fabric import T0

from analyzer.attribution import placement


def _interval(lo: float, hi: float, n: int, network: float, skew: float = 0.0) -> pl.DataFrame:
    """One interval line of ``n`` iterations on the host clock (``lo``, ``hi`` seconds after T0)."""
    return pl.DataFrame(
        {
            "rank": [0],
            "step": [n],
            "n": [n],
            "lo": [T0 + timedelta(seconds=lo + skew)],
            "hi": [T0 + timedelta(seconds=hi + skew)],
            "network": [network],
            "joint_gain": [1.0],
        }
    )


def _cells(spans: dict[str, tuple[float, float, float]]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A grid of 0.1 s cells from T0 (cell k covers [0.1 k, 0.1 (k + 1)) s) and each link's physics over
    its (start, end, seconds per step)."""
    grid = pl.DataFrame({"time": [T0 + timedelta(seconds=0.05 + 0.1 * k) for k in range(300)]})
    grid = grid.with_row_index("window").with_columns(pl.col("window").cast(pl.Int64))
    rows = [
        {"window": k, "link": link, "device": f"{link}-a", "cause": "queueing", "physics": level}
        for link, (a, b, level) in spans.items()
        for k in range(300)
        if a <= 0.1 * k + 1e-9 and 0.1 * (k + 1) <= b + 1e-9
    ]
    return pl.DataFrame(rows), grid


def _no_gains() -> pl.DataFrame:
    return pl.DataFrame(schema={"rank": pl.Int64, "line": pl.Int64, "link": pl.String, "gain": pl.Float64})


def _seconds(times: pl.Series) -> list[float]:
    return [round((t - T0).total_seconds(), 3) for t in times]


def test_a_stall_inside_an_interval_is_one_iterations_and_pushes_the_rest_later() -> None:
    # Ten iterations of 1 s work took 12 s: the physics says the network stalled everything from 4.5 s to
    # 6.5 s. The fifth iteration (4 s to 7 s) holds the whole stall; the later ones start 2 s later.
    cells, grid = _cells({"l": (4.5, 6.5, 0.05)})
    iterations, links = placement.place(_interval(0.0, 12.0, 10, 2.0), cells, grid, _no_gains(), 0.0, 1.0)
    iterations = iterations.sort("step")
    assert iterations["step"].to_list() == list(range(1, 11))
    assert _seconds(iterations["lo"]) == [0, 1, 2, 3, 4, 7, 8, 9, 10, 11]
    assert _seconds(iterations["hi"]) == [1, 2, 3, 4, 7, 8, 9, 10, 11, 12]
    assert iterations["weight"].to_list() == pytest.approx([0.0] * 4 + [1.0] + [0.0] * 5, abs=1e-9)
    assert links["step"].to_list() == [5]
    assert links["share"].item() > 0


def test_a_stall_opening_just_after_an_iteration_ended_is_that_iterations() -> None:
    # The same 2 s stall read from 4.1 s: it opens a tenth into the fifth iteration, where a stall centred on
    # its readings opens only when its reading came late (it opens, on average, three quarters into the
    # iteration it held). The fourth iteration, whose work ended at 4 s and whose collective it held, takes
    # it; the fifth's work (0.1 s before the stall, 0.9 s after) runs from 6.1 s to 7 s.
    cells, grid = _cells({"l": (4.1, 6.1, 0.05)})
    iterations, _ = placement.place(_interval(0.0, 12.0, 10, 2.0), cells, grid, _no_gains(), 0.0, 1.0)
    iterations = iterations.sort("step")
    assert _seconds(iterations["lo"]) == [0, 1, 2, 3, 6.1, 7, 8, 9, 10, 11]
    assert iterations["weight"].to_list() == pytest.approx([0.0] * 3 + [1.0] + [0.0] * 6, abs=1e-9)


def test_placement_is_on_the_switch_clock_through_the_skew() -> None:
    # The same stall with the hosts 2 s ahead of the switches: the same iteration holds it.
    cells, grid = _cells({"l": (4.5, 6.5, 0.05)})
    iterations, _ = placement.place(
        _interval(0.0, 12.0, 10, 2.0, skew=2.0), cells, grid, _no_gains(), 2.0, 1.0
    )
    weights = iterations.sort("step")["weight"].to_list()
    assert weights == pytest.approx([0.0] * 4 + [1.0] + [0.0] * 5, abs=1e-9)


def test_congestion_over_part_of_an_interval_slows_the_iterations_it_covers() -> None:
    # Congestion from 5 s to the end of a 10-iteration line of 12 s (2 s of network time): the iterations
    # before it keep their 1 s of work; those under it share the 2 s in proportion to their time under it.
    cells, grid = _cells({"l": (5.0, 12.0, 0.02)})
    iterations, _ = placement.place(_interval(0.0, 12.0, 10, 2.0), cells, grid, _no_gains(), 0.0, 1.0)
    iterations = iterations.sort("step")
    assert _seconds(iterations["lo"])[:6] == [0, 1, 2, 3, 4, 5]
    weights = iterations["weight"].to_list()
    assert weights[:5] == pytest.approx([0.0] * 5, abs=1e-9)
    assert weights[5:] == pytest.approx([0.2] * 5)  # 2/7 of each 1.4 s iteration: 0.4 s of 2 s
    assert _seconds(iterations["hi"])[5:] == pytest.approx([6.4, 7.8, 9.2, 10.6, 12.0], abs=2e-3)


def test_links_share_each_moment_as_the_airport_game() -> None:
    # Two links slow the same second: the slower one decides, the first 10 ms shared by both.
    cells, grid = _cells({"a": (4.0, 5.0, 0.03), "b": (4.0, 5.0, 0.01)})
    _, links = placement.place(_interval(0.0, 12.0, 10, 2.0), cells, grid, _no_gains(), 0.0, 1.0)
    per_link = links.group_by("link").agg(pl.col("share").sum())
    shares = dict(per_link.iter_rows())
    assert shares["b"] / (shares["a"] + shares["b"]) == pytest.approx(0.005 / 0.03)


def test_an_interval_without_physics_is_spread_evenly() -> None:
    cells, grid = _cells({"l": (20.0, 22.0, 0.05)})  # outside the line
    iterations, links = placement.place(_interval(0.0, 12.0, 10, 1.0), cells, grid, _no_gains(), 0.0, 1.0)
    iterations = iterations.sort("step")
    assert iterations["weight"].to_list() == pytest.approx([0.1] * 10)
    assert _seconds(iterations["lo"]) == pytest.approx([1.2 * i for i in range(10)], abs=2e-3)
    assert links.is_empty()


def test_a_smeared_stall_is_sharpened_into_one_block_and_congestion_keeps_its_density() -> None:
    # 0.1 s pieces. A 1 s stall smeared by 1 s counters reads 0.5 over 2 s (1 s of network time in 2 s:
    # a stall) and becomes 1 s of g = 1 centred on it; 0.2 over 2 s is congestion and stays.
    a = [i / 10 for i in range(40)]
    smeared = [0.0] * 10 + [0.5] * 20 + [0.0] * 10
    slow = [0.0] * 10 + [0.2] * 20 + [0.0] * 10
    frame = pl.DataFrame({"rank": [0] * 80, "line": [1] * 40 + [2] * 40, "k": list(range(40)) * 2})
    frame = frame.with_columns(a=pl.Series(a * 2), b=pl.Series([x + 0.1 for x in a] * 2))
    frame = frame.with_columns(g=pl.Series(smeared + slow))
    out = placement.stalls(frame, ["rank", "line"], poll=1.0)
    stall = out.filter(pl.col("line") == 1)["g"].to_list()
    assert stall == [0.0] * 15 + [1.0] * 10 + [0.0] * 15
    assert out.filter(pl.col("line") == 2)["g"].to_list() == slow


def test_a_run_that_does_not_hold_the_network_a_poll_in_from_its_ends_keeps_its_density() -> None:
    # 0.5 s pieces, 1 s polls. Congestion taking 0.7 of the time over two 4 s lines still reads 0.7 a poll
    # in from its ends, under the 1 / 1.25 of the time a stall would (1.25: the physics' error), so every
    # iteration it spans keeps its share, though each line alone (4 s, 2.8 s) could be one stall. A 6 s
    # stall read at 0.9 between two smeared polls stays one; so does 0.7 for 1 s alone.
    lines = [1] * 8 + [2] * 8 + [3] * 20 + [4] * 10
    g = [0.7] * 16 + [0.0] * 2 + [0.5] * 2 + [0.9] * 12 + [0.5] * 2 + [0.0] * 6 + [0.7] * 2 + [0.0] * 4
    a = [i / 2 for i in range(46)]
    frame = pl.DataFrame({"rank": [0] * 46, "line": lines, "k": list(range(46)), "a": a})
    frame = frame.with_columns(b=pl.col("a") + 0.5, g=pl.Series(g))
    out = placement.stalls(frame, ["rank", "line"], poll=1.0)["g"].to_list()
    assert out[:16] == [0.7] * 16
    assert out[16:36] == [0.0] * 4 + [1.0] * 12 + [0.0] * 4  # its 6.4 s of network time, centred
    assert out[36:] == [0.0] * 4 + [1.0] * 2 + [0.0] * 4


def test_an_episodes_smeared_first_reading_is_its_level_over_the_readings_last_part() -> None:
    # A poll that caught the last 0.2 s of a 1 s interval reads a fifth of the plateau over all of it;
    # sharpened, the plateau's level holds over that interval's last 0.2 s and nothing before.
    a = [i / 10 for i in range(30)]
    g = [0.0] * 5 + [0.05] * 10 + [0.25] * 10 + [0.0] * 5
    frame = pl.DataFrame({"rank": [0] * 30, "line": [1] * 30, "k": list(range(30)), "a": a})
    frame = frame.with_columns(b=pl.col("a") + 0.1, g=pl.Series(g))
    out = placement.edges(frame, ["rank", "line"])["g"].to_list()
    assert out == pytest.approx([0.0] * 13 + [0.25] * 12 + [0.0] * 5)
