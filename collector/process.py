"""Process set-up shared by the daemon, its supervisor and its workers."""

from __future__ import annotations

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
