"""Step 3, the episode cost per link from physics, for the job's traffic class: all the physics in one room
(queueing, loss recovery, pause, lost capacity, reroute), per cell of a regular grid over the telemetry."""

from __future__ import annotations

import polars as pl

from analyzer import physics
from analyzer.attribution.rules import (
    FRAME_BYTES,
    GRID_POINTS,
    MIN_SHARE,
    NOISE_SHARE,
    OTHER_SHARE,
    PHYSICS_FLOOR_SECONDS,
    RATE_NOISE_SIGMAS,
    SKEW_RESOLUTION_SECONDS,
)

# The step's formula (``docs/method.md``; the capitals are ``rules``).
FORMULA = """\
cap_up        = max(capacity * (1 - max(down, slow) / observed), MIN_SHARE * capacity)
avail         = max(cap_up - other traffic in the class, MIN_SHARE * cap_up)
lost_capacity = bytes * (1 / cap_up - 1 / capacity);  0 where cap_up > MIN_SHARE * capacity and no byte of the
                class crossed the end within a poll (the job sent nothing there)
queueing      = bytes * (1 / avail - 1 / cap_up) + ingress / s / capacity + queued / s / max(sent / s, MIN_SHARE * capacity)
pause         = bytes * (1 / (avail * (1 - f)) - 1 / avail),  f = min((paused + held) / (interfaces * s), 1 - MIN_SHARE)
loss_recovery = rtt + lost / avail,  lost = (max(dropped, dropped_frames * FRAME_BYTES) + (fcs + discarded) * FRAME_BYTES) / s * step
physics(link) = the slower direction's sum of the four;  0 under PHYSICS_FLOOR_SECONDS
(other traffic: the class's rate beyond the job's own, its median rate, or a sparse sender's rate when it
sends; a cause counts only past OTHER_SHARE of the capacity and RATE_NOISE_SIGMAS of the job's rate noise, at
most NOISE_SHARE; the job's bytes moved off a downed link are its reroute, within NOISE_SHARE of the capacity)
sparse sender : physics only in the runs of a link's consecutive caused cells that hold one where the class
                crossed the link both ways within a poll (an exchange; grid.exchanging)
"""


def grid_windows(totals: pl.DataFrame, points: int = GRID_POINTS) -> pl.DataFrame:
    """Windows centred on a regular grid over the telemetry (for the skew search and the job's rates)."""
    if totals.is_empty():
        return pl.DataFrame(
            schema={
                "window": pl.Int64(),
                "time": physics.READINGS["time"],
                "lo": physics.READINGS["time"],
                "hi": physics.READINGS["time"],
            }
        )
    first, last = totals.select(
        first=pl.col("time").dt.epoch("us").min(), last=pl.col("time").dt.epoch("us").max()
    ).row(0)
    step_us = max(int(SKEW_RESOLUTION_SECONDS * 1e6), (int(last) - int(first)) // points)
    centres = pl.int_range(int(first), int(last) + 1, step_us, eager=True)
    half = pl.duration(microseconds=int(step_us / 2))
    frame = pl.DataFrame({"time": pl.from_epoch(centres, "us").dt.replace_time_zone("UTC")})
    return frame.with_row_index("window").select(
        pl.col("window").cast(pl.Int64), "time", lo=pl.col("time") - half, hi=pl.col("time") + half
    )


def poll_seconds(readings: pl.DataFrame) -> float:
    """The usual time between two readings of one quantity of one link end (1 s when unknown): the median
    interval of the readings that add something. Only those and their neighbours are kept
    (``physics.readings``), so such a reading's predecessor is the one before it in its series and the gap
    is its poll; a gap between two kept readings that quiet ones separated (a job syncing once a minute, a
    status that never changed) is no poll. With no reading adding anything, the median over every two
    consecutive readings."""
    # An end's members read at one time are one reading (as ``physics.running_totals`` sums them): the order
    # of equal times would otherwise decide which of them carries the gap.
    at = ["link", "device", "quantity", "time"]
    gaps = (
        readings.group_by(at)
        .agg(pl.col("amount").sum())
        .sort(at)
        .with_columns(
            gap=pl.col("time").diff().over("link", "device", "quantity").dt.total_microseconds() / 1e6
        )
        .filter(pl.col("gap") > 0)
    )
    adding = gaps.filter(pl.col("amount") > 0)["gap"].median()
    gap = adding if adding is not None else gaps["gap"].median()
    return float(gap) if isinstance(gap, (int, float)) and gap > 0 else 1.0


CAUSES = ["lost_capacity", "queueing", "pause", "loss_recovery"]


def step_physics(
    windows: pl.DataFrame, amounts: pl.DataFrame, ends: pl.DataFrame, links: pl.DataFrame, ahead: int = 0
) -> pl.DataFrame:
    """The physical estimate of what each link added to each step window, by cause.

    Args:
        windows: ``window``, ``seconds_step`` (the step's own length).
        amounts: ``physics.window_amounts`` over the widened windows, with ``job_rates`` joined.
        ends: ``physics.MEMBERS`` rows.
        links: ``steady`` output (``bytes``, null when unknown; ``round_trip_seconds``).
        ahead: windows in one poll interval (``rerouted``).

    Returns:
        ``window``, ``link``, ``device`` (the end that decided), ``physics`` (seconds), ``cause``.
    """
    kept, down = with_a_cause(amounts, ends, ahead)
    return physics_of(windows, kept, down, ends, links)


def with_a_cause(
    amounts: pl.DataFrame, ends: pl.DataFrame, ahead: int = 0
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """What ``physics_of`` needs of some link ends' amounts (whole links: a link's ends are read together):
    the windows holding a cause (``has_a_cause``, with ``capacity``), and the windows a link counts as down
    (``down_windows``). Both are a few rows of the grid, so the grid's amounts can be read a few links at a
    time (``analyzer.attribution.grid``)."""
    capacity = ends.select("link", "device", "capacity")
    # Whether any byte of the job's class crossed the end within a poll of the cell (a counter's increase is
    # spread over its interval): where none did, the job had nothing on the link for a wave down to slow.
    near = pl.col("sent").rolling_max(2 * ahead + 1, center=True, min_samples=1)
    amounts = amounts.with_columns(crossed=near.over("link", "device", order_by="window") > 0)
    # How many of the link's ends the class crossed within a poll: at every end, the job exchanged over it
    # (an all-reduce crosses each link both ways, where another tenant's load need not: ``grid_physics``).
    amounts = amounts.with_columns(crossing=pl.col("crossed").sum().over("link", "window"))
    # Most cells of most ends hold nothing: they leave before the join (a test without the capacity that
    # every cause passes).
    candidates = amounts.filter(may_hold_a_cause()).join(capacity, on=["link", "device"])
    of_link = ends.group_by("link").agg(link_ends=pl.col("device").n_unique())
    kept = candidates.filter(has_a_cause().fill_null(False)).join(of_link, on="link", how="left")
    exchanged = pl.col("crossing") >= pl.col("link_ends")
    return kept.with_columns(exchanged=exchanged).drop("crossing", "link_ends"), down_windows(amounts, ahead)


def physics_of(
    windows: pl.DataFrame, kept: pl.DataFrame, down: pl.DataFrame, ends: pl.DataFrame, links: pl.DataFrame
) -> pl.DataFrame:
    """``step_physics`` from ``with_a_cause``' two parts (of every link: concatenated over chunks)."""
    caused = kept.drop("capacity")
    # Pauses this end sent are to its own hosts (they hold the job's bytes back) and over the wave (the
    # far end's "paused"): what it sent less what the far end received is what its hosts were held.
    far = pl.col("paused").sum().over("window", "link") - pl.col("paused")
    caused = caused.with_columns(held=(pl.col("pausing") - far).clip(lower_bound=0.0))
    rows = (
        caused.join(ends, on=["link", "device"], how="inner")
        .join(links.select("link", "bytes", rtt="round_trip_seconds"), on="link")
        .join(windows.select("window", "seconds_step"), on="window")
        .filter(pl.col("bytes").is_null() | (pl.col("bytes") > 0))
        .with_columns(known=pl.col("bytes").is_not_null(), bytes=pl.col("bytes").fill_null(0.0))
    )
    per_end = per_step_and_second(causes(rows))
    per_end = moved_by_reroute(per_end, kept, down)
    # The two directions of a link run in parallel: the slower one decides.
    return (
        per_end.sort("physics", descending=True)
        .group_by("window", "link")
        .agg(pl.all().exclude("window", "link").first())
    )


def other_traffic() -> pl.Expr:
    """The rate in the job's class beyond the job's own (``own_rate``: ``with_job_rates``)."""
    return pl.col("sent") / pl.col("seconds") - pl.col("own_rate")


def may_hold_a_cause() -> pl.Expr:
    """``has_a_cause`` without the capacity: true wherever it is (other traffic past a share of a capacity,
    which is never negative, is past 0)."""
    other_rate = other_traffic()
    return (other_rate > 0) | held_or_lost()


def held_or_lost() -> pl.Expr:
    """Whether a window of a link end holds a cause other than other traffic."""
    return (pl.col("down") + pl.col("slow") + pl.col("ingress") + pl.col("queued") > 0) | (
        pl.col("paused")
        + pl.col("pausing")
        + pl.col("dropped")
        + pl.col("dropped_frames")
        + pl.col("fcs")
        + pl.col("discarded")
        > 0
    )


def any_down(amounts: pl.DataFrame) -> bool:
    """Whether any link end read a member down in the run."""
    most = amounts["down"].max()
    return isinstance(most, (int, float)) and most > 0


def has_a_cause() -> pl.Expr:
    """Whether a window of a link end holds any cause.

    Most windows of most ends hold nothing: only those with a cause go on (other traffic past 1 % of the
    capacity adds under 1 % of the serialization, below any step's noise). Other traffic is also only what
    lies beyond the job's own rate noise: where the job's rate is a large share of the capacity (the lab's
    links), its window-to-window variation is several % of the capacity and is not other traffic.
    """
    other_rate = other_traffic()
    return (
        other_rate
        > pl.max_horizontal(
            OTHER_SHARE * pl.col("capacity"),
            pl.min_horizontal(RATE_NOISE_SIGMAS * pl.col("rate_noise"), NOISE_SHARE * pl.col("capacity")),
        )
    ) | held_or_lost()


def capacity_up() -> pl.Expr:
    """The capacity left while members are down or slow (a member down may also read speed 0: the larger
    of the two losses, not their sum), at least ``MIN_SHARE`` of it."""
    observed = pl.col("interfaces") * pl.col("covered")
    lost_slots = pl.max_horizontal("down", "slow")
    up = pl.when(observed > 0).then((1 - lost_slots / observed).clip(0.0, 1.0)).otherwise(1.0)
    return (pl.col("capacity") * up).clip(lower_bound=pl.col("capacity") * MIN_SHARE)


def available() -> pl.Expr:
    """The capacity left to the job: what is up less other traffic in its class, at least ``MIN_SHARE``."""
    other = other_traffic().clip(lower_bound=0.0)
    return pl.max_horizontal(pl.col("cap_up") - other, pl.col("cap_up") * MIN_SHARE)


def lost_bytes() -> pl.Expr:
    """Bytes lost per step: dropped bytes where counted, else dropped packets as frames (never both: the
    same drops), plus the frames lost on receipt (bad FCS, discarded by the receiving port)."""
    dropped = pl.max_horizontal(pl.col("dropped"), pl.col("dropped_frames") * FRAME_BYTES)
    on_receipt = (pl.col("fcs") + pl.col("discarded")) * FRAME_BYTES
    return (dropped + on_receipt) / pl.col("seconds") * pl.col("seconds_step")


def lost_capacity() -> pl.Expr:
    """A wave down or a slower port: the job's bytes at the capacity left instead of the whole. With the
    job's bytes unknown, a wave down is read as the share of the step its waves carried. Where waves were
    up and no byte of the job's class crossed them within a poll (``crossed``: a job syncing every N steps,
    between its syncs), the job sent nothing there, and the capacity lost slowed nothing of it."""
    idle = ~pl.col("crossed") & (pl.col("cap_up") > MIN_SHARE * pl.col("capacity"))
    return (
        pl.when(idle)
        .then(0.0)
        .when(pl.col("known"))
        .then(pl.col("bytes") * (1 / pl.col("cap_up") - 1 / pl.col("capacity")))
        .otherwise((1 - pl.col("cap_up") / pl.col("capacity")) * pl.col("seconds_step"))
    )


def queueing() -> pl.Expr:
    """Other traffic in the class takes capacity, the far end holds the class in its ingress queue, or a
    queue stands in its egress.

    The job's bytes the far end holds in its ingress queue reach its hosts that much later: the bytes held
    over their drain rate. That rate (the far hosts' share of their port) is not in the telemetry: the end's
    line rate stands for it, and the link's measured gain scales the result. A standing egress queue
    (``physics.readings``' ``queued``, beyond the job's own usual one): its bytes over the rate the class
    drained them (Little's law; the class's sent rate while it holds a queue), at least the floor share of
    the port. Once per traversal: how many the job's collective makes is the link's gain.
    """
    ingress_delay = pl.col("ingress") / pl.col("seconds") / pl.col("capacity")
    drain = pl.max_horizontal(pl.col("sent") / pl.col("seconds"), MIN_SHARE * pl.col("capacity"))
    egress_delay = pl.col("queued") / pl.col("seconds") / drain
    return pl.col("bytes") * (1 / available() - 1 / pl.col("cap_up")) + ingress_delay + egress_delay


def pause() -> pl.Expr:
    """Paused a share f of the time, the job's bytes go at (1 - f) of what is available: the cost is per
    step (the step's bytes), whatever the step's length. Unknown bytes: f of the step."""
    slots = pl.col("interfaces") * pl.col("seconds")
    paused_share = ((pl.col("paused") + pl.col("held")) / slots).clip(0.0, 1 - MIN_SHARE)
    avail = available()
    return (
        pl.when(pl.col("known"))
        .then(pl.col("bytes") * (1 / (avail * (1 - paused_share)) - 1 / avail))
        .otherwise(paused_share * pl.col("seconds_step"))
    )


def loss_recovery() -> pl.Expr:
    """About one round trip per loss event (the retransmission request and the resent bytes), plus sending
    the lost bytes again."""
    lost = lost_bytes()
    return pl.when(lost > 0).then(pl.col("rtt").fill_null(0.0) + lost / available()).otherwise(0.0)


def causes(rows: pl.DataFrame) -> pl.DataFrame:
    """Each cause's seconds per window of each end (``CAUSES`` columns)."""
    return rows.with_columns(cap_up=capacity_up()).with_columns(
        lost_capacity=lost_capacity(), queueing=queueing(), pause=pause(), loss_recovery=loss_recovery()
    )


def per_step_and_second(costs: pl.DataFrame) -> pl.DataFrame:
    """A window's total, its cause (the largest), and its split into what a step pays once (the job's bytes
    of one step, one round trip per loss event) and per second of the step (resending lost bytes): a
    step's estimate is the first plus the second x its length."""
    total = pl.sum_horizontal(CAUSES)
    cause = pl.concat_list(CAUSES).list.arg_max()
    lost = lost_bytes()
    per_step = (
        pl.col("lost_capacity")
        + pl.col("queueing")
        + pl.when(pl.col("known")).then(pl.col("pause")).otherwise(0.0)
        + pl.when(lost > 0).then(pl.col("rtt").fill_null(0.0)).otherwise(0.0)
    )
    return costs.select(
        "window",
        "link",
        "device",
        physics=total,
        per_step=per_step,
        per_second=((total - per_step) / pl.col("seconds_step")).fill_nan(0.0),
        cause=pl.when(total > 0).then(cause.replace_strict(dict(enumerate(CAUSES)), return_dtype=pl.String)),
    )


def rerouted(per_end: pl.DataFrame, amounts: pl.DataFrame, ahead: int = 0) -> pl.DataFrame:
    """A link down sends the job's bytes it carried over the others: what another link's end gains in the
    job's class while one is down, up to what the downed link no longer carries, is the job's own traffic
    moved, not other traffic, and the queueing it causes is the downed link's (``reroute``).

    Args:
        per_end: ``window``, ``link``, ``device``, ``physics``, ``cause`` (and the rest of a cell).
        amounts: ``window_amounts`` rows with ``base_rate`` and ``capacity``, every window of every end.
        ahead: windows in one poll interval: a status reading says a port is down once it is, up to a poll
            after its traffic moved, so a link counts as down that much before it reads down.
    """
    return moved_by_reroute(per_end, amounts, down_windows(amounts, ahead))


def down_windows(amounts: pl.DataFrame, ahead: int = 0) -> pl.DataFrame:
    """The windows each end counts as down (``rerouted``'s ``ahead``), with the job's rate it no longer
    carries: ``window``, ``link``, ``missing``; no row when no link is down in the run."""
    if not any_down(amounts):  # no link down: no sort of the whole grid
        return amounts.clear().select("window", "link", missing=pl.lit(0.0))
    rate = pl.col("sent") / pl.col("seconds")
    soon = pl.col("down").reverse().rolling_max(ahead + 1, min_samples=1).reverse().over("link", "device")
    return (
        amounts.sort("window")
        .filter(soon > 0)
        .select("window", "link", missing=(pl.col("base_rate") - rate).clip(lower_bound=0.0))
    )


def moved_by_reroute(per_end: pl.DataFrame, amounts: pl.DataFrame, down: pl.DataFrame) -> pl.DataFrame:
    """``rerouted`` from ``down_windows`` of every link; ``amounts`` needs the rows of ``per_end``'s cells
    only (``sent``, ``seconds``, ``base_rate``, ``capacity``)."""
    if down.is_empty():  # no link down in the run
        return per_end
    down = down.group_by("window").agg(
        pl.col("missing").sum(), to=pl.col("link").sort_by("missing", descending=True).first()
    )
    rate = pl.col("sent") / pl.col("seconds")
    # The job's rate strays from its median (the downed link's median holds the run's slow episodes too):
    # up to NOISE_SHARE of the gaining end's capacity more than went missing is still the job's.
    gained = amounts.select(
        "window", "link", "device", gained=rate - pl.col("base_rate"), slack=NOISE_SHARE * pl.col("capacity")
    )
    moved = (
        (pl.col("cause") == "queueing")
        & (pl.col("link") != pl.col("to"))
        & (pl.col("gained") > 0)
        & (pl.col("gained") <= pl.col("missing") + pl.col("slack"))
    ).fill_null(False)
    return (
        per_end.join(gained, on=["window", "link", "device"], how="left")
        .join(down, on="window", how="left")
        .with_columns(
            link=pl.when(moved).then("to").otherwise("link"),
            cause=pl.when(moved).then(pl.lit("reroute")).otherwise("cause"),
        )
        .select(per_end.columns)
    )


def floor(per_link: pl.DataFrame) -> pl.DataFrame:
    """Estimates under ``PHYSICS_FLOOR_SECONDS`` are no cause."""
    real = pl.col("physics") >= PHYSICS_FLOOR_SECONDS
    return per_link.with_columns(
        physics=pl.when(real).then(pl.col("physics")).otherwise(0.0),
        cause=pl.when(real).then(pl.col("cause")),
    )


def read_grid(readings: pl.DataFrame, median_step: float) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The telemetry's regular grid (``grid_windows``, each cell read as a typical step: ``seconds_step``)
    and the running totals it is read from (``physics.running_totals``; ``analyzer.attribution.grid`` reads
    their amounts per cell a few links at a time)."""
    totals = physics.running_totals(readings.lazy()).collect()
    grid = grid_windows(totals)
    return grid.with_columns(seconds_step=pl.lit(median_step)), totals


def with_job_rates(amounts: pl.DataFrame, rates: pl.DataFrame) -> pl.DataFrame:
    """``read_grid``'s amounts with each end's job-class rate and its noise (``steady.job_rates``; 0 where
    the end has none), and its own rate against which other traffic is read (``own_rate``: the same, or a
    sparse sender's rate when it sends)."""
    # A job that sends in fewer than half of the windows (DiLoCo's syncs) has no median rate: its own rate
    # is then its rate when it sends, so its own bursts are never read as other traffic in its class.
    sparse = pl.col("base_rate").fill_null(0.0) <= 0
    rates = rates.select(
        "link",
        "device",
        "base_rate",
        own_rate=pl.when(sparse).then("sending_rate").otherwise("base_rate"),
        rate_noise=pl.when(sparse).then("sending_noise").otherwise("rate_noise"),
    )
    return amounts.join(rates, on=["link", "device"], how="left").with_columns(
        pl.col("base_rate", "own_rate", "rate_noise").fill_null(0.0)
    )
