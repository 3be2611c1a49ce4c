"""Process set-up shared by the daemon, its supervisor and its workers."""

from __future__ import annotations

import ctypes
import gc
import logging
import resource

log = logging.getLogger(__name__)


def raise_descriptor_limit() -> None:
    """Raise the soft descriptor limit to the hard one (as Go programs do at start): every target, scrape
    connection and archive file takes one, and the soft default of 1024 is easy to exhaust."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (OSError, ValueError) as e:  # a seccomp filter may refuse setrlimit: keep what we have
        log.debug("cannot raise the descriptor limit: %s", e)


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter (malloc.h)
MMAP_THRESHOLD = 128 * 1024  # glibc's default, held: blocks this large are mapped, and unmapped when freed


def return_large_blocks() -> bool:
    """Have glibc's allocator give large blocks back to the system when they are freed (issue 33).

    glibc raises its mmap threshold each time a mapped block is freed, up to 32 MB, so after the first
    scrape the exposition's megabyte chunks and the store's growing columns come from the heap, whose
    freed space stays in the process among the small objects allocated after them: 14-25 MB of RSS at
    200 SNMP targets (94.6 -> 80.4 MB before the first scrape, 106.3 -> 81.4 MB after two). Holding the
    threshold at its default turns that adjustment off (``mallopt(3)``). Elsewhere (musl, macOS) nothing
    is done.

    Returns:
        whether the allocator took the setting.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))


class HeapFreezer:
    """Keeps the store's long-lived objects out of the cyclic garbage collector's way (``gc.freeze``).

    A full collection walks every tracked object: at 64k series a worker stalled 80-240 ms, and the polls
    in flight took that stall. The series, labels and counter tracks hold no reference cycles and are
    freed by reference counting, so once the store has filled they need no collector at all. Freezing
    happens when the store has at least doubled since the last freeze and then held still for a tick, so
    it happens a few times in a process' life. It is not preceded by a collection, which would be the
    very stall it avoids: cyclic garbage that exists at that instant is kept, a few times, bounded.
    """

    def __init__(self) -> None:
        self._frozen = 0  # series at the last freeze
        self._last = -1  # series at the last tick

    def tick(self, series: int) -> bool:
        """Call every housekeeping tick with the store's series count; True when it froze the heap."""
        settled, self._last = series == self._last, series
        if not settled or series == 0 or series < 2 * self._frozen:
            return False
        gc.freeze()
        self._frozen = series
        log.debug("froze the heap at %d series (%d objects)", series, gc.get_freeze_count())
        return True
