"""The queues as the gNMI agent served them beside ``tc -s -j`` read directly, one row per queue and reading.

``tc`` is read just before and just after the gNMI Get (``spanwatch.lab.agent get``): a counter seen over
gNMI should lie between the two ``tc`` readings (the agent samples every 50 ms, so it may trail the first
by that much); a backlog is a gauge and is only comparable roughly.
"""

from __future__ import annotations

import json
import re
from typing import Any

from spanwatch.lab.config import SITES
from spanwatch.lab.netns import run
from spanwatch.lab.topology import Plan, class_id, device, router_ns

_SENT = re.compile(
    r"Sent (?P<bytes>\d+) bytes (?P<packets>\d+) pkt \(dropped (?P<drops>\d+), overlimits (?P<overlimits>\d+) "
    r"requeues (?P<requeues>\d+)\)"
)

_PATH = re.compile(r"interface\[interface-id=([^\]]+)\]/output/queues/queue\[name=([^\]]+)\]/state/([\w-]+)$")
_DEPTH = re.compile(
    r"buffer-allocation-profile\[name=([^\]]+)\]/queues/queue\[name=([^\]]+)\]/state/dedicated-buffer$"
)
GNMI_LEAVES = {
    "transmit-octets": "sent_bytes",
    "transmit-pkts": "sent_packets",
    "dropped-pkts": "drops",
    "instant-queue-len": "backlog_bytes",
    "instant-queue-len-pkts": "backlog_packets",
    "max-queue-len": "watermark_bytes",
    "overlimits": "overlimits",
    "requeues": "requeues",
}


def tc_classes(ns: str, dev: str) -> list[dict[str, Any]]:
    """``tc -s class show`` of one device, parsed (this iproute2 prints htb classes as text even with -j)."""
    text = run(["tc", "-n", ns, "-s", "class", "show", "dev", dev])
    out = []
    for block in re.split(r"\n(?=class )", text.strip()):
        head = re.match(r"class (\w+) (\S+)", block)
        sent = _SENT.search(block)
        if head and sent:
            out.append(
                {
                    "what": "class",
                    "dev": dev,
                    "kind": head.group(1),
                    "handle": head.group(2),
                    **{k: int(v) for k, v in sent.groupdict().items()},
                }
            )
    return out


def job_bytes(plan: Plan) -> dict[tuple[str, int], int]:
    """Bytes the job's class has sent, per (site, link index): which way its data crosses each link."""
    cid = class_id(plan.config.job.traffic_class)
    out: dict[tuple[str, int], int] = {}
    for site in SITES:
        text = run(["tc", "-n", router_ns(site), "-s", "-j", "qdisc", "show"])
        entries = [{"what": "qdisc", **e} for e in json.loads(text or "[]")]
        for link in plan.links:
            out[(site, link.index)] = int(_entry(entries, "qdisc", link.ifname, f"{cid}:").get("bytes", 0))
    return out


def _entry(entries: list[dict[str, Any]], what: str, dev: str, handle: str) -> dict[str, Any]:
    found = (e for e in entries if e["what"] == what and e.get("dev") == dev and e.get("handle") == handle)
    return next(found, {})


def _tc(reading: dict[str, Any], dev: str, cid: str) -> dict[str, Any]:
    leaf = _entry(reading["entries"], "qdisc", dev, f"{cid}:")
    klass = _entry(reading["entries"], "class", dev, f"1:{cid}")
    return {
        "time": reading["time"],
        "sent_bytes": leaf.get("bytes"),
        "sent_packets": leaf.get("packets"),
        "drops": leaf.get("drops"),
        "backlog_bytes": leaf.get("backlog"),
        "backlog_packets": leaf.get("qlen"),
        "overlimits": klass.get("overlimits"),
        "requeues": (klass.get("requeues") or 0) + (leaf.get("requeues") or 0),
        "limit_bytes": (leaf.get("options") or {}).get("limit"),
    }


def qdisc_rows(raw: dict[str, Any], label: str, site: str, plan: Plan) -> list[dict[str, Any]]:
    """Rows of one check reading: per queue, ``tc`` before, gNMI, ``tc`` after."""
    served: dict[tuple[str, str], dict[str, Any]] = {}
    depth: dict[str, int] = {}
    for item in raw["gnmi"]:
        m = _PATH.search(item["path"])
        if m and m.group(3) in GNMI_LEAVES:
            queue = served.setdefault((m.group(1), m.group(2)), {"time": item["time_ns"] / 1e9})
            queue[GNMI_LEAVES[m.group(3)]] = item["value"]
        d = _DEPTH.search(item["path"])
        if d:
            depth[d.group(1)] = int(item["value"])
    rows = []
    job = plan.config.job
    for link in plan.links:
        for tclass in (job.traffic_class, job.background_class):
            cid = class_id(tclass)
            gnmi = {
                **served.get((link.ifname, str(tclass)), {}),
                "buffer_bytes": depth.get(link.spec.profile),
            }
            rows.append(
                {
                    "check": label,
                    "time": raw["time"],
                    "device": device(site),
                    "site": site,
                    "link": link.spec.name,
                    "interface": link.ifname,
                    "queue": str(tclass),
                    "tc_before": _tc(raw["tc_before"], link.ifname, cid),
                    "gnmi": gnmi,
                    "tc_after": _tc(raw["tc_after"], link.ifname, cid),
                }
            )
    return rows


def summarise_checks(rows: list[dict[str, Any]]) -> None:
    """Print the side by side table."""
    from analyzer.text_table import TextTable

    columns = (
        "check",
        "device",
        "if",
        "q",
        "sent bytes tc|gnmi|tc",
        "drops",
        "backlog B",
        "watermark",
        "overlimits",
        "depth B",
    )
    table = TextTable("queues: gNMI agent vs tc -s qdisc (before / after the Get)", columns)

    def trio(row: dict[str, Any], key: str) -> str:
        return " | ".join(str(row[side].get(key)) for side in ("tc_before", "gnmi", "tc_after"))

    for r in rows:
        if r["site"] not in SITES:
            continue
        table.add_row(
            r["check"], r["device"], r["interface"], r["queue"], trio(r, "sent_bytes"), trio(r, "drops"),
            trio(r, "backlog_bytes"), str(r["gnmi"].get("watermark_bytes")), trio(r, "overlimits"),
            f"{r['tc_before'].get('limit_bytes')} | {r['gnmi'].get('buffer_bytes')}",
        )  # fmt: skip
    print(table.render())
