"""Configuration: a strict schema, then cross-checks, giving a frozen config (spec: interfaces.md).

Pass one is pydantic with unknown keys rejected; pass two checks what one field cannot see alone (link
members name configured targets, modules exist, secrets are readable). Every problem carries its location
(``targets[2].snmp.auth_key_file: file not found``). Secrets stay as references (a file or an environment
variable) and are read only when a source connects, so they never sit in the config's repr.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from collector import credentials, mappings, secret_files
from collector.contracts import fibre
from collector.contracts import optics as optics_profiles
from collector.durations import parse_duration
from collector.errors import ConfigError
from collector.yaml_input import read_yaml

Duration = Annotated[float, BeforeValidator(parse_duration), Field(gt=0)]
_M = TypeVar("_M", bound=BaseModel)
TWAMP_PORT = 862  # the port IANA assigned to TWAMP (RFC 5357); TWAMP-light reflectors use it too


def _address(default_port: int) -> Any:
    def check(value: Any) -> str:
        if not isinstance(value, str):
            raise ValueError("an address is host:port")
        host, sep, port = value.rpartition(":")
        if not sep:
            return f"{value}:{default_port}"
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"not a host:port address: {value!r}")
        return value

    return BeforeValidator(check)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SecretRef(Strict):
    """Where one secret comes from; never the secret itself."""

    file: Path | None = None
    env: str | None = None
    within: Path | None = None  # a targets file's secret: the file must be inside this directory

    def read(self) -> str:
        """The secret's value (trailing newline stripped).

        Raises:
            ConfigError: the file or variable is missing, or the file is outside ``within``.
        """
        if self.file is not None:
            data = secret_files.read_bytes(self.file, self.within)
            try:
                return data.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                raise ConfigError(f"{self.file}: not UTF-8 text") from None
        if self.env is not None:
            value = os.environ.get(self.env)
            if value is None:
                raise ConfigError(f"environment variable {self.env} is not set")
            return value
        raise ConfigError("no secret configured")

    def problem(self) -> str | None:
        """Why the secret cannot be read, or None."""
        if self.file is not None and not self.file.is_file():
            return f"file not found: {self.file}"
        if self.file is not None and self.within is not None and secret_files.outside(self.file, self.within):
            return f"{self.file} is outside the secrets directory {self.within}"
        if self.env is not None and self.env not in os.environ:
            return f"environment variable {self.env} is not set"
        return None


class Confinable(Strict):
    """A section whose secret files may come from a targets file: those must stay in the secrets directory.

    The confinement is private state set by ``parse``, never a key a file could set.
    """

    _secrets_root: Path | None = PrivateAttr(default=None)
    _confined: frozenset[str] = PrivateAttr(default=frozenset())

    def confine(self, root: Path, keys: frozenset[str]) -> None:
        """Check the files named by ``keys`` against ``root`` again when they are read."""
        self._secrets_root, self._confined = root, keys

    def _root_for(self, key: str) -> Path | None:
        return self._secrets_root if key in self._confined else None

    def _secret(self, name: str) -> SecretRef | None:
        file, env = getattr(self, f"{name}_file"), getattr(self, f"{name}_env")
        within = self._root_for(f"{name}_file")
        return None if file is None and env is None else SecretRef(file=file, env=env, within=within)


class ArchiveConfig(Confinable):
    path: Path = Path("archive")
    # An S3-compatible bucket instead of ``path`` (``collector.storage``); what is not set here comes from
    # the standard AWS_* environment (endpoint, region, credentials, web identity).
    url: str | None = Field(default=None, pattern=r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$")
    endpoint: str | None = None
    region: str | None = None
    access_key_id_env: str | None = None
    access_key_id_file: Path | None = None
    secret_access_key_env: str | None = None
    secret_access_key_file: Path | None = None
    flush_interval: Duration = 1.0
    # rows waiting for a disk that is full or read-only; the oldest go first (about 280 B a row)
    max_buffer_bytes: int = Field(default=256 * 1024 * 1024, ge=1024 * 1024)

    @property
    def access_key_id(self) -> SecretRef | None:
        return self._secret("access_key_id")

    @property
    def secret_access_key(self) -> SecretRef | None:
        return self._secret("secret_access_key")


class CollectorConfig(Strict):
    listen: Annotated[str, _address(9464)] = "127.0.0.1:9464"
    web_config: Path | None = None
    # The only directory whose files a targets file may name as secrets (issue 34).
    secrets_dir: Path | None = None
    archive: ArchiveConfig | None = ArchiveConfig()
    # Answer TWAMP-light probes of other collectors here (host:port), as ``spanwatch reflect`` does.
    reflector: Annotated[str, _address(TWAMP_PORT)] | None = None


class Defaults(Strict):
    interval: Duration = 10.0
    timeout: Duration = 5.0
    expiry_intervals: int = Field(default=5, ge=1, description="series expire after this many intervals")
    label_refresh: Duration = 600.0
    fibre_delay_us_per_km: float = Field(default=fibre.DELAY_US_PER_KM, gt=0)
    max_series_per_target: int = Field(default=50_000, ge=1, description="new series beyond are dropped")


SnmpAuth = Literal["MD5", "SHA", "SHA224", "SHA256", "SHA384", "SHA512"]
SnmpPriv = Literal["DES", "3DES", "AES", "AES128", "AES192", "AES256"]


class SnmpConfig(Confinable):
    address: Annotated[str, _address(161)]
    version: Literal["2c", "3"] = "2c"
    community_env: str | None = None
    community_file: Path | None = None
    user: str | None = None
    auth_protocol: SnmpAuth | None = None
    auth_key_file: Path | None = None
    auth_key_env: str | None = None
    priv_protocol: SnmpPriv | None = None
    priv_key_file: Path | None = None
    priv_key_env: str | None = None
    modules: tuple[str, ...] | None = None
    interval: Duration | None = None
    timeout: Duration | None = None
    max_repetitions: int = Field(default=25, ge=1, le=200)
    retries: int = Field(default=1, ge=0, le=5)

    @model_validator(mode="before")
    @classmethod
    def _version_as_string(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("version"), int):
            data = {**data, "version": str(data["version"])}
        return data

    @model_validator(mode="after")
    def _credentials(self) -> SnmpConfig:
        if self.version == "2c":
            if self.community is None:
                raise ValueError("SNMPv2c needs community_env or community_file")
            if self.user or self.auth_protocol or self.priv_protocol:
                raise ValueError("user, auth_* and priv_* are for SNMPv3 (version: 3)")
        else:
            if not self.user:
                raise ValueError("SNMPv3 needs user")
            if self.auth_protocol and self.auth_key is None:
                raise ValueError("auth_protocol needs auth_key_file or auth_key_env")
            if self.priv_protocol and not self.auth_protocol:
                raise ValueError("priv_protocol needs auth_protocol (authPriv)")
            if self.priv_protocol and self.priv_key is None:
                raise ValueError("priv_protocol needs priv_key_file or priv_key_env")
        return self

    @property
    def community(self) -> SecretRef | None:
        return self._secret("community")

    @property
    def auth_key(self) -> SecretRef | None:
        return self._secret("auth_key")

    @property
    def priv_key(self) -> SecretRef | None:
        return self._secret("priv_key")


class TlsConfig(Confinable):
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    server_name: str | None = None

    def read(self, key: str) -> bytes | None:
        """The content of the file ``key`` names (``ca_file``, ``cert_file``, ``key_file``), or None.

        Raises:
            ConfigError: the file cannot be read, or is outside the secrets directory.
        """
        path = getattr(self, key)
        return None if path is None else secret_files.read_bytes(path, self._root_for(key))


class GnmiConfig(Confinable):
    address: Annotated[str, _address(9339)]
    tls: TlsConfig | None = None
    insecure: bool = False
    # A username or password over ``insecure: true`` travels in clear: only with this explicit opt-in.
    plaintext_credentials: bool = False
    username_env: str | None = None
    username_file: Path | None = None
    password_env: str | None = None
    password_file: Path | None = None
    sample_interval: Duration = 1.0
    subscriptions: tuple[str, ...] = ("interfaces",)
    encoding: Literal["proto", "json", "json_ietf"] = "proto"
    max_message_bytes: int = Field(
        default=16 * 1024 * 1024, ge=64 * 1024, le=1024 * 1024 * 1024, description="largest gNMI message"
    )

    @model_validator(mode="after")
    def _transport(self) -> GnmiConfig:
        if self.insecure == (self.tls is not None):
            raise ValueError("give either tls: {...} or insecure: true")
        if self.insecure and not self.plaintext_credentials and (self.username or self.password):
            raise ValueError(
                "a username or password over insecure: true travels in clear: "
                "use tls, or opt in with plaintext_credentials: true"
            )
        return self

    @property
    def username(self) -> SecretRef | None:
        return self._secret("username")

    @property
    def password(self) -> SecretRef | None:
        return self._secret("password")


_LABEL_NAME = r"^[a-zA-Z_][a-zA-Z0-9_]*$"
_RESERVED = {
    "device",
    "source",
    "link",
    "metric",
    "status",
    "interface",
    "queue",
    "priority",
    "lane",
    "direction",
    "pool",
    "component",
}


class Target(Strict):
    name: str = Field(min_length=1)
    labels: dict[Annotated[str, Field(pattern=_LABEL_NAME)], str] = {}
    snmp: SnmpConfig | None = None
    gnmi: GnmiConfig | None = None

    @model_validator(mode="after")
    def _check(self) -> Target:
        clash = sorted(set(self.labels) & _RESERVED)
        if clash:
            raise ValueError(f"labels may not use the reserved names {clash}")
        if self.snmp is None and self.gnmi is None:
            raise ValueError("a target needs snmp, gnmi or both")
        return self


class LinkMember(Strict):
    """One interface of a link; ``component`` names the optics component (optical channel or transceiver)
    carrying it, for devices that report line-side optics per component rather than per interface."""

    device: str
    interface: str
    component: str | None = None


def split_host_port(address: str) -> tuple[str, int | None]:
    """``host``, ``host:port``, ``[v6]:port`` or a bare IPv6 address -> (host, port or None).

    Raises:
        ValueError: a port that is not 1..65535.
    """
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        port = rest.removeprefix(":") or None
    elif address.count(":") == 1:
        host, port = address.split(":")
    else:  # a name, IPv4 or an unbracketed IPv6 address
        host, port = address, None
    if port is not None and (not port.isdigit() or not 0 < int(port) < 65536):
        raise ValueError(f"not a host:port address: {address!r}")
    return host, None if port is None else int(port)


class ProbeTarget(Strict):
    """One responder a link is probed against: the far end's address on the link, or a site's reflector.

    ``twamp`` targets are ``host[:port]`` (port 862 by default) running a TWAMP-light reflector
    (``spanwatch reflect``); ``icmp`` targets are a bare host answering echo requests.
    """

    address: str = Field(min_length=1)
    method: Literal["twamp", "icmp"] = "twamp"
    name: str | None = Field(default=None, min_length=1)  # the ``target`` label; the address when absent

    @model_validator(mode="after")
    def _address_form(self) -> ProbeTarget:
        _, port = split_host_port(self.address)
        if self.method == "icmp" and port is not None:
            raise ValueError("an icmp target is a host, without a port")
        return self

    @property
    def label(self) -> str:
        return self.name or self.address

    def host_port(self) -> tuple[str, int]:
        """The host and the UDP port (TWAMP's 862 when the address names none)."""
        host, port = split_host_port(self.address)
        return host, port or TWAMP_PORT


class ProbeConfig(Strict):
    """Active round-trip probing of a link: ``count`` probes spread over each ``interval`` to each target;
    min/avg/max, jitter and loss are exported per interval."""

    interval: Duration = 10.0
    count: int = Field(default=10, ge=1, le=1000)
    timeout: Duration = 1.0
    targets: tuple[ProbeTarget, ...] = Field(min_length=1)


class Link(Strict):
    name: str = Field(min_length=1)
    site_a: str
    site_b: str
    distance_km: float = Field(gt=0, le=20_000)
    fibre_delay_us_per_km: float | None = Field(default=None, gt=0)
    # The optics profile of the link's waves (``collector.contracts.optics``): its FEC limit, required OSNR,
    # CD tolerance and reach are the levels the analysis, the report, the rules and the boards apply.
    optics: str = optics_profiles.DEFAULT

    @field_validator("optics")
    @classmethod
    def _known_profile(cls, name: str) -> str:
        if name not in optics_profiles.PROFILES:
            raise ValueError(
                f"unknown optics profile {name!r} (known: {', '.join(optics_profiles.PROFILES)})"
            )
        return name

    members: tuple[LinkMember, ...] = Field(min_length=1)
    probe: ProbeConfig | None = None


class MappingDirs(Strict):
    """Directories of user mapping files (``collector.mappings``): same schema and naming as the shipped."""

    snmp_dirs: tuple[Path, ...] = ()
    gnmi_dirs: tuple[Path, ...] = ()


class CredentialSet(Strict):
    """Credentials of the main config that targets (also a targets file's) name by ``credentials: NAME``."""

    snmp: dict[str, Any] | None = None
    gnmi: dict[str, Any] | None = None

    @field_validator("snmp", "gnmi")
    @classmethod
    def _only_credentials(cls, value: dict[str, Any] | None, info: Any) -> dict[str, Any] | None:
        if value is not None:
            credentials.check_set_keys(info.field_name, value)
        return value

    def sections(self) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in (("snmp", self.snmp), ("gnmi", self.gnmi)) if v is not None}


class Config(Strict):
    """The whole, validated config."""

    collector: CollectorConfig = CollectorConfig()
    defaults: Defaults = Defaults()
    mappings: MappingDirs = MappingDirs()
    credentials: dict[str, CredentialSet] = {}
    # Globs of YAML files, each a list of targets (Prometheus file_sd style); re-read when they change.
    targets_files: tuple[str, ...] = ()
    targets: tuple[Target, ...] = ()
    links: tuple[Link, ...] = ()

    def target(self, name: str) -> Target:
        return next(t for t in self.targets if t.name == name)


def load(path: str | Path) -> Config:
    """Read, validate and cross-check a config file.

    Raises:
        ConfigError: with every problem found, each with its location.
    """
    path = Path(path)
    return parse(read_yaml(path), base=path.parent)


def parse(raw: Any, base: Path = Path(".")) -> Config:
    """Validate an already-parsed document (relative paths are taken from ``base``).

    Every problem is found in one pass (issue 32): each target and link is validated on its own, and the
    cross-checks and the targets files run on whatever is valid, so a schema error does not hide a missing
    secret or an unknown link device.

    Raises:
        ConfigError: as ``load``.
    """
    if not isinstance(raw, dict):
        raise ConfigError("the config must be a mapping")
    doc = _rebase(raw, base)
    problems: list[str] = []
    items = {key: doc.pop(key, []) for key in ("targets", "links")}
    config = _sections(doc, problems)
    sets = {name: c.sections() for name, c in config.credentials.items()}
    targets: list[Target] = []
    origins: list[str] = []
    names = _names(items["targets"])
    for where, item in _items(items["targets"], "targets", problems):
        item, found = credentials.apply(item, sets, where)
        problems += found
        target = _validated(Target, item, where, problems)
        if target is not None:
            targets.append(target)
            origins.append(where)
    links: list[Link] = []
    link_origins: list[str] = []
    for where, item in _items(items["links"], "links", problems):
        link = _validated(Link, item, where, problems)
        if link is not None:
            links.append(link)
            link_origins.append(where)
    from_files, found, file_names = _file_targets(config.targets_files, sets, config.collector.secrets_dir)
    problems += found
    targets += [t for t, _ in from_files]
    origins += [where for _, where in from_files]
    config = config.model_copy(update={"targets": tuple(targets), "links": tuple(links)})
    problems += cross_check(config, origins, names | file_names, link_origins)
    if problems:
        raise ConfigError(*problems)
    return config


def _sections(doc: dict[str, Any], problems: list[str]) -> Config:
    """The config without targets and links; a section with a schema error is reported and left out."""
    try:
        return Config.model_validate(doc)
    except ValidationError as e:
        problems += [_located(err) for err in e.errors()]
        wrong = {err["loc"][0] for err in e.errors() if err["loc"]}
    try:
        return Config.model_validate({k: v for k, v in doc.items() if k not in wrong})
    except ValidationError:
        return Config()  # already reported


def _items(raw: Any, key: str, problems: list[str]) -> list[tuple[str, Any]]:
    if not isinstance(raw, list | tuple):
        problems.append(f"{key}: a list")
        return []
    return [(f"{key}[{i}]", item) for i, item in enumerate(raw)]


def _names(raw: Any) -> set[str]:
    """The names the raw targets give, valid or not (a link naming an invalid target is not dangling)."""
    items = raw if isinstance(raw, list) else []
    return {t["name"] for t in items if isinstance(t, dict) and isinstance(t.get("name"), str)}


def _validated(model: type[_M], item: Any, where: str, problems: list[str]) -> _M | None:
    """``item`` validated, or else its problems reported and the item without its wrong keys, so that the
    cross-checks still see the rest of it (the config is refused anyway: there are problems)."""
    try:
        return model.model_validate(item)
    except ValidationError as e:
        problems += [
            f"{where}.{_located(err)}" if err["loc"] else f"{where}: {_located(err)}" for err in e.errors()
        ]
        wrong = {err["loc"][0] for err in e.errors() if err["loc"]}
    if not isinstance(item, dict) or not wrong:
        return None
    try:
        return model.model_validate({k: v for k, v in item.items() if k not in wrong})
    except ValidationError:
        return None


_PATH_LIST_KEYS = {"snmp_dirs", "gnmi_dirs", "targets_files"}
_PATH_KEYS = {
    "path",
    "web_config",
    "secrets_dir",
    "ca_file",
    "cert_file",
    "key_file",
    "community_file",
    "auth_key_file",
    "priv_key_file",
    "username_file",
    "password_file",
    "access_key_id_file",
    "secret_access_key_file",
}


def _rebase(node: Any, base: Path) -> Any:
    """Make every relative path in the document relative to the config file's folder."""
    if isinstance(node, dict):
        return {
            k: (
                _rebased(v, base)
                if k in _PATH_KEYS
                else [_rebased(p, base) for p in v]
                if k in _PATH_LIST_KEYS and isinstance(v, list)
                else _rebase(v, base)
            )
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_rebase(v, base) for v in node]
    return node


def _rebased(value: Any, base: Path) -> Any:
    return str(base / value) if isinstance(value, str) and not os.path.isabs(value) else value


def targets_files(config: Config) -> list[Path]:
    """The files the config's ``targets_files`` globs match now, sorted (hidden files left out, as editors
    write them while saving)."""
    found = {Path(p) for pattern in config.targets_files for p in glob.glob(pattern, recursive=True)}
    return sorted(p for p in found if p.is_file())


def _file_targets(
    patterns: tuple[str, ...], sets: dict[str, dict[str, dict[str, Any]]], secrets_dir: Path | None
) -> tuple[list[tuple[Target, str]], list[str], set[str]]:
    """The targets of the ``targets_files`` (each file a YAML list of targets), each with its location, the
    problems, and the names every item gives (valid or not).

    A targets file names secrets only through ``sets`` or as files inside ``secrets_dir``
    (``collector.credentials``); those files are checked again when read.
    """
    targets: list[tuple[Target, str]] = []
    problems: list[str] = []
    names: set[str] = set()
    files = targets_files(Config(targets_files=patterns))
    for path in files:
        try:
            raw = read_yaml(path)
        except ConfigError as e:
            problems += e.problems
            continue
        if raw == {}:
            continue  # an empty file: no targets yet
        if not isinstance(raw, list):
            problems.append(f"{path}: a targets file is a list of targets")
            continue
        names |= _names(raw)
        for i, item in enumerate(raw):
            where = f"{path}[{i}]"
            item, confined, found = credentials.confine(item, secrets_dir, where)
            item, more = credentials.apply(_rebase(item, path.parent), sets, where)
            target = _validated(Target, item, where, problems)
            if found or more:
                problems += found + more
            elif target is not None:
                _confine(target, secrets_dir, confined)
                targets.append((target, where))
    return targets, problems, names


def _confine(target: Target, root: Path | None, confined: dict[str, frozenset[str]]) -> None:
    if root is None:
        return
    if target.snmp is not None:
        target.snmp.confine(root, confined.get("snmp", frozenset()))
    if target.gnmi is not None:
        target.gnmi.confine(root, confined.get("gnmi", frozenset()))
        if target.gnmi.tls is not None:
            target.gnmi.tls.confine(root, confined.get("tls", frozenset()))


def _located(err: Any) -> str:
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".")
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        message = "unknown key"
    # Never echo the offending input: it may be a secret.
    return f"{where}: {message}" if where else message


def cross_check(
    config: Config,
    origins: list[str] | None = None,
    known: set[str] = frozenset(),  # type: ignore[assignment]
    link_origins: list[str] | None = None,
) -> list[str]:
    """Problems no single field can see: duplicates, dangling references, unreadable secrets, user mapping
    directories (``origins``/``link_origins``: each target's and link's location, when some were left out
    or come from targets files; ``known``: names of targets left out for their own problems)."""
    problems: list[str] = []
    names = [t.name for t in config.targets]
    user_modules, found = mappings.user_files("snmp", config.mappings.snmp_dirs, "mappings.snmp_dirs")
    problems += found
    user_sets, found = mappings.user_files("gnmi", config.mappings.gnmi_dirs, "mappings.gnmi_dirs")
    problems += found
    modules = mappings.snmp_module_names() | set(user_modules)
    subscriptions = mappings.gnmi_subscription_names() | set(user_sets)
    for i, t in enumerate(config.targets):
        where = origins[i] if origins is not None else f"targets[{i}]"
        if names.count(t.name) > 1:
            problems.append(f"{where}.name: duplicate target name {t.name!r}")
        if t.snmp is not None:
            for j, m in enumerate(t.snmp.modules or ()):
                if m not in modules:
                    problems.append(
                        f"{where}.snmp.modules[{j}]: unknown module {m!r} "
                        f"(known: {', '.join(sorted(modules))})"
                    )
            for field in ("community", "auth_key", "priv_key"):
                ref = getattr(t.snmp, field)
                problem = ref.problem() if ref is not None else None
                if problem:
                    key = f"{field}_file" if ref.file is not None else f"{field}_env"
                    problems.append(f"{where}.snmp.{key}: {problem}")
        if t.gnmi is not None:
            for j, s in enumerate(t.gnmi.subscriptions):
                if s not in subscriptions:
                    problems.append(
                        f"{where}.gnmi.subscriptions[{j}]: unknown subscription set {s!r} "
                        f"(known: {', '.join(sorted(subscriptions))})"
                    )
            for field in ("username", "password"):
                ref = getattr(t.gnmi, field)
                problem = ref.problem() if ref is not None else None
                if problem:
                    key = f"{field}_file" if ref.file is not None else f"{field}_env"
                    problems.append(f"{where}.gnmi.{key}: {problem}")
            tls = t.gnmi.tls
            for key in ("ca_file", "cert_file", "key_file"):
                path = getattr(tls, key) if tls is not None else None
                if path is not None and not path.is_file():
                    problems.append(f"{where}.gnmi.tls.{key}: file not found: {path}")
    web = config.collector.web_config
    if web is not None and not web.is_file():
        problems.append(f"collector.web_config: file not found: {web}")
    elif web is not None:
        from collector.exporters.webconfig import load_web_config  # the exporter owns that format

        try:
            load_web_config(web)
        except ConfigError as e:
            problems += [f"collector.web_config: {p}" for p in e.problems]
    link_names = [link.name for link in config.links]
    members: dict[tuple[str, str], str] = {}
    for i, link in enumerate(config.links):
        at = link_origins[i] if link_origins is not None else f"links[{i}]"
        if link_names.count(link.name) > 1:
            problems.append(f"{at}.name: duplicate link name {link.name!r}")
        for j, member in enumerate(link.members):
            where = f"{at}.members[{j}]"
            if member.device not in names and member.device not in known:
                problems.append(f"{where}.device: no target named {member.device!r}")
            other = members.setdefault((member.device, member.interface), link.name)
            if other != link.name:
                problems.append(
                    f"{where}: {member.device} {member.interface} is already a member of link {other!r}"
                )
    return problems
