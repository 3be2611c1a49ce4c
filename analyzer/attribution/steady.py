"""Step 2, the steady cost: what a clean network costs each step per link (round trips and serialization of
the job's bytes at the link's capacity), and the job's bytes per link it rests on."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from analyzer.attribution.rules import JOB_LINK_SHARE, MAD_TO_SIGMA, STEADY_ROUND_TRIPS

# The step's formula (``docs/method.md``; the capitals are ``rules``).
FORMULA = """\
bytes(link)  = job bytes per step * rate(link) / sum rate      (0 below JOB_LINK_SHARE)
rate(link)   = the mean over its ends of the median rate per window; a job sending in fewer than half
               of the windows: the smaller of its ends' mean rates over the run (their mean where that
               is 0 on every link)
steady(link) = bytes(link) / capacity(link) + STEADY_ROUND_TRIPS * rtt(link)
slack(link)  = max over the job's links of steady - steady(link)
"""


@dataclass(frozen=True)
class JobFigures:
    """What the analysis knows of the job.

    Attributes:
        bytes_per_step: the job's cross-site bytes per step and direction, all links (None: measured).
        traffic_class: the job's traffic class (None: no queue can be read).
    """

    bytes_per_step: float | None = None
    traffic_class: str | None = None


def steady(
    members: pl.DataFrame,
    ends: pl.DataFrame,
    round_trips: pl.DataFrame,
    bytes_per_step: pl.DataFrame,
) -> pl.DataFrame:
    """Per link the clean network's cost: round trip (probes, else fibre) and serialization of the job's
    bytes per step at the link's capacity (the smaller end's summed member speeds).

    Args:
        members: ``topology.link_members`` output (``rtt_seconds`` from the fibre).
        ends: ``physics.MEMBERS`` rows.
        round_trips: ``link``, ``rtt_seconds`` from the probes.
        bytes_per_step: ``link``, ``bytes`` (the job's bytes per step and direction on the link).

    Returns:
        ``link``, ``round_trip_seconds``, ``serialization_seconds``, ``capacity``, ``bytes``.
    """
    fibre = members.group_by("link").agg(fibre=pl.col("rtt_seconds").first())
    capacity = ends.group_by("link").agg(capacity=pl.col("capacity").min())
    probes = round_trips.select("link", probe="rtt_seconds")
    links = pl.concat([fibre.select("link"), capacity.select("link")]).unique()
    table = (
        links.join(fibre, on="link", how="left")
        .join(probes, on="link", how="left")
        .join(capacity, on="link", how="left")
        .join(bytes_per_step, on="link", how="left")
    )
    # No job-class counters anywhere and no declared bytes: the job's bytes per link are unknown (null),
    # and every link may be the job's; with some known, a link without any carries none of them.
    known = bytes_per_step.height > 0
    amount = pl.col("bytes").fill_null(0.0) if known else pl.col("bytes")
    serialization = pl.when(pl.col("capacity") > 0).then(amount / pl.col("capacity"))
    return table.select(
        "link",
        round_trip_seconds=pl.coalesce("probe", "fibre"),
        serialization_seconds=serialization,
        capacity="capacity",
        bytes=amount,
    ).sort("link")


def job_rates(amounts: pl.DataFrame) -> pl.DataFrame:
    """Per link end the job class's typical transmit rate (median over the steps' windows): the job's own
    traffic, since other traffic in its class comes in episodes; and how much that rate varies from window
    to window (``rate_noise``: the MAD as a standard deviation), as step times drift and windows cut steps
    unevenly. Also its mean rate over the run (``mean_rate``), for a job that sends in fewer than half of
    the windows (``link_bytes``), and its typical rate and noise over the windows it sends in
    (``sending_rate``, ``sending_noise``): such a job's own bursts (``episode.with_job_rates``)."""
    rate = pl.col("sent") / pl.col("seconds")
    noise = (rate - rate.median()).abs().median() * MAD_TO_SIGMA
    mean = pl.col("sent").sum() / pl.col("seconds").sum()
    sending = rate.filter(rate > 0)
    sending_noise = (sending - sending.median()).abs().median() * MAD_TO_SIGMA
    return amounts.group_by("link", "device").agg(
        base_rate=rate.median(),
        rate_noise=noise,
        mean_rate=mean,
        sending_rate=sending.median(),
        sending_noise=sending_noise,
    )


def sends_sparsely(rates: pl.DataFrame) -> bool:
    """Whether the job sends in fewer than half of the windows (DiLoCo syncing every N steps): its class
    carries bytes over the run (``mean_rate``) but has no typical rate (``base_rate``, a median over the
    windows) on any link end.

    Args:
        rates: ``job_rates`` of every link end.
    """
    sent = float(rates["mean_rate"].fill_nan(None).fill_null(0.0).sum())
    return sent > 0 and not float(rates["base_rate"].fill_nan(None).fill_null(0.0).sum()) > 0


def link_bytes(rates: pl.DataFrame, job: JobFigures, step_seconds: float) -> pl.DataFrame:
    """The job's bytes per step and direction per link: its total spread as the job class's typical rates
    spread (ECMP by flow), or, without a declared total, the rate times the median step. A job that sends
    in fewer than half of the windows (DiLoCo syncing every N steps) has no typical rate anywhere: its mean
    rates over the run spread it then (its bytes per sync where the total is declared per sync), the
    smaller of a link's two directions: over a whole run another tenant's load in the class weighs as much
    as the job's few exchanges, and an exchange (an all-reduce over several channels) crosses each link
    both ways where a tenant's load need not. Where no link carries the class both ways, the job did not
    exchange in the run (DiLoCo syncing less often than the run is long) and what the class carried is
    another tenant's: nothing in the run tells the job's links apart, and its flows, hashed over them
    (ECMP), spread a declared total evenly; without one its bytes are unknown."""
    per_link = rates.group_by("link").agg(rate=pl.col("base_rate").mean(), both=pl.col("mean_rate").min())
    if not float(per_link["rate"].sum()) > 0:  # no typical rate: what both directions carry
        per_link = per_link.with_columns(rate=pl.col("both").fill_nan(None).fill_null(0.0))
    if not float(per_link["rate"].sum()) > 0 and job.bytes_per_step:  # no exchange: evenly
        per_link = per_link.with_columns(rate=pl.lit(1.0))
    if not float(per_link["rate"].sum()) > 0:  # no job-class counters, or no exchange: unknown
        return per_link.clear().select("link", bytes=pl.col("rate"))
    share = pl.col("rate") / pl.col("rate").sum()
    total = pl.lit(job.bytes_per_step) * share if job.bytes_per_step else pl.col("rate") * step_seconds
    out = per_link.with_columns(share=share).select(
        "link", bytes=pl.when(share >= JOB_LINK_SHARE).then(total)
    )
    return out.with_columns(pl.col("bytes").fill_null(0.0))


def slack(links: pl.DataFrame) -> pl.DataFrame:
    """Per link of the job, how much sooner than the slowest of them it ends a clean step: a collective
    spread over parallel links ends with its slowest, so time a link adds costs the step only past its
    slack (the airport game then shares what is left). None is known where a job link's steady figure is
    not (the job's bytes unknown): every slack 0 then.

    Args:
        links: ``steady`` output.

    Returns:
        ``link``, ``slack`` (seconds per step).
    """
    own = links.filter(pl.col("bytes").is_null() | (pl.col("bytes") > 0)).select(
        "link",
        steady=pl.col("serialization_seconds")
        + STEADY_ROUND_TRIPS * pl.col("round_trip_seconds").fill_null(0.0),
    )
    if own.is_empty() or own["steady"].null_count():
        return own.select("link", slack=pl.lit(0.0))
    return own.select("link", slack=pl.col("steady").max() - pl.col("steady"))


def steady_seconds(links: pl.DataFrame) -> float | None:
    """The run's steady cost per step: the slowest link's serialization plus ``STEADY_ROUND_TRIPS`` round
    trips (None when no link has one).

    Args:
        links: ``steady`` output.
    """
    path = links.select(
        "link",
        steady=pl.col("serialization_seconds").fill_null(0.0)
        + STEADY_ROUND_TRIPS * pl.col("round_trip_seconds").fill_null(0.0),
    ).filter(pl.col("steady") > 0)
    return path["steady"].max() if path.height else None  # type: ignore[return-value]
