"""Benchmark: the simulator's SNMP agent, CPU per collector poll and values served per agent CPU second.

The agent runs in a child process serving one device's table (a fabric stepped for a few simulated
seconds, ``--waves`` waves); this process polls it ``--polls`` times with the collector's real
``SnmpSource`` and the modules the demo uses, and reads the child's ``time.process_time`` before and after,
so only the agent's CPU is counted (the collector's is not). Building the table from a snapshot (once per
poll at most in the running fabric: it is rebuilt lazily when a request finds a newer snapshot) is timed
separately in this process. The sim serves a few devices at 1 s polls, so a few thousand values per
second are what matter.

Run: ``.venv/bin/python bench/bench_sim_snmp.py [--waves 4] [--polls 200]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


from spanwatch.sim import snapshot, snmp_agent, snmp_mib
from spanwatch.sim.fabric import Fabric
from spanwatch.sim.layout import Layout
from spanwatch.sim.runtime import SNMP_MODULES
from spanwatch.sim.scenario import builtin

COMMUNITY = "bench"

_DEVICES = [d.name for d in Layout(builtin(episodes=False)).devices]  # the two ends of the link


def table(waves: int) -> Any:
    """Device 0's table after a few simulated seconds (counters large enough to take their full width)."""
    f = Fabric(builtin(waves=waves, episodes=False))
    f.advance(3.0)
    return snmp_mib.build(snapshot.take(f, time.time_ns(), 3.0), 0, _DEVICES[0])


def build_rate(waves: int, seconds: float = 2.0) -> tuple[int, float]:
    """(rows per table, tables built per CPU second)."""
    f = Fabric(builtin(waves=waves, episodes=False))
    f.advance(3.0)
    snap = snapshot.take(f, time.time_ns(), 3.0)
    rows = len(snmp_mib.build(snap, 0, _DEVICES[0])[0])
    n, start = 0, time.process_time()
    while time.process_time() - start < seconds:
        snmp_mib.build(snap, 0, _DEVICES[0])
        n += 1
    return rows, n / (time.process_time() - start)


def serve(waves: int) -> None:
    """Child: serve the table, print the port, then answer each stdin line with this process's CPU time."""
    fixed = table(waves)

    async def main() -> None:
        transport, port = await snmp_agent.serve(COMMUNITY, lambda: fixed)
        print(port, flush=True)
        done = asyncio.get_running_loop().create_future()

        def answer_cpu() -> None:  # a thread: it blocks on stdin, costing no CPU while it waits
            for _ in sys.stdin:
                print(time.process_time(), flush=True)
            done.get_loop().call_soon_threadsafe(done.set_result, None)

        threading.Thread(target=answer_cpu, daemon=True).start()
        await done
        transport.close()

    asyncio.run(main())


async def poll(port: int, polls: int, cpu: Callable[[], float]) -> tuple[int, float]:
    """(values served, agent CPU seconds) over ``polls`` polls by the collector's source."""
    from collector.config import Defaults, SnmpConfig
    from collector.sources.snmp.ber import Oid, VarBind
    from collector.sources.snmp.source import SnmpSource
    from collector.sources.snmp.transport import make_walker

    os.environ["SPANWATCH_BENCH_COMMUNITY"] = COMMUNITY
    cfg = SnmpConfig.model_validate(
        {
            "address": f"127.0.0.1:{port}",
            "community_env": "SPANWATCH_BENCH_COMMUNITY",
            "modules": list(SNMP_MODULES),
            "timeout": "5s",
        }
    )
    inner = make_walker(cfg, 5.0)
    served = [0]

    class Counting:
        """The collector's walker, counting the values it receives."""

        async def get(self, oids: Sequence[Oid]) -> list[VarBind]:
            got = await inner.get(oids)
            served[0] += len(got)
            return got

        async def bulk(self, oids: Sequence[Oid], max_repetitions: int) -> list[VarBind]:
            got = await inner.bulk(oids, max_repetitions)
            served[0] += len(got)
            return got

        async def close(self) -> None:
            await inner.close()

    source = SnmpSource(_DEVICES[0], cfg, Defaults(), walker=Counting())
    await source.poll()  # the label walk and first-poll work out of the way
    served[0] = 0
    before = cpu()
    for _ in range(polls):
        await source.poll()
    spent = cpu() - before
    await source.close()
    return served[0], spent


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--waves", type=int, default=4)
    p.add_argument("--polls", type=int, default=200)
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        serve(args.waves)
        return
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--waves", str(args.waves)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    ask, hear = child.stdin, child.stdout
    assert ask is not None and hear is not None
    try:
        port = int(hear.readline())

        def cpu() -> float:
            ask.write("cpu\n")
            ask.flush()
            return float(hear.readline())

        served, spent = asyncio.run(poll(port, args.polls, cpu))
    finally:
        ask.close()
        child.wait(10)
    rows, builds = build_rate(args.waves)
    per_poll = spent / args.polls
    print(
        f"  {args.waves} waves, {rows} rows per table, {args.polls} polls, {served // args.polls} values per poll"
    )
    print(
        f"  serving: {spent:.3f} CPU s, {per_poll * 1e3:.2f} ms per poll, {served / spent:,.0f} values/CPU s"
    )
    print(f"  table build: {1e3 / builds:.2f} ms per table ({builds:,.0f} tables/CPU s)")
    total = per_poll + 1 / builds
    print(
        f"  per poll with a fresh table: {total * 1e3:.2f} ms, {served / args.polls / total:,.0f} values/CPU s"
    )


if __name__ == "__main__":
    main()
