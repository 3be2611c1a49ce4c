"""Config: strict schema, cross-checks, every problem with its location, secrets never echoed."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from collector import config as configuration
from collector.errors import ConfigError
from spanwatch.cli import main

GOOD = """
collector:
  listen: 127.0.0.1:9464
  archive: {path: ./archive, flush_interval: 1s}
defaults: {interval: 10s, timeout: 5s}
targets:
  - name: dci1.site-a
    labels: {site: a, vendor: arista, model: 7280R3}
    snmp:
      address: 192.0.2.10:161
      version: 3
      user: monitor
      auth_protocol: SHA256
      auth_key_file: secrets/auth
      priv_protocol: AES
      priv_key_file: secrets/priv
      modules: [if_mib]
  - name: dci1.site-b
    labels: {site: b}
    snmp: {address: 192.0.2.11, community_env: SW_COMMUNITY}
    gnmi:
      address: 192.0.2.11:6030
      insecure: true
      sample_interval: 500ms
      subscriptions: [interfaces]
links:
  - name: paris-lyon-1
    site_a: a
    site_b: b
    distance_km: 100
    members:
      - {device: dci1.site-a, interface: Ethernet1/1}
      - {device: dci1.site-b, interface: Ethernet1/1}
"""


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets/auth").write_text("authpass-secret\n")
    (tmp_path / "secrets/priv").write_text("privpass-secret\n")
    monkeypatch.setenv("SW_COMMUNITY", "public-secret")
    return tmp_path


def _write(folder: Path, text: str) -> Path:
    path = folder / "spanwatch.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_the_spec_example_loads(workdir: Path) -> None:
    cfg = configuration.load(_write(workdir, GOOD))
    a, b = cfg.targets
    assert a.snmp is not None and a.snmp.auth_key is not None
    assert a.snmp.auth_key.read() == "authpass-secret"  # relative to the config file, newline stripped
    assert b.snmp is not None and b.snmp.address == "192.0.2.11:161" and b.snmp.community is not None
    assert b.snmp.community.read() == "public-secret"
    assert b.gnmi is not None and b.gnmi.sample_interval == 0.5
    assert cfg.collector.archive is not None and cfg.collector.archive.path == workdir / "archive"
    assert cfg.links[0].distance_km == 100


def test_every_problem_is_reported_with_its_location_in_one_pass(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = GOOD.replace("secrets/auth", "secrets/missing").replace("modules: [if_mib]", "modules: [nope]")
    bad = bad.replace("device: dci1.site-b, interface", "device: dci9, interface")
    bad = bad.replace("insecure: true", "insecure: true\n      colour: blue")
    bad = bad.replace("interval: 10s, timeout: 5s", "interval: 10s, timeout: soon")
    monkeypatch.delenv("SW_COMMUNITY")
    with pytest.raises(ConfigError) as info:
        configuration.load(_write(workdir, bad))
    problems = info.value.problems
    # schema errors, missing secrets, unset variables and dangling links, all at once (issue 32 point 7)
    assert "targets[1].gnmi.colour: unknown key" in problems
    assert any(p.startswith("defaults.timeout: ") for p in problems)
    assert any(p.startswith("targets[0].snmp.modules[0]: unknown module 'nope'") for p in problems)
    assert f"targets[0].snmp.auth_key_file: file not found: {workdir / 'secrets/missing'}" in problems
    assert "links[0].members[1].device: no target named 'dci9'" in problems
    # the rest of a target with a schema error is still checked, and its name is not dangling
    assert "targets[1].snmp.community_env: environment variable SW_COMMUNITY is not set" in problems
    assert not any("dci1.site-b" in p for p in problems)
    assert len(problems) == 6, problems


def test_an_unset_variable_and_a_bad_link_are_found_beside_a_schema_error(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SW_COMMUNITY")
    bad = GOOD.replace("distance_km: 100", "distance_km: -1").replace(
        "user: monitor", "user: monitor\n      x: 1"
    )
    with pytest.raises(ConfigError) as info:
        configuration.load(_write(workdir, bad))
    problems = info.value.problems
    assert "targets[0].snmp.x: unknown key" in problems
    assert any(p.startswith("links[0].distance_km: ") for p in problems)
    assert "targets[1].snmp.community_env: environment variable SW_COMMUNITY is not set" in problems


def test_check_config_prints_every_problem_once(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("SW_COMMUNITY")
    bad = GOOD.replace("secrets/priv", "secrets/gone").replace("insecure: true", "insecure: true\n      x: 1")
    assert main(["check-config", "--config", str(_write(workdir, bad))]) == 1
    err = capsys.readouterr().err
    assert "targets[1].gnmi.x: unknown key" in err
    assert f"targets[0].snmp.priv_key_file: file not found: {workdir / 'secrets/gone'}" in err
    assert "targets[1].snmp.community_env: environment variable SW_COMMUNITY is not set" in err


def test_durations_need_units(workdir: Path) -> None:
    with pytest.raises(ConfigError, match=r"defaults.interval: .*not a duration"):
        configuration.load(_write(workdir, GOOD.replace("interval: 10s", "interval: 10")))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("version: 3", "version: 2c"), "needs community_env or community_file"),
        (("insecure: true", "insecure: false"), "either tls"),
        (("user: monitor", "user: ''"), "SNMPv3 needs user"),
        (("{site: b}", "{site: b, device: x}"), "reserved names"),
    ],
)
def test_cross_field_rules(workdir: Path, change: tuple[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        configuration.load(_write(workdir, GOOD.replace(*change)))


def test_secrets_never_appear_in_errors_or_repr(workdir: Path) -> None:
    cfg = configuration.load(_write(workdir, GOOD))
    assert "public-secret" not in repr(cfg) and "authpass" not in repr(cfg)
    leaky = GOOD.replace("community_env: SW_COMMUNITY", "community: public-secret")
    with pytest.raises(ConfigError) as info:
        configuration.load(_write(workdir, leaky))
    assert "public-secret" not in str(info.value)


def test_check_config_command(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = _write(workdir, GOOD)
    assert main(["check-config", "--config", str(good)]) == 0
    assert "ok (2 targets, 1 links)" in capsys.readouterr().out
    bad = _write(workdir, GOOD.replace("distance_km: 100", "distance_km: -1"))
    assert main(["check-config", "--config", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "links[0].distance_km: Input should be greater than 0" in err
    assert "Traceback" not in err


def test_missing_and_unparsable_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="No such file"):
        configuration.load(tmp_path / "absent.yaml")
    (tmp_path / "x.yaml").write_text("targets: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        configuration.load(tmp_path / "x.yaml")


def test_web_config_contents_are_checked(workdir: Path) -> None:
    (workdir / "web.yml").write_text("basic_auth_users: {prom: not-a-bcrypt-hash}\ntls_server_config: {}\n")
    with_web = GOOD.replace("listen: 127.0.0.1:9464", "listen: 127.0.0.1:9464\n  web_config: web.yml")
    with pytest.raises(ConfigError) as info:
        configuration.load(_write(workdir, with_web))
    assert all(p.startswith("collector.web_config: ") for p in info.value.problems)
    assert "not-a-bcrypt-hash" not in str(info.value)
    assert len(info.value.problems) >= 2


def test_targets_files_join_the_config_with_their_locations(tmp_path: Path) -> None:
    from collector import shard

    (tmp_path / "targets").mkdir()
    (tmp_path / "targets" / "a.yaml").write_text(
        "- {name: f1, credentials: ro, snmp: {address: 192.0.2.1}}\n"
        "- {name: f2, credentials: ro, snmp: {address: 192.0.2.2}}\n"
    )
    (tmp_path / "targets" / "empty.yaml").write_text("")
    (tmp_path / "c.yaml").write_text(
        "credentials: {ro: {snmp: {community_env: C}}}\ntargets_files: [targets/*.yaml]\ntargets:\n  - {name: inline, snmp: {address: 192.0.2.3, community_env: C}}\n"
    )
    import os

    os.environ["C"] = "public"
    try:
        cfg = configuration.load(tmp_path / "c.yaml")
        assert [t.name for t in cfg.targets] == ["inline", "f1", "f2"]
        shards = [shard.select(cfg, shard.Shard(i, 2)) for i in range(2)]
        assert sorted(t.name for s in shards for t in s.targets) == ["f1", "f2", "inline"]
        (tmp_path / "targets" / "b.yaml").write_text(
            "- {name: inline, credentials: ro, snmp: {address: 192.0.2.4}}\n- {name: x, snmp: {address: 192.0.2.5}}\n"
        )
        with pytest.raises(ConfigError) as e:
            configuration.load(tmp_path / "c.yaml")
    finally:
        del os.environ["C"]
    b = tmp_path / "targets" / "b.yaml"
    assert f"{b}[1].snmp: SNMPv2c needs community_env or community_file" in e.value.problems
    (tmp_path / "targets" / "b.yaml").write_text(
        "- {name: inline, credentials: ro, snmp: {address: 192.0.2.4}}\n"
    )
    with pytest.raises(ConfigError) as e:
        configuration.load(tmp_path / "c.yaml")
    assert f"{b}[0].name: duplicate target name 'inline'" in e.value.problems


def test_user_mapping_directories_are_checked(tmp_path: Path) -> None:
    (tmp_path / "maps").mkdir()
    (tmp_path / "maps" / "if_mib.yaml").write_text("description: x\n")
    (tmp_path / "c.yaml").write_text("mappings: {snmp_dirs: [maps], gnmi_dirs: [nowhere]}\n")
    with pytest.raises(ConfigError) as e:
        configuration.load(tmp_path / "c.yaml")
    assert f"mappings.gnmi_dirs[0]: directory not found: {tmp_path / 'nowhere'}" in e.value.problems
    assert any(
        p.startswith("mappings.snmp_dirs[0]: if_mib.yaml: 'if_mib' is the name of a shipped")
        for p in e.value.problems
    )
