"""The link model: what the config's inter-DC links imply (fibre delay, capacity, bandwidth-delay product,
the limits of their optics profile).

A link lists its member interfaces, usually both ends of every wave. Its capacity is the sum of member
speeds on one side; with both sides listed, the smaller side (by the target's ``site`` label, else by
device) is the bottleneck, so each wave is counted once.
"""

from __future__ import annotations

from collections import defaultdict

from collector.config import Config, Link
from collector.contracts import optics
from collector.contracts.catalog import LINK_METRICS
from collector.contracts.fibre import one_way_delay_s
from collector.store import Store

SPEED = "dci_interface_speed_bytes_per_second"


def member_links(config: Config) -> dict[str, dict[tuple[str, str], str]]:
    """device -> ("interface" or "component", name) -> link name, for the store's ``link`` label."""
    out: dict[str, dict[tuple[str, str], str]] = defaultdict(dict)
    for link in config.links:
        for m in link.members:
            out[m.device][("interface", m.interface)] = link.name
            if m.component is not None:
                out[m.device][("component", m.component)] = link.name
    return dict(out)


def capacity_bytes_per_second(link: Link, config: Config, store: Store) -> float:
    """The link's usable capacity from the member speeds the devices report (0 until they report)."""
    sites = {t.name: t.labels.get("site", t.name) for t in config.targets}
    by_side: dict[str, float] = defaultdict(float)
    for full, value in store.items(SPEED):
        labels = dict(full)
        for m in link.members:
            if labels.get("device") == m.device and labels.get("interface") == m.interface:
                by_side[sites.get(m.device, m.device)] += float(value)  # type: ignore[arg-type]
    return min(by_side.values(), default=0.0)


def update(store: Store, config: Config) -> None:
    """Set every ``dci_link_*`` series from the config and the member speeds now in the store."""
    for metric in LINK_METRICS:  # start afresh, so links removed by a reload disappear
        store.families.pop(metric.name, None)
    for link in config.links:
        name = (("link", link.name),)
        us_per_km = link.fibre_delay_us_per_km or config.defaults.fibre_delay_us_per_km
        delay = one_way_delay_s(link.distance_km, us_per_km)
        capacity = capacity_bytes_per_second(link, config, store)
        store.set("dci_link_distance_meters", name, link.distance_km * 1000.0)
        store.set("dci_link_propagation_delay_seconds", name, delay)
        store.set("dci_link_capacity_bytes_per_second", name, capacity)
        store.set("dci_link_bandwidth_delay_product_bytes", name, capacity * 2 * delay)
        profile = optics.profile(link.optics)
        store.set("dci_link_optics_fec_ber_limit", name, profile.fec_ber_limit)
        store.set("dci_link_optics_required_osnr_db", name, profile.required_osnr_db)
        for m in link.members:
            store.set(
                "dci_link_info",
                (
                    ("link", link.name),
                    ("site_a", link.site_a),
                    ("site_b", link.site_b),
                    ("device", m.device),
                    ("interface", m.interface),
                ),
                1.0,
            )
