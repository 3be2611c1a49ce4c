"""Shard assignment: Prometheus's hashmod, a partition of the targets, and the config each replica keeps."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collector import config as configuration
from collector import shard


def test_hashmod_is_prometheus_md5_last_8_bytes_big_endian() -> None:
    digest = hashlib.md5(b"dci1.site-a;snmp").digest()
    assert shard.hashmod(["dci1.site-a", "snmp"], 7) == int.from_bytes(digest[8:], "big") % 7
    assert shard.hashmod([""], 1) == 0


@given(names=st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=40, unique=True),
       count=st.integers(1, 9))  # fmt: skip
def test_every_target_has_exactly_one_shard(names: list[str], count: int) -> None:
    for name in names:
        owners = [i for i in range(count) if shard.Shard(i, count).owns(name)]
        assert owners == [shard.hashmod([name], count)]


@pytest.mark.parametrize(("spec", "expected"), [("0/1", (0, 1)), ("2/3", (2, 3)), (" 1 / 4 ", (1, 4))])
def test_parse(spec: str, expected: tuple[int, int]) -> None:
    assert shard.parse(spec) == shard.Shard(*expected)


@pytest.mark.parametrize("spec", ["3/3", "0/0", "-1/2", "a/b", "1", "$(POD_INDEX)/3"])
def test_parse_rejects(spec: str) -> None:
    with pytest.raises(ValueError, match="not a shard"):
        shard.parse(spec)


def _config(n: int) -> configuration.Config:
    targets = [{"name": f"dci{i}", "labels": {"site": "ab"[i % 2]}, "gnmi": {"address": f"192.0.2.{i}:6030",
                "insecure": True}} for i in range(n)]  # fmt: skip
    members = [{"device": f"dci{i}", "interface": "Ethernet1/1"} for i in range(n)]
    return configuration.parse(
        {
            "targets": targets,
            "links": [{"name": "l1", "site_a": "a", "site_b": "b", "distance_km": 100, "members": members}],
        }
    )


def test_select_partitions_targets_and_link_members() -> None:
    config, count = _config(20), 3
    parts = [shard.select(config, shard.Shard(i, count)) for i in range(count)]
    names = sorted(t.name for p in parts for t in p.targets)
    assert names == sorted(t.name for t in config.targets)
    members = sorted(m.device for p in parts for link in p.links for m in link.members)
    assert members == names
    for i, part in enumerate(parts):
        assert all(shard.hashmod([t.name], count) == i for t in part.targets)
        assert not configuration.cross_check(part)
    assert shard.select(config, None) is config


def test_a_link_with_no_member_here_is_dropped() -> None:
    config = _config(1)
    other = next(i for i in range(2) if not shard.Shard(i, 2).owns("dci0"))
    assert shard.select(config, shard.Shard(other, 2)).links == ()


def test_cli_takes_the_shard() -> None:
    from spanwatch.cli import parser

    args = parser().parse_args(["collect", "--config", "x.yaml", "--shard", "1/2"])
    assert args.shard == shard.Shard(1, 2)
    with pytest.raises(SystemExit):
        parser().parse_args(["collect", "--config", "x.yaml", "--shard", "2/2"])
