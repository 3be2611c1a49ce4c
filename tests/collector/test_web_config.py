"""web.yml (exporter-toolkit format): validation with locations, TLS contexts, basic auth."""

from __future__ import annotations

import asyncio
import base64
import ssl
import time
from pathlib import Path

import bcrypt
import pytest

from collector.errors import ConfigError
from collector.exporters.auth import BasicAuth, parse_basic
from collector.exporters.webconfig import load_web_config, parse_web_config, peer_allowed, ssl_context

HASH = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(4)).decode()


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def _problems(raw: object, tmp_path: Path) -> str:
    with pytest.raises(ConfigError) as e:
        parse_web_config(raw, tmp_path / "web.yml")
    return "\n".join(e.value.problems)


def test_full_file_loads_with_paths_relative_to_it(tmp_path: Path, tls_files) -> None:
    (tmp_path / "server.pem").write_bytes(tls_files.cert.read_bytes())
    (tmp_path / "server.key").write_bytes(tls_files.key.read_bytes())
    (tmp_path / "web.yml").write_text(f"""
tls_server_config:
  cert_file: server.pem
  key_file: server.key
  min_version: TLS13
http_server_config:
  headers: {{X-Frame-Options: deny, X-Content-Type-Options: nosniff}}
basic_auth_users:
  alice: '{HASH}'
rate_limit: {{interval: 1s, burst: 20}}
""")
    config = load_web_config(tmp_path / "web.yml")
    assert config.tls_server_config is not None
    assert config.tls_server_config.cert_file == tmp_path / "server.pem"
    assert config.http_server_config.headers.items() == [
        ("X-Frame-Options", "deny"),
        ("X-Content-Type-Options", "nosniff"),
    ]
    assert config.rate_limit.interval == 1.0 and config.rate_limit.burst == 20
    ctx = ssl_context(config.tls_server_config)
    assert ctx.minimum_version is ssl.TLSVersion.TLSv1_3
    assert ctx.verify_mode is ssl.CERT_NONE


def test_empty_file_means_no_tls_no_auth(tmp_path: Path) -> None:
    (tmp_path / "web.yml").write_text("")
    config = load_web_config(tmp_path / "web.yml")
    assert config.tls_server_config is None and not config.basic_auth_users


def test_unknown_keys_are_rejected_with_their_location(tmp_path: Path) -> None:
    problems = _problems(
        {"tls_server_config": {"cert_file": "a", "key_file": "b", "colour": "red"}, "basic_auth": {}},
        tmp_path,
    )
    assert "web.yml: tls_server_config.colour: unknown key" in problems
    assert "web.yml: basic_auth: unknown key" in problems


def test_bad_values_carry_location_and_never_echo_secrets(tmp_path: Path) -> None:
    problems = _problems(
        {
            "basic_auth_users": {"alice": "plaintext-password"},
            "tls_server_config": {"cert_file": "a", "key_file": "b", "min_version": "TLS9"},
        },
        tmp_path,
    )
    assert "basic_auth_users.alice: not a bcrypt hash" in problems
    assert "tls_server_config.min_version" in problems
    assert "plaintext-password" not in problems


@pytest.mark.parametrize(
    ("tls", "expected"),
    [
        ({"cert_file": "a"}, "give exactly one of key and key_file"),
        (
            {"cert_file": "a", "key_file": "b", "client_auth_type": "RequireAndVerifyClientCert"},
            "needs client_ca_file",
        ),
        ({"cert_file": "a", "key_file": "b", "client_ca_file": "c"}, "does not verify client certificates"),
        ({"cert_file": "a", "key_file": "b", "client_auth_type": "RequireAnyClientCert"}, "not supported"),
        ({"cert_file": "a", "key_file": "b", "min_version": "TLS13", "max_version": "TLS12"}, "above max"),
        ({"cert_file": "a", "key_file": "b", "cipher_suites": ["TLS_FOO"]}, "unknown cipher_suites"),
    ],
)
def test_inconsistent_tls_settings(tmp_path: Path, tls: dict[str, object], expected: str) -> None:
    problems = _problems({"tls_server_config": tls}, tmp_path)
    assert problems.startswith(f"{tmp_path / 'web.yml'}: tls_server_config: ")
    assert expected in problems


def test_missing_files_are_reported(tmp_path: Path) -> None:
    problems = _problems({"tls_server_config": {"cert_file": "nope.pem", "key_file": "nope.key"}}, tmp_path)
    assert "tls_server_config.cert_file: file not found" in problems
    assert "tls_server_config.key_file: file not found" in problems


def test_inline_pem_and_client_verification(tmp_path: Path, tls_files) -> None:
    config = parse_web_config({"tls_server_config": {
        "cert": tls_files.cert.read_text(), "key": tls_files.key.read_text(),
        "client_ca_file": str(tls_files.ca), "client_auth_type": "RequireAndVerifyClientCert",
        "cipher_suites": ["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"], "curve_preferences": ["CurveP256"],
    }}, tmp_path / "web.yml")  # fmt: skip
    assert config.tls_server_config is not None
    assert "PRIVATE KEY" not in repr(config)  # the inline key is a SecretStr
    assert ssl_context(config.tls_server_config).verify_mode is ssl.CERT_REQUIRED


def test_unloadable_key_is_a_config_error(tmp_path: Path, tls_files) -> None:
    (tmp_path / "bad.key").write_text("not a key")
    config = parse_web_config(
        {"tls_server_config": {"cert_file": str(tls_files.cert), "key_file": str(tmp_path / "bad.key")}},
        tmp_path / "w.yml",
    )
    assert config.tls_server_config is not None
    with pytest.raises(ConfigError, match="cannot load"):
        ssl_context(config.tls_server_config)


def test_client_allowed_sans() -> None:
    cert = {"subjectAltName": (("DNS", "prom.example"), ("IP Address", "10.0.0.1"))}
    assert peer_allowed(cert, ())
    assert peer_allowed(cert, ("prom.example",))
    assert not peer_allowed(cert, ("other.example",))
    assert not peer_allowed(None, ("prom.example",))


@pytest.mark.parametrize(
    "header", [None, "", "Bearer abc", "Basic !!!", "Basic " + base64.b64encode(b"nocolon").decode()]
)
def test_parse_basic_rejects_malformed(header: str | None) -> None:
    assert parse_basic(header) is None


def test_parse_basic_splits_on_first_colon() -> None:
    assert parse_basic(_basic("alice", "a:b")) == ("alice", b"a:b")


async def test_basic_auth_checks_and_caches() -> None:
    auth = BasicAuth({"alice": HASH})
    assert await auth.check(_basic("alice", "s3cret"))
    assert not await auth.check(_basic("alice", "wrong"))
    assert not await auth.check(_basic("bob", "s3cret"))  # unknown user, checked against a decoy hash
    assert not await auth.check(None)
    # A cached success skips bcrypt entirely: swap in a hash nothing matches and it still passes.
    auth._hashes["alice"] = bcrypt.hashpw(b"other", bcrypt.gensalt(4))
    assert await auth.check(_basic("alice", "s3cret"))


async def test_bcrypt_runs_off_the_event_loop() -> None:
    slow = bcrypt.hashpw(b"pw", bcrypt.gensalt(12)).decode()  # ~200+ ms per check
    auth = BasicAuth({"alice": slow})
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    start = time.monotonic()
    assert await auth.check(_basic("alice", "pw"))
    elapsed = time.monotonic() - start
    task.cancel()
    assert ticks >= elapsed / 0.01 / 3  # the loop kept running while bcrypt worked
