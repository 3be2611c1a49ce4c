"""The web configuration file (``web.yml``): TLS and basic auth for ``/metrics``.

The format is the Prometheus exporter-toolkit's, so one file serves spanwatch and the Go exporters next to
it: ``tls_server_config``, ``http_server_config``, ``basic_auth_users`` (bcrypt hashes) and ``rate_limit``.
Validation is strict (pydantic, unknown keys rejected) and every problem carries its location
(``tls_server_config.min_version: ...``). Relative file names are taken from the file's own folder, as the
toolkit does. Settings Python's ``ssl`` module cannot honour (asking for a client certificate without
verifying it, several curve preferences) are refused with a reason rather than silently ignored.

Unlike the toolkit, the file is read once when the server starts (a SIGHUP reload restarts the server).
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    model_validator,
)

from collector.durations import parse_duration
from collector.errors import ConfigError
from collector.yaml_input import read_yaml

TlsVersion = Literal["TLS10", "TLS11", "TLS12", "TLS13"]
ClientAuth = Literal[
    "NoClientCert", "RequestClientCert", "RequireAnyClientCert", "VerifyClientCertIfGiven",
    "RequireAndVerifyClientCert",
]  # fmt: skip

_TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}

# Go's cipher suite names (what the toolkit's users write) -> OpenSSL's. TLS 1.3 suites are not
# configurable in Go either, so only TLS <= 1.2 suites appear.
_CIPHERS = {
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305": "ECDHE-RSA-CHACHA20-POLY1305",
}
_CURVES = {"CurveP256": "prime256v1", "CurveP384": "secp384r1", "CurveP521": "secp521r1", "X25519": "X25519"}
_BCRYPT = re.compile(r"^\$2[abxy]?\$\d\d\$[./A-Za-z0-9]{53}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class TlsServerConfig(_Strict):
    """``tls_server_config``: the server certificate and what is asked of clients."""

    cert: str | None = None
    key: SecretStr | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    client_ca: str | None = None
    client_ca_file: Path | None = None
    client_auth_type: ClientAuth = "NoClientCert"
    client_allowed_sans: tuple[str, ...] = ()
    min_version: TlsVersion = "TLS12"
    max_version: TlsVersion = "TLS13"
    cipher_suites: tuple[str, ...] = ()
    prefer_server_cipher_suites: bool = True
    curve_preferences: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _check(self) -> TlsServerConfig:
        problems = list(_tls_problems(self))
        if problems:
            raise ValueError("; ".join(problems))
        return self


def _tls_problems(c: TlsServerConfig) -> Iterator[str]:
    if (c.cert is None) == (c.cert_file is None):
        yield "give exactly one of cert and cert_file"
    if (c.key is None) == (c.key_file is None):
        yield "give exactly one of key and key_file"
    if c.client_ca is not None and c.client_ca_file is not None:
        yield "give at most one of client_ca and client_ca_file"
    has_ca = c.client_ca is not None or c.client_ca_file is not None
    verifying = c.client_auth_type in ("VerifyClientCertIfGiven", "RequireAndVerifyClientCert")
    if c.client_auth_type in ("RequestClientCert", "RequireAnyClientCert"):
        # Python's ssl verifies every certificate it asks for; it cannot accept an unverified one.
        yield f"client_auth_type {c.client_auth_type} is not supported (use RequireAndVerifyClientCert)"
    if verifying and not has_ca:
        yield f"client_auth_type {c.client_auth_type} needs client_ca_file"
    if has_ca and not verifying:
        yield "client_ca_file is set but client_auth_type does not verify client certificates"
    if c.client_allowed_sans and c.client_auth_type != "RequireAndVerifyClientCert":
        yield "client_allowed_sans needs client_auth_type RequireAndVerifyClientCert"
    if _TLS_VERSIONS[c.min_version] > _TLS_VERSIONS[c.max_version]:
        yield "min_version is above max_version"
    unknown = [s for s in c.cipher_suites if s not in _CIPHERS]
    if unknown:
        yield f"unknown cipher_suites {unknown} (known: {', '.join(_CIPHERS)})"
    if len(c.curve_preferences) > 1:
        yield "only one curve_preferences entry is supported"
    if any(curve not in _CURVES for curve in c.curve_preferences):
        yield f"unknown curve_preferences (known: {', '.join(_CURVES)})"


class Headers(_Strict):
    """``http_server_config.headers``: security headers added to every response."""

    content_security_policy: str | None = Field(default=None, alias="Content-Security-Policy")
    x_frame_options: Literal["deny", "sameorigin"] | None = Field(default=None, alias="X-Frame-Options")
    x_content_type_options: Literal["nosniff"] | None = Field(default=None, alias="X-Content-Type-Options")
    x_xss_protection: str | None = Field(default=None, alias="X-XSS-Protection")
    strict_transport_security: str | None = Field(default=None, alias="Strict-Transport-Security")

    def items(self) -> list[tuple[str, str]]:
        """The configured headers as ``(name, value)`` pairs."""
        return [(f.alias or n, v) for n, f in type(self).model_fields.items() if (v := getattr(self, n))]


class HttpServerConfig(_Strict):
    """``http_server_config``. ``http2`` is accepted for compatibility; spanwatch speaks HTTP/1.1."""

    http2: bool = True
    headers: Headers = Headers()


def _duration_or_zero(value: Any) -> float:
    if value in (0, "0"):
        return 0.0
    return parse_duration(value)


class RateLimit(_Strict):
    """``rate_limit``: a token bucket over all requests; an interval of 0 disables it."""

    interval: Annotated[float, BeforeValidator(_duration_or_zero), Field(ge=0)] = 0.0
    burst: int = Field(default=0, ge=0)


def _bcrypt_hash(value: Any) -> Any:
    # Never echo the value in the message: it is a (hashed) secret.
    if not isinstance(value, str) or not _BCRYPT.match(value):
        raise ValueError("not a bcrypt hash (generate one with: htpasswd -nBC 10 '' | tr -d ':\\n')")
    return value


UserName = Annotated[str, Field(min_length=1, pattern=r"^[^:]*$")]


class WebConfig(_Strict):
    """A whole ``web.yml``."""

    tls_server_config: TlsServerConfig | None = None
    http_server_config: HttpServerConfig = HttpServerConfig()
    basic_auth_users: dict[UserName, Annotated[SecretStr, BeforeValidator(_bcrypt_hash)]] = {}
    rate_limit: RateLimit = RateLimit()


def load_web_config(path: Path) -> WebConfig:
    """Read and validate a ``web.yml``; relative file names are taken from its folder.

    Args:
        path: the file.

    Returns:
        the validated configuration.

    Raises:
        ConfigError: with every problem found, each prefixed with the file and the key's location.
    """
    return parse_web_config(read_yaml(path), path)


def parse_web_config(raw: Any, path: Path) -> WebConfig:
    """Validate an already-parsed ``web.yml`` document.

    Args:
        raw: the YAML document.
        path: where it came from (for messages and relative file names).

    Returns:
        the validated configuration.

    Raises:
        ConfigError: as ``load_web_config``.
    """
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the web config must be a mapping")
    tls = raw.get("tls_server_config")
    if isinstance(tls, dict):
        base = path.parent
        raw = {**raw, "tls_server_config": {k: _rebase(k, v, base) for k, v in tls.items()}}
    try:
        config = WebConfig.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(*(f"{path}: {_located(err)}" for err in e.errors())) from None
    problems = [f"{path}: {p}" for p in _missing_files(config)]
    if problems:
        raise ConfigError(*problems)
    return config


def _rebase(key: str, value: Any, base: Path) -> Any:
    if key.endswith("_file") and isinstance(value, str) and not os.path.isabs(value):
        return str(base / value)
    return value


def _located(err: Any) -> str:
    where = ".".join(str(p) for p in err["loc"])
    message = "unknown key" if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def _missing_files(config: WebConfig) -> list[str]:
    tls = config.tls_server_config
    if tls is None:
        return []
    files = {"cert_file": tls.cert_file, "key_file": tls.key_file, "client_ca_file": tls.client_ca_file}
    return [
        f"tls_server_config.{k}: file not found"
        for k, p in files.items()
        if p is not None and not p.is_file()
    ]


def ssl_context(tls: TlsServerConfig) -> ssl.SSLContext:
    """The server-side TLS context ``tls`` describes.

    Args:
        tls: the validated ``tls_server_config``.

    Returns:
        a context for ``asyncio.start_server(ssl=...)``.

    Raises:
        ConfigError: a certificate, key or CA cannot be loaded.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = _TLS_VERSIONS[tls.min_version]
    ctx.maximum_version = _TLS_VERSIONS[tls.max_version]
    try:
        with _pem_files(tls) as (cert, key):
            ctx.load_cert_chain(cert, key)
        if tls.client_ca_file is not None or tls.client_ca is not None:
            ctx.load_verify_locations(cafile=tls.client_ca_file, cadata=tls.client_ca)
    except (OSError, ssl.SSLError, ValueError) as e:
        # The message names the failure (no secret material): "PEM lib", "key values mismatch".
        raise ConfigError(f"tls_server_config: cannot load certificate, key or client CA: {e}") from None
    ctx.verify_mode = {
        "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
        "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
    }.get(tls.client_auth_type, ssl.CERT_NONE)
    if tls.cipher_suites:
        ctx.set_ciphers(":".join(_CIPHERS[s] for s in tls.cipher_suites))
    if tls.prefer_server_cipher_suites:
        ctx.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    if tls.curve_preferences:
        ctx.set_ecdh_curve(_CURVES[tls.curve_preferences[0]])
    return ctx


@contextlib.contextmanager
def _pem_files(tls: TlsServerConfig) -> Iterator[tuple[str, str]]:
    """Certificate and key file names; inline PEM goes to a private temporary folder for ``ssl`` to read."""
    if tls.cert_file is not None and tls.key_file is not None:
        yield str(tls.cert_file), str(tls.key_file)
        return
    with tempfile.TemporaryDirectory(prefix="spanwatch-tls-") as folder:  # mode 0700
        cert = str(tls.cert_file or Path(folder, "cert.pem"))
        key = str(tls.key_file or Path(folder, "key.pem"))
        if tls.cert is not None:
            Path(cert).write_text(tls.cert)
        if tls.key is not None:
            Path(key).write_text(tls.key.get_secret_value())
        yield cert, key


def peer_allowed(peercert: Any, allowed: tuple[str, ...]) -> bool:
    """Whether a verified client certificate carries one of the ``allowed`` subject alternative names.

    Args:
        peercert: ``SSLObject.getpeercert()`` of the connection.
        allowed: ``client_allowed_sans``; empty allows every verified client.

    Returns:
        True when the client may proceed.
    """
    if not allowed:
        return True
    sans = peercert.get("subjectAltName", ()) if isinstance(peercert, dict) else ()
    return any(value in allowed for _, value in sans)
