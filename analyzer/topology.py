"""What the collector's config tells the analysis: device labels (vendor, site...) and the links' fibre.

The archive carries no target labels and no ``dci_link_*`` series, so the vendor of a device and the
bandwidth-delay product of an interface come from the same YAML the collector ran with (``--config``).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from analyzer.thresholds import SharedThresholds
from collector import config as configuration
from collector.contracts.fibre import one_way_delay_s

SPEED = "dci_interface_speed_bytes_per_second"


def load_config(path: Path) -> configuration.Config:
    """Load and validate the collector config.

    Args:
        path: the YAML file.

    Returns:
        The validated config.

    Raises:
        collector.errors.ConfigError: the file is invalid (every problem with its location).
    """
    return configuration.load(path)


def device_labels(config: configuration.Config | None) -> pl.DataFrame:
    """One row per target: ``device`` plus one String column per static label any target has.

    Args:
        config: the collector config, or None.

    Returns:
        The table (only ``device`` when there is no config or no labels).
    """
    if config is None:
        return pl.DataFrame(schema={"device": pl.String()})
    names = sorted({key for target in config.targets for key in target.labels})
    rows = [{"device": t.name, **{k: t.labels.get(k) for k in names}} for t in config.targets]
    return pl.DataFrame(rows, schema={"device": pl.String(), **dict.fromkeys(names, pl.String())})


def link_members(config: configuration.Config | None) -> pl.DataFrame:
    """One row per link member interface with the link's round-trip fibre delay and optics profile.

    Args:
        config: the collector config, or None.

    Returns:
        Columns ``link``, ``device``, ``interface``, ``rtt_seconds``, ``optics``.
    """
    schema = {
        "link": pl.String(),
        "device": pl.String(),
        "interface": pl.String(),
        "rtt_seconds": pl.Float64(),
        "optics": pl.String(),
    }
    if config is None:
        return pl.DataFrame(schema=schema)
    rows = []
    for link in config.links:
        us_per_km = link.fibre_delay_us_per_km or config.defaults.fibre_delay_us_per_km
        rtt = 2 * one_way_delay_s(link.distance_km, us_per_km)
        rows += [
            {
                "link": link.name,
                "device": m.device,
                "interface": m.interface,
                "rtt_seconds": rtt,
                "optics": link.optics,
            }
            for m in link.members
        ]
    return pl.DataFrame(rows, schema=schema)


def link_optics(members: pl.DataFrame, thresholds: SharedThresholds) -> pl.LazyFrame:
    """The optical limits of each link's optics profile, with the thresholds file's overrides.

    Args:
        members: ``link_members`` output.
        thresholds: the analysis's thresholds.

    Returns:
        Columns ``link``, ``fec_limit_ber``, ``osnr_required_db``.
    """
    if "optics" not in members.columns:  # members built without a config's profiles: the default's
        members = members.with_columns(optics=pl.lit(None, pl.String()))
    links = members.select("link", "optics").unique().iter_rows()
    limits = [(link, *thresholds.optical_limits(profile)) for link, profile in links]
    schema = {"link": pl.String(), "fec_limit_ber": pl.Float64(), "osnr_required_db": pl.Float64()}
    return pl.LazyFrame(limits, schema=schema, orient="row")


def interface_bdp(signals: pl.LazyFrame, labels: pl.LazyFrame, members: pl.DataFrame) -> pl.LazyFrame:
    """Bandwidth-delay product per link member interface: its reported speed x the link's round trip.

    Args:
        signals: ``schemas.SIGNALS`` rows (the speed gauge is read from them).
        labels: ``schemas.SERIES`` rows.
        members: ``link_members`` output.

    Returns:
        Columns ``device``, ``interface``, ``bdp_bytes`` (members whose speed is never reported are absent).
    """
    per_series = (
        signals.filter(pl.col("metric") == SPEED).group_by("series").agg(speed=pl.col("value").median())
    )
    speeds = (
        per_series.join(labels, on="series").group_by("device", "interface").agg(pl.col("speed").median())
    )
    return (
        members.lazy()
        .join(speeds, on=["device", "interface"], how="inner")
        .select("device", "interface", bdp_bytes=pl.col("speed") * pl.col("rtt_seconds"))
    )


def place_unlinked(events: pl.DataFrame, members: pl.DataFrame) -> pl.DataFrame:
    """Give events on series without a link label (an optical-channel component, a device-wide reading)
    the link of their device, where the device is a member of exactly one link.

    Args:
        events: ``schemas.EVENTS`` rows.
        members: ``link_members`` output.

    Returns:
        The events, ``link`` filled where it is unambiguous.
    """
    unique = members.group_by("device").agg(pl.col("link").unique()).filter(pl.col("link").list.len() == 1)
    owner = unique.select("device", device_link=pl.col("link").list.first())
    filled = events.join(owner, on="device", how="left", maintain_order="left")
    return filled.with_columns(link=pl.coalesce("link", "device_link")).drop("device_link")
