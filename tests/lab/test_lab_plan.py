"""The lab's plan and config without root: containment, shaping, routing, validation."""

from __future__ import annotations

import argparse
import ipaddress
from pathlib import Path

import pytest

from collector.errors import ConfigError
from spanwatch.lab import command as lab_command
from spanwatch.lab import config as lab_config
from spanwatch.lab.config import LabConfig
from spanwatch.lab.topology import Plan

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "lab"
LAB_RANGES = (ipaddress.ip_network("198.18.0.0/15"),)


@pytest.fixture(scope="module")
def plan() -> Plan:
    return Plan(lab_config.load(lab_config.DEFAULT))


def test_examples_load() -> None:
    for path in [lab_config.DEFAULT, *sorted(EXAMPLES.glob("*.yaml"))]:
        config = lab_config.load(path)
        assert len(config.links) >= 2 and config.episodes


def test_every_command_acts_inside_a_lab_namespace(plan: Plan) -> None:
    """No command touches the host's namespace: each names a swlab- namespace (-n, netns exec, or both
    veth ends created in one)."""
    for cmd in plan.build(netem=False):
        if cmd[:3] == ["ip", "netns", "add"]:
            assert cmd[3].startswith("swlab-")
        elif cmd[:3] == ["ip", "link", "add"]:
            spaces = [cmd[i + 1] for i, w in enumerate(cmd) if w == "netns"]
            assert len(spaces) == 2 and all(s.startswith("swlab-") for s in spaces), cmd
        elif cmd[:3] == ["ip", "netns", "exec"]:
            assert cmd[3].startswith("swlab-"), cmd
        else:
            assert cmd[0] in ("ip", "tc") and cmd[1] == "-n" and cmd[2].startswith("swlab-"), cmd


def test_addresses_stay_in_the_benchmarking_range(plan: Plan) -> None:
    """Every address the lab assigns or routes is RFC 2544's 198.18.0.0/15, never a default route out."""
    for cmd in plan.build(netem=False):
        for word in cmd:
            head = word.split("/")[0]
            try:
                address = ipaddress.ip_address(head)
            except ValueError:
                continue
            assert any(address in net for net in LAB_RANGES), (word, cmd)
        if "route" in cmd and "default" in cmd:
            # only hosts have a default route, and it points at their own router inside the lab
            assert cmd[2].startswith("swlab-") and ipaddress.ip_address(cmd[-1]) in LAB_RANGES[0]


def test_each_link_end_is_shaped_per_class(plan: Plan) -> None:
    cmds = [" ".join(c) for c in plan.build(netem=False)]
    for link in plan.links:
        for ns in ("swlab-ra", "swlab-rb"):
            mine = [c for c in cmds if f"-n {ns} " in c and f"dev {link.ifname} " in c]
            assert any("root handle 1: htb" in c for c in mine)
            assert sum(f"bfifo limit {link.spec.buffer_bytes}" in c for c in mine) == 2
            assert any("match ip tos 0x60 0xfc flowid 1:13" in c for c in mine)


def test_ring_flows_are_pinned_to_distinct_links(plan: Plan) -> None:
    flows = plan.ring_flows()
    assert len(flows) == 2
    assert {link.spec.name for _, _, link in flows} == {"ab-1", "ab-2"}
    assert all(src.site != dst.site for src, dst, _ in flows)


def test_config_problems_are_located(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "duration: 30s\nlinks: [{name: ab-1}, {name: ab-2}]\n"
        "episodes:\n"
        "  - {kind: congestion, link: ab-9, start: 5s, duration: 5s}\n"
        "  - {kind: link_down, link: ab-1, start: 28s, duration: 5s}\n"
        "  - {kind: compute_stall, start: 1s, duration: 1s, ranks: [7]}\n"
        "  - {kind: rate_cut, link: ab-1, start: 1s, duration: 1s, speed: 3}\n"
    )
    with pytest.raises(ConfigError) as caught:
        lab_config.load(bad)
    text = "\n".join(caught.value.problems)
    assert "episodes.3.speed" in text
    bad.write_text(bad.read_text().replace(", speed: 3", ""))
    with pytest.raises(ConfigError) as caught:
        lab_config.load(bad)
    problems = caught.value.problems
    assert any(p.startswith("episodes[0].link: 'ab-9'") for p in problems)
    assert any(p.startswith("episodes[1]: ends at 33 s") for p in problems)
    assert any(p.startswith("episodes[2].ranks") for p in problems)


def test_duration_override_rechecks_episodes() -> None:
    with pytest.raises(ConfigError):
        lab_config.load(lab_config.DEFAULT, duration=30)
    assert LabConfig.model_validate({"links": [{"name": "x"}, {"name": "y"}]}).duration == 120


def test_each_link_is_probed_over_itself_both_ways(plan: Plan) -> None:
    """The collector (management namespace) reaches each link's far address through the near router, and
    the far router answers over the same link (its own table, chosen by the reflector's address)."""
    cmds = plan.build(netem=False)
    for link in plan.links:
        far = link.address("b")
        assert plan.probe_target(link) == f"{far}:862"
        assert ["ip", "-n", "swlab-mgmt", "route", "add", f"{far}/32", "via", plan.mgmt_address("a")] in cmds
        table = str(200 + link.index)
        assert [
            "ip",
            "-n",
            "swlab-rb",
            "rule",
            "add",
            "from",
            far,
            "to",
            "198.19.1.0/24",
            "table",
            table,
        ] in cmds
        back = ["ip", "-n", "swlab-rb", "route", "add", "198.19.1.0/24", "via", link.address("a")]
        assert [*back, "dev", link.ifname, "table", table] in cmds


def test_the_lab_runs_its_built_in_file_without_config() -> None:
    # The issue's own command is `spanwatch lab --duration 120 --out DIR`: no --config.
    parser = argparse.ArgumentParser()
    lab_command.arguments(parser)
    args = parser.parse_args(["--duration", "120", "--out", "x"])
    assert args.config == lab_config.DEFAULT
    assert lab_config.load(args.config, args.duration).duration == 120
