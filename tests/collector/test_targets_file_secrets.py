"""A targets file cannot make the collector read a host file and send it away (issue 34, point 1).

A targets file names secrets only by a credential set of the main config or as a file inside
``collector.secrets_dir``; anything else is a located ``check-config`` error. The attacker's reproductions
(``community_file: ../../../x``, an absolute path, gNMI metadata over ``insecure: true``) are refused.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
import yaml

from collector import config as configuration
from collector.errors import ConfigError
from collector.sources.gnmi import client
from spanwatch.cli import main


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A config folder: the main config, a secrets directory, a targets folder and a host file to protect."""
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "community").write_text("site-community\n")
    (tmp_path / "host-private.key").write_text("-----BEGIN PRIVATE KEY-----\n")
    (tmp_path / "targets").mkdir()
    main_config = {
        "collector": {"secrets_dir": "secrets", "archive": None},
        "credentials": {
            "ro": {"snmp": {"community_file": "secrets/community"}},
            "gnmi-ro": {"gnmi": {"username_env": "GNMI_USER", "password_file": "host-private.key"}},
        },
        "targets_files": ["targets/*.yaml"],
    }
    (tmp_path / "spanwatch.yaml").write_text(yaml.safe_dump(main_config))
    return tmp_path


def _targets(site: Path, *targets: dict[str, object]) -> Path:
    path = site / "targets" / "discovered.yaml"
    path.write_text(yaml.safe_dump(list(targets)))
    return path


def _problems(site: Path) -> tuple[str, ...]:
    with pytest.raises(ConfigError) as info:
        configuration.load(site / "spanwatch.yaml")
    return info.value.problems


def _snmp(**keys: object) -> dict[str, object]:
    return {"name": "evil", "snmp": {"address": "127.0.0.1:9", **keys}}


@pytest.mark.parametrize("how", ["relative", "absolute"])
def test_a_host_file_named_as_a_community_is_refused_with_its_location(site: Path, how: str) -> None:
    host_file = site / "host-private.key"
    named = "../host-private.key" if how == "relative" else str(host_file)
    targets = _targets(site, _snmp(community_file=named))
    assert _problems(site) == (
        f"{targets}[0].snmp.community_file: {host_file} is outside collector.secrets_dir "
        f"({site / 'secrets'})",
    )


def test_check_config_says_so_and_exits_1(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    targets = _targets(site, _snmp(community_file="../../../../../../etc/hostname"))
    assert main(["check-config", "--config", str(site / "spanwatch.yaml")]) == 1
    err = capsys.readouterr().err
    assert f"{targets}[0].snmp.community_file: " in err and "outside collector.secrets_dir" in err


def test_a_link_in_the_secrets_dir_pointing_out_is_refused(site: Path) -> None:
    os.symlink(site / "host-private.key", site / "secrets" / "sneaky")
    targets = _targets(site, _snmp(community_file="sneaky"))
    assert _problems(site) == (
        f"{targets}[0].snmp.community_file: {site / 'secrets/sneaky'} is outside collector.secrets_dir "
        f"({site / 'secrets'})",
    )


def test_a_link_swapped_in_after_loading_is_refused_when_read(site: Path) -> None:
    _targets(site, _snmp(community_file="community"))
    cfg = configuration.load(site / "spanwatch.yaml")
    snmp = cfg.target("evil").snmp
    assert snmp is not None and snmp.community is not None
    assert snmp.community.read() == "site-community"
    (site / "secrets" / "community").unlink()
    os.symlink(site / "host-private.key", site / "secrets" / "community")
    with pytest.raises(ConfigError, match="outside the secrets directory"):
        snmp.community.read()


def test_a_relative_config_path_finds_the_secret_in_the_secrets_dir(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _targets(site, _snmp(community_file="community"))
    monkeypatch.chdir(site)
    snmp = configuration.load(Path("spanwatch.yaml")).target("evil").snmp
    assert snmp is not None and snmp.community is not None and snmp.community.read() == "site-community"


def test_links_inside_the_secrets_dir_are_fine(site: Path) -> None:
    # Kubernetes mounts secrets as links into a hidden folder of the same directory
    (site / "secrets" / "..data").mkdir()
    (site / "secrets" / "..data" / "auth").write_text("k8s-auth\n")
    os.symlink("..data/auth", site / "secrets" / "auth")
    _targets(site, _snmp(community_file="auth"))
    snmp = configuration.load(site / "spanwatch.yaml").target("evil").snmp
    assert snmp is not None and snmp.community is not None and snmp.community.read() == "k8s-auth"


def test_without_a_secrets_dir_a_targets_file_names_no_file(site: Path) -> None:
    raw = yaml.safe_load((site / "spanwatch.yaml").read_text())
    del raw["collector"]["secrets_dir"]
    (site / "spanwatch.yaml").write_text(yaml.safe_dump(raw))
    targets = _targets(site, _snmp(community_file="community"))
    (problem,) = _problems(site)
    assert problem.startswith(f"{targets}[0].snmp.community_file: a targets file may name secret files only")


def test_a_targets_file_reads_no_environment_variable(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "cloud-secret")
    targets = _targets(site, _snmp(community_env="AWS_SECRET_ACCESS_KEY"))
    (problem,) = _problems(site)
    assert problem.startswith(f"{targets}[0].snmp.community_env: a targets file may not read environment")
    assert "cloud-secret" not in problem


def test_gnmi_secrets_and_tls_files_obey_the_same_rule(site: Path) -> None:
    targets = _targets(
        site,
        {
            "name": "evil",
            "gnmi": {
                "address": "127.0.0.1:9",
                "tls": {"key_file": "/etc/hostname"},
                "password_file": "../host-private.key",
                "username_env": "HOME",
            },
        },
    )
    problems = _problems(site)
    assert any(p.startswith(f"{targets}[0].gnmi.tls.key_file: /etc/hostname is outside") for p in problems)
    assert any(p.startswith(f"{targets}[0].gnmi.password_file: ") for p in problems)
    assert any(p.startswith(f"{targets}[0].gnmi.username_env: a targets file may not") for p in problems)


def test_credential_sets_of_the_main_config_are_the_way(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _targets(site, {"name": "ok", "credentials": "ro", "snmp": {"address": "127.0.0.1:9"}})
    snmp = configuration.load(site / "spanwatch.yaml").target("ok").snmp
    assert snmp is not None and snmp.community is not None and snmp.community.read() == "site-community"
    targets = _targets(
        site,
        {"name": "a", "credentials": "nope", "snmp": {"address": "127.0.0.1:9"}},
        {"name": "b", "credentials": "ro", "snmp": {"address": "127.0.0.1:9", "community_file": "community"}},
    )
    problems = _problems(site)
    assert f"{targets}[0].credentials: no credential set named 'nope' (known: gnmi-ro, ro)" in problems
    assert f"{targets}[1].snmp.community_file: given both here and by credentials 'ro'" in problems


def test_a_credential_set_holds_only_credentials(site: Path) -> None:
    raw = yaml.safe_load((site / "spanwatch.yaml").read_text())
    raw["credentials"]["ro"]["snmp"]["address"] = "198.51.100.1"
    (site / "spanwatch.yaml").write_text(yaml.safe_dump(raw))
    assert _problems(site) == ("credentials.ro.snmp: not credentials of a snmp section: address",)


def test_a_password_in_clear_needs_the_main_configs_opt_in(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GNMI_USER", "alice")
    gnmi = {"address": "127.0.0.1:9", "insecure": True}
    targets = _targets(site, {"name": "g", "credentials": "gnmi-ro", "gnmi": gnmi})
    assert _problems(site) == (
        f"{targets}[0].gnmi: a username or password over insecure: true travels in clear: use tls, "
        "or opt in with plaintext_credentials: true",
    )
    _targets(site, {"name": "g", "credentials": "gnmi-ro", "gnmi": {**gnmi, "plaintext_credentials": True}})
    (problem,) = _problems(site)
    assert problem == (
        f"{targets}[0].gnmi.plaintext_credentials: only the main config may opt in; use credentials: NAME "
        "(a set of the main config's credentials)"
    )
    raw = yaml.safe_load((site / "spanwatch.yaml").read_text())
    raw["credentials"]["gnmi-ro"]["gnmi"]["plaintext_credentials"] = True
    (site / "spanwatch.yaml").write_text(yaml.safe_dump(raw))
    _targets(site, {"name": "g", "credentials": "gnmi-ro", "gnmi": gnmi})
    cfg = configuration.load(site / "spanwatch.yaml").target("g").gnmi
    assert cfg is not None and cfg.plaintext_credentials


def test_sending_a_password_in_clear_warns_once(
    site: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("GNMI_USER", "alice")
    raw = yaml.safe_load((site / "spanwatch.yaml").read_text())
    raw["credentials"]["gnmi-ro"]["gnmi"]["plaintext_credentials"] = True
    (site / "spanwatch.yaml").write_text(yaml.safe_dump(raw))
    _targets(
        site, {"name": "g", "credentials": "gnmi-ro", "gnmi": {"address": "127.0.0.1:7", "insecure": True}}
    )
    cfg = configuration.load(site / "spanwatch.yaml").target("g").gnmi
    assert cfg is not None
    with caplog.at_level(logging.WARNING, logger=client.__name__):
        for _ in range(3):  # a stream redials: one warning, not one per dial
            assert dict(client.call_metadata(cfg))["username"] == "alice"
    warnings = [r.getMessage() for r in caplog.records if "in clear" in r.getMessage()]
    assert warnings == ["gNMI 127.0.0.1:7: username and password sent in clear (insecure: true)"]
