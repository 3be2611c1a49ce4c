"""The SNMP source: a ``PolledSource`` that walks the configured mapping modules of one device.

Each poll reads sysUpTime (a decrease means a reboot, which changes every counter's epoch), then walks
every table of the selected modules with bounded GETBULK walks and maps the rows through the engine.
Label tables (ifName/ifDescr, ifAlias, ENTITY names and containment, module lookups) are walked at the
first poll and every ``label_refresh`` seconds. A table the device lacks costs one empty walk and is
skipped until the next label refresh.

Errors surface as ``SourceError`` subclasses: no answer -> ``TimeoutError_`` (SNMPv2c agents ignore a
wrong community, so that is a timeout too); SNMPv3 unknown user / wrong digest / decryption failure ->
``AuthError``; an undecodable answer -> ``InvalidResponse``; socket failures -> ``UnreachableError``.
"""

from __future__ import annotations

import logging
from collections import Counter

from collector.clock import Clock, SystemClock
from collector.config import Defaults, SnmpConfig
from collector.errors import ConfigError, SourceError
from collector.model import Labels, Sample
from collector.sources.snmp import engine
from collector.sources.snmp.ber import Oid, VarBind
from collector.sources.snmp.tables import Module, load_all
from collector.sources.snmp.transport import make_walker
from collector.sources.snmp.walk import (
    AgentError,
    Budget,
    Walker,
    parse_oid,
    walk,
)

log = logging.getLogger(__name__)

SYS_UPTIME: Oid = (1, 3, 6, 1, 2, 1, 1, 3, 0)
IF_DESCR: Oid = (1, 3, 6, 1, 2, 1, 2, 2, 1, 2)
IF_NAME: Oid = (1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 1)
IF_ALIAS: Oid = (1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 18)
ENT_DESCR: Oid = (1, 3, 6, 1, 2, 1, 47, 1, 1, 1, 1, 2)
ENT_PARENT: Oid = (1, 3, 6, 1, 2, 1, 47, 1, 1, 1, 1, 4)
ENT_NAME: Oid = (1, 3, 6, 1, 2, 1, 47, 1, 1, 1, 1, 7)
ENT_ALIAS: Oid = (1, 3, 6, 1, 2, 1, 47, 1, 3, 2, 1, 2)
IF_INDEX_OID: Oid = (1, 3, 6, 1, 2, 1, 2, 2, 1, 1)
DROPPED = "spanwatch_snmp_dropped_packets_total"


class SnmpSource:
    """One device polled over SNMP.

    Args:
        device: the target's name.
        cfg: its ``snmp`` section.
        defaults: interval/timeout/label_refresh defaults.
        clock: time source (label refresh).
        walker: the transport; built from ``cfg`` when omitted (tests pass a ``MapWalker``).
        modules: the mapping modules; the shipped ones when omitted.

    Raises:
        ConfigError: the config names an unknown module, or a secret cannot be read.
    """

    source = "snmp"

    def __init__(
        self,
        device: str,
        cfg: SnmpConfig,
        defaults: Defaults | None = None,
        clock: Clock | None = None,
        walker: Walker | None = None,
        modules: dict[str, Module] | None = None,
    ) -> None:
        self.device = device
        self.cfg = cfg
        self.defaults = defaults or Defaults()
        self.clock = clock or SystemClock()
        self.timeout = cfg.timeout or self.defaults.timeout
        self.budget = Budget(rows=cfg.max_repetitions)  # request size, adapted per agent (walk.Budget)
        self.walker = walker or make_walker(cfg, self.timeout, self.budget)
        shipped = modules if modules is not None else load_all()
        names = cfg.modules if cfg.modules is not None else tuple(sorted(shipped, key=_if_mib_first))
        unknown = [n for n in names if n not in shipped]
        if unknown:
            raise ConfigError(f"{device}: unknown SNMP modules {unknown}")
        self.modules = {n: shipped[n] for n in sorted(names, key=_if_mib_first)}
        self.cache = engine.LabelCache()
        self._resolvers: dict[str, engine.Resolver] = {}  # per module, remembered until label refresh
        # the column OIDs each table walks, by "module.table", computed once
        self._roots = {
            f"{n}.{t.name}": engine.table_roots(t) for n, m in self.modules.items() for t in m.tables
        }
        self._roots |= {
            f"{n}.{t.name}": engine.sensor_roots(t) for n, m in self.modules.items() for t in m.sensors
        }
        self.epochs = engine.Epochs()
        self.absent: set[str] = set()
        self._refreshed: float | None = None
        self.reboots = 0
        self._completed: list[Sample] = []  # samples of the modules this poll finished
        self._running: str | None = None  # what this poll is reading now

    # -- label tables ---------------------------------------------------------------------------
    async def refresh_labels(self) -> None:
        """Walk the label tables now and forget which tables were absent.

        Raises:
            SourceError: the walk failed.
        """
        cache = engine.LabelCache()
        roots = [IF_DESCR, IF_NAME, IF_ALIAS]
        if any(m.sensors for m in self.modules.values()):
            roots += [ENT_DESCR, ENT_PARENT, ENT_NAME, ENT_ALIAS]
        walked = await self._walk(roots)
        names = engine.column_values(walked, IF_NAME)
        for key, descr in engine.column_values(walked, IF_DESCR).items():
            cache.if_name[key[0]] = engine.text(descr)
        for key, name in names.items():
            # ifName is what operators type; some agents leave it empty, then ifDescr stands in.
            if engine.text(name):
                cache.if_name[key[0]] = engine.text(name)
        cache.if_alias = {k[0]: engine.text(v) for k, v in engine.column_values(walked, IF_ALIAS).items()}
        cache.ent_name = {k[0]: engine.text(v) for k, v in engine.column_values(walked, ENT_NAME).items()}
        cache.ent_descr = {k[0]: engine.text(v) for k, v in engine.column_values(walked, ENT_DESCR).items()}
        cache.ent_parent = {
            k[0]: v for k, v in engine.column_values(walked, ENT_PARENT).items() if isinstance(v, int)
        }
        cache.ent_ifindex = _alias_map(engine.column_values(walked, ENT_ALIAS))
        await self._walk_lookups(cache)
        self.cache = cache
        self.absent.clear()
        self._refreshed = self.clock.monotonic()

    async def _walk_lookups(self, cache: engine.LabelCache) -> None:
        wanted = {
            f"{m}.{name}": parse_oid(oid)
            for m, mod in self.modules.items()
            for name, oid in mod.lookups.items()
        }
        if not wanted:
            return
        walked = await self._walk(list(wanted.values()))
        for key, root in wanted.items():
            cache.lookups[key] = engine.column_values(walked, root)

    async def _walk(self, roots: list[Oid]) -> dict[Oid, list[VarBind]]:
        return await walk(self.walker, roots, budget=self.budget)

    def _labels_stale(self) -> bool:
        return self._refreshed is None or (
            self.clock.monotonic() - self._refreshed >= self.defaults.label_refresh
        )

    # -- polling --------------------------------------------------------------------------------
    async def poll(self) -> list[Sample]:
        """Read every selected table once.

        Returns:
            the samples, in catalogue units, summed per series.

        Raises:
            SourceError: the device did not answer, refused, failed authentication or answered garbage.
        """
        self._completed, self._running = [], "labels"
        if self._labels_stale():
            await self.refresh_labels()
        self._running = "sysUpTime"
        await self._read_uptime()
        for name, module in self.modules.items():
            self._running = f"module {name}"
            self._completed += await self._poll_module(name, module)
        self._running = None
        self.budget.settle()
        samples, self._completed = engine.combine(self._completed), []  # not kept until the next poll
        return samples

    def salvage(self) -> tuple[list[Sample], str | None]:
        """The samples of the modules the current poll completed, and what it was reading (timeouts)."""
        return engine.combine(self._completed), self._running

    def take_counts(self) -> list[tuple[str, Labels, int]]:
        """Datagrams the walker dropped since the last call, per reason (receive checks, stray replies)."""
        dropped: Counter[str] | None = getattr(self.walker, "dropped", None)
        if not dropped:
            return []
        out: list[tuple[str, Labels, int]] = [
            (DROPPED, (("device", self.device), ("reason", r)), n) for r, n in sorted(dropped.items())
        ]
        dropped.clear()
        return out

    async def _read_uptime(self) -> None:
        (_, tag, value), *_ = await self.walker.get([SYS_UPTIME])
        ticks = value if tag == 0x43 and isinstance(value, int) else None
        if self.epochs.see_uptime(ticks, self.clock.monotonic()):
            self.reboots += 1
            log.info("%s: sysUpTime went backwards: the device rebooted", self.device)

    async def _poll_module(self, name: str, module: Module) -> list[Sample]:
        """The samples of one module: its tables (fallback columns only where needed) and sensors."""
        primary: list[Sample] = []
        fallback: list[Sample] = []
        resolver = self._resolvers.get(name)
        if resolver is None or resolver.cache is not self.cache:  # label tables refreshed: resolve anew
            resolver = self._resolvers[name] = engine.Resolver(self.cache, name)
        for table in module.tables:
            key = f"{name}.{table.name}"
            rows = await self._rows(key, table.entry, self._roots[key])
            ordinary, fallen_back = engine.table_samples(table, rows, resolver, self.epochs)
            primary += ordinary
            fallback += fallen_back
        resolver.settle()
        for sensors in module.sensors:
            key = f"{name}.{sensors.name}"
            rows = await self._rows(key, sensors.entry, self._roots[key])
            primary += engine.sensor_samples(sensors, rows, self.cache)
        return engine.prefer(primary, fallback)

    async def _rows(self, key: str, entry: str, roots: list[Oid]) -> engine.Rows:
        if key in self.absent:
            return {}
        try:
            walked = await self._walk(roots)
        except AgentError as e:
            # One vendor table answering genErr/noAccess must not fail the whole device.
            log.info("%s: %s: %s; skipped until the next label refresh", self.device, key, e)
            walked = {}
        rows = engine.rows_of(parse_oid(entry), walked)
        if not rows:
            self.absent.add(key)
        return rows

    async def close(self) -> None:
        """Release the socket and engine."""
        await self.walker.close()


def _if_mib_first(name: str) -> tuple[int, str]:
    # if_mib carries ifCounterDiscontinuityTime, which the counters of the other modules use.
    return (0 if name == "if_mib" else 1, name)


def _alias_map(column: dict[Oid, object]) -> dict[int, int]:
    """entAliasMappingIdentifier (index entPhysicalIndex.logicalIndex, value ifIndex.N OID)."""
    out: dict[int, int] = {}
    for key, value in column.items():
        if isinstance(value, tuple) and len(value) == len(IF_INDEX_OID) + 1 and value[:-1] == IF_INDEX_OID:
            out[key[0]] = value[-1]
    return out


__all__ = ["SnmpSource", "SourceError", "make_walker"]
