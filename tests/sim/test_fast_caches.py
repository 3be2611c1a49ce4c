"""What the fast path remembers between samples against what it replaces, computed afresh each time.

A switch's gNMI groups keep their prefixes from one snapshot to the next, so ``SimTarget`` keeps which
groups each subscription path reaches (``gnmi_tree.plan``); a switch's SNMP rows come back in the same OID
order, so ``snmp_mib.build`` keeps that order. Both must answer exactly what ``gnmi_tree.select`` and
sorting the rows answer, on every snapshot, while a wave goes down (leaves and rows disappear) and comes
back.
"""

from __future__ import annotations

from spanwatch.sim import gnmi_tree as tree
from spanwatch.sim import scenario as scenarios
from spanwatch.sim import snapshot, snmp_mib
from spanwatch.sim.fabric import Fabric
from spanwatch.sim.gnmi_target import SimTarget
from spanwatch.sim.snapshot import Snapshot

EPOCH_NS = 1_790_000_000 * 10**9
# Whole groups, a wildcard over interfaces, a path deeper than its groups' prefixes (only some of their
# leaves), one reaching nothing, and everything.
WANTS = [
    tree._parse("interfaces/interface[name=*]/state/counters"),
    tree._parse("qos/interfaces/interface/output/queues/queue/state"),
    tree._parse("interfaces/interface[name=Ethernet1/2]/ethernet/state/pre-fec-ber"),
    tree._parse("components/component[name=OpticalChannel1/3]/optical-channel/state/osnr/instant"),
    tree._parse("system/state"),
    [],
]


def _snapshots(seconds: list[float]) -> list[tuple[Fabric, Snapshot]]:
    """Snapshots of ``wave-down-reroute`` at those model times (wave 2 of link ab is down 8-16 s)."""
    path = scenarios.shipped_named("wave-down-reroute")
    assert path is not None
    f = Fabric(scenarios.load(path))
    out, prev = [], None
    for s in seconds:
        f.advance(s - f.t)
        prev = snapshot.take(f, EPOCH_NS + round(f.t * 1e9), f.t, prev)
        out.append((f, prev))
    return out


def _reference_select(every: list[tree.Group], want: list[tree.Elem]) -> list[tree.Group]:
    """The selection as first written: every prefix matched again, every time."""
    out = []
    for g in every:
        if not tree._match(want, g.prefix):
            continue
        if len(want) <= len(g.prefix):
            out.append(g)
            continue
        leaves = [leaf for leaf in g.leaves if tree._match(want[len(g.prefix) :], leaf[0])]
        if leaves:
            out.append(tree.Group(g.prefix, leaves))
    return out


def _leaves(groups: list[tree.Group]) -> list[tuple[list[tree.Elem], list[tuple[list[tree.Elem], bytes]]]]:
    return [(g.prefix, [(p, v.SerializeToString()) for p, v in g.leaves]) for g in groups]


def test_planned_selection_is_the_selection_on_every_snapshot() -> None:
    snaps = _snapshots([7.0, 9.0, 9.5, 17.0])
    holder = {"snap": snaps[0][1]}
    f = snaps[0][0]
    reached = 0
    for d in range(len(f.lay.devices)):
        target = SimTarget(lambda: holder["snap"], d, EPOCH_NS)
        for _, snap in snaps:
            holder["snap"] = snap
            every = tree.groups(snap, d, EPOCH_NS)
            for want in WANTS:
                _, got = target.select([want])
                assert _leaves(got) == _leaves(_reference_select(every, want))
                reached += bool(got) and want != []
            # several paths at once: a group two of them reach is served once
            _, got = target.select(WANTS)
            assert len({id(g) for g in got}) == len(got)
            assert len(got) >= len(_reference_select(every, []))
    assert reached >= 3 * len(snaps)  # the paths reach something (a partial one included)


def test_planned_selection_follows_groups_whose_prefixes_change() -> None:
    """A data source whose groups change (the lab agent's interfaces come and go) gets fresh plans."""
    ((_, snap),) = _snapshots([3.0])
    every = tree.groups(snap, 0, EPOCH_NS)
    served = {"groups": every}

    class Changing(SimTarget):
        def current(self) -> tuple[int, list[tree.Group]]:
            return snap.time_ns, served["groups"]

    target = Changing(lambda: snap, 0, EPOCH_NS)
    want = WANTS[0]
    assert len(target.select([want])[1]) == len(_reference_select(every, want)) > 1
    served["groups"] = every[len(every) // 2 :]  # another layout: the first half of the groups is gone
    assert _leaves(target.select([want])[1]) == _leaves(_reference_select(served["groups"], want))


def test_snmp_tables_in_oid_order_while_rows_come_and_go() -> None:
    for f, snap in _snapshots([7.0, 9.0, 17.0, 9.0 + 10.0]):
        for d, device in enumerate(f.lay.devices):
            oids, values = snmp_mib.build(snap, d, device.name, snmp_mib.PYSNMP)
            rows = sorted(snmp_mib._rows(snap, d, device.name, snmp_mib.PYSNMP), key=lambda r: r[0])
            assert oids == [oid for oid, _ in rows]
            assert [v.prettyPrint() for v in values] == [v.prettyPrint() for _, v in rows]
