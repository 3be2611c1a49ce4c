"""Secret files a targets file may name: only inside the configured secrets directory (issue 34).

Whoever writes a targets file (a discovery system) must not be able to make the collector read any file on
the host and send it to an address of their choosing. A path is checked twice: when the config is loaded
(``outside``), and again on the file actually opened (``read_bytes``), so a link swapped in later that points
out of the directory is refused too. Links inside the directory are fine (Kubernetes mounts secrets that way).
"""

from __future__ import annotations

import os
from pathlib import Path

from collector.errors import ConfigError


def _inside(real: str, root: Path) -> bool:
    top = os.path.realpath(root)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def outside(path: Path, root: Path) -> bool:
    """True when ``path``, every link followed, is not inside ``root``."""
    return not _inside(os.path.realpath(path), root)


def read_bytes(path: Path, root: Path | None) -> bytes:
    """The content of ``path``; with ``root``, only if the file opened is inside it.

    Raises:
        ConfigError: the file cannot be read, or it is outside ``root``.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        raise ConfigError(f"{path}: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        if root is not None:
            opened = f"/proc/self/fd/{fd}"
            real = os.readlink(opened) if os.path.islink(opened) else os.path.realpath(path)
            if not _inside(real, root):
                raise ConfigError(f"{path}: outside the secrets directory {root}")
        try:
            return f.read()
        except OSError as e:
            raise ConfigError(f"{path}: {e.strerror}") from None
