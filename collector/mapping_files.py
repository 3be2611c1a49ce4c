"""The mapping modules and subscription sets one config may use: the shipped ones and the user's.

``load`` reads the config and validates every user file its ``mappings`` directories hold (same schema as
the shipped files), so ``check-config``, start-up and a SIGHUP reload all reject a broken user file with
its location, before any target starts. User files are read again at each load (a reload picks up an
edited file); the shipped ones are read once.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from collector import config as configuration
from collector import mappings
from collector.config import Config, Target
from collector.errors import ConfigError, MappingError
from collector.sources.gnmi.paths import SubscriptionSet, load_set, parse_set
from collector.sources.snmp.tables import Module, load_all, load_file
from collector.yaml_input import read_yaml


@dataclass(frozen=True)
class Mappings:
    """Every SNMP module and gNMI subscription set a target of the config may name.

    Attributes:
        snmp: modules by name, shipped and user.
        gnmi: subscription sets by name, shipped and user.
        digests: name -> SHA-256 of each user file, so a reload can tell which targets use a changed one.
    """

    snmp: dict[str, Module]
    gnmi: dict[str, SubscriptionSet]
    digests: dict[tuple[str, str], str]

    def snmp_modules(self, target: Target) -> dict[str, Module]:
        """The modules ``target`` polls: the ones it names, or all of them (shipped and user)."""
        if target.snmp is None or target.snmp.modules is None:
            return dict(self.snmp)
        return {n: self.snmp[n] for n in target.snmp.modules}

    def gnmi_sets(self, target: Target) -> tuple[SubscriptionSet, ...]:
        """The subscription sets ``target`` subscribes to."""
        return tuple(self.gnmi[n] for n in target.gnmi.subscriptions) if target.gnmi is not None else ()

    def signature(self, target: Target) -> tuple[str, ...]:
        """The digests of the user files ``target`` uses (a change means restarting it)."""
        used = [("snmp", n) for n in self.snmp_modules(target)] + [
            ("gnmi", s.name) for s in self.gnmi_sets(target)
        ]
        return tuple(self.digests[key] for key in used if key in self.digests)


def resolve(config: Config) -> Mappings:
    """Load the shipped files and validate the user's.

    Raises:
        ConfigError: a user directory or file is wrong; every problem with its location.
    """
    problems: list[str] = []
    snmp: dict[str, Module] = dict(load_all())
    gnmi: dict[str, SubscriptionSet] = {n: load_set(n) for n in mappings.gnmi_subscription_names()}
    digests: dict[tuple[str, str], str] = {}
    for i, folder in enumerate(config.mappings.snmp_dirs):
        found, _ = mappings.user_files("snmp", [folder], "")
        for name, path in found.items():
            try:
                snmp.setdefault(name, load_file(path))
                digests[("snmp", name)] = _digest(path)
            except MappingError as e:
                problems.append(f"mappings.snmp_dirs[{i}]: {e}")
    for i, folder in enumerate(config.mappings.gnmi_dirs):
        found, _ = mappings.user_files("gnmi", [folder], "")
        for name, path in found.items():
            try:
                gnmi.setdefault(name, parse_set(name, read_yaml(path, MappingError)))
                digests[("gnmi", name)] = _digest(path)
            except MappingError as e:
                problems.append(f"mappings.gnmi_dirs[{i}]: {e}")
    if problems:
        raise ConfigError(*problems)
    return Mappings(snmp, gnmi, digests)


def load(path: Path) -> tuple[Config, Mappings]:
    """Read, validate and cross-check a config file, and the user mapping files it names.

    Raises:
        ConfigError: with every problem found, each with its location.
    """
    config = configuration.load(path)
    return config, resolve(config)


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as e:
        raise MappingError(f"{path.name}: {e.strerror}") from None
