"""Shard assignment: which collector replica polls which target (``spanwatch collect --shard i/N``).

A target belongs to shard ``hashmod(name, N)``, the same function as Prometheus's ``hashmod`` relabel
action (model/relabel: the MD5 of the source label values joined by the separator, the digest's last
8 bytes read as a big-endian uint64, modulo N). So a Prometheus relabel rule with ``source_labels:
[device]`` and ``modulus: N`` puts every device in the same shard as the collector replica that polls it,
and with N replicas every target is polled by exactly one of them.

Within a replica, the daemon spreads its targets over worker processes with the same hash (issue 18):
with N replicas and W workers, a target goes to worker ``hashmod(name, N * W) // N``. Since
``hashmod(name, N * W) % N == hashmod(name, N)``, this composes with the replica split (shard first,
then workers) and spreads each replica's targets evenly, where ``hashmod(name, W)`` would send every
target of replica i to worker i whenever W == N.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from collector.config import Config

PROMETHEUS_SEPARATOR = ";"  # relabel_config's default ``separator``

_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def hashmod(values: Iterable[str], modulus: int, separator: str = PROMETHEUS_SEPARATOR) -> int:
    """Prometheus's ``hashmod`` of label values.

    Args:
        values: the source label values, in ``source_labels`` order.
        modulus: the relabel rule's ``modulus`` (> 0).
        separator: the relabel rule's ``separator``.

    Returns:
        a number in ``[0, modulus)``.

    Raises:
        ValueError: ``modulus`` is not positive.
    """
    if modulus <= 0:
        raise ValueError("modulus must be positive")
    digest = hashlib.md5(separator.join(values).encode(), usedforsecurity=False).digest()
    return int.from_bytes(digest[8:], "big") % modulus


@dataclass(frozen=True, slots=True)
class Shard:
    """Replica ``index`` of ``count``."""

    index: int
    count: int

    def owns(self, target: str) -> bool:
        """Whether this replica polls the target named ``target``."""
        return hashmod([target], self.count) == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse(spec: str) -> Shard:
    """``"2/4"`` -> replica 2 of 4 (0-based, as a StatefulSet's pod index).

    Raises:
        ValueError: not ``i/N`` with ``0 <= i < N``.
    """
    m = _SPEC.match(spec)
    if m is None:
        raise ValueError(f"not a shard: {spec!r} (use i/N, for example 0/3)")
    index, count = int(m.group(1)), int(m.group(2))
    if count < 1 or index >= count:
        raise ValueError(f"not a shard: {spec!r} (need 0 <= i < N)")
    return Shard(index, count)


def worker_of(target: str, workers: int, shard: Shard | None = None) -> int:
    """The worker process (0-based, of ``workers``) that collects ``target`` within its replica."""
    replicas = shard.count if shard is not None else 1
    return hashmod([target], replicas * workers) // replicas


def select_worker(config: Config, shard: Shard | None, worker: Shard | None) -> Config:
    """The part of ``config`` that worker ``worker`` (index of count) of replica ``shard`` collects."""
    config = select(config, shard)
    if worker is None:
        return config
    return _keep(config, lambda name: worker_of(name, worker.count, shard) == worker.index)


def select(config: Config, shard: Shard | None) -> Config:
    """The part of ``config`` that replica ``shard`` collects (all of it when ``shard`` is None).

    Targets of other shards are dropped; a link keeps only the members this replica polls, so each
    ``dci_link_info`` series comes from exactly one replica, and a link with no member here is dropped.
    """
    if shard is None:
        return config
    return _keep(config, shard.owns)


def _keep(config: Config, owns: Callable[[str], bool]) -> Config:
    targets = tuple(t for t in config.targets if owns(t.name))
    names = {t.name for t in targets}
    links = []
    for link in config.links:
        members = tuple(m for m in link.members if m.device in names)
        if members:
            # One replica (and in it one worker) probes the link: the one polling its first member.
            probe = link.probe if owns(link.members[0].device) else None
            links.append(link.model_copy(update={"members": members, "probe": probe}))
    return config.model_copy(update={"targets": targets, "links": tuple(links)})
