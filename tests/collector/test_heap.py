"""The heap: frozen out of the cyclic collector's way once the store has filled (issue 18, p99 polls), and
its large blocks given back when freed (issue 33)."""

from __future__ import annotations

import gc
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from collector.process import HeapFreezer

ROOT = Path(__file__).resolve().parents[2]


def test_freezes_once_the_store_settles_and_again_only_after_it_doubled() -> None:
    heap = HeapFreezer()
    try:
        assert [heap.tick(n) for n in (0, 0, 500, 900, 1000)] == [False] * 5  # empty, then still growing
        assert heap.tick(1000)  # held still for a tick: frozen
        assert gc.get_freeze_count() > 0
        assert [heap.tick(n) for n in (1000, 1500, 1500, 1900)] == [False] * 4  # not doubled yet
        assert [heap.tick(n) for n in (2000, 2000)] == [False, True]
    finally:
        gc.unfreeze()


_RETAINED = """
import sys
from collector.process import return_large_blocks

def rss():
    return int([x for x in open("/proc/self/status") if x.startswith("VmRSS")][0].split()[1]) / 1024

if sys.argv[1] == "held":
    assert return_large_blocks()
x = bytes(8 << 20)
del x  # a large block freed: glibc's threshold follows it up, unless held
base = rss()
chunks, small = [], []
for _ in range(40):
    chunks.append(b"x" * (1 << 20))  # megabyte blocks, as an exposition's chunks
    small.append([object() for _ in range(200)])  # long-lived small objects allocated after each
del chunks
print(rss() - base)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mmap threshold")
def test_large_blocks_go_back_to_the_system_once_freed() -> None:
    """40 MB of megabyte blocks freed among live small objects: kept by the process under glibc's
    moving threshold (the control), returned with it held (``return_large_blocks``)."""

    def retained(mode: str) -> float:
        run = subprocess.run(
            [sys.executable, "-c", _RETAINED, mode], capture_output=True, text=True, check=True, cwd=ROOT
        )
        return float(run.stdout)

    assert retained("moving") > 30
    assert retained("held") < 5
