"""The ``--out`` folder a ``spanwatch demo`` or ``spanwatch lab`` run records into.

The analysis reads the folder's whole archive, so an earlier run's recording left beside a new one would be
analysed with it (``./dev demo`` twice into ``out`` did). A folder an earlier demo or lab wrote (its marker,
or the ``truth.json`` every finished run writes, so folders of earlier versions count too) is the command's
to replace; an archive in any other folder is someone's data: refused, never removed.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

from collector.errors import SpanwatchError

MARKERS = {"demo": ".spanwatch-demo", "lab": ".spanwatch-lab"}  # written into --out by each command


class RunFolderError(SpanwatchError):
    """``--out`` holds an archive no demo or lab wrote, or an earlier run could not be removed."""


def replace_earlier_run(out: Path, command: str, recorded: Iterable[str]) -> None:
    """Make ``out`` hold nothing of an earlier run's recording, then mark it as ``command``'s.

    Args:
        out: the run's output folder (created when missing).
        command: ``demo`` or ``lab`` (the marker it writes).
        recorded: the names in ``out`` an earlier run recorded (folders or files), removed when it is ours;
            other files stay. A symbolic link loses only the link, never what it points to.

    Raises:
        RunFolderError: ``out`` holds an archive no demo or lab wrote, or the earlier run could not be
            removed (a stale archive left in place would be analysed with the new run).
    """
    archive = out / "archive"
    ours = any((out / m).is_file() for m in MARKERS.values()) or (out / "truth.json").is_file()
    if (archive.exists() or archive.is_symlink()) and not ours:
        raise RunFolderError(
            f"{archive} exists and no spanwatch {command} wrote it: choose another --out (nothing was changed)"
        )
    try:
        if ours:
            for name in recorded:
                entry = out / name
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink(missing_ok=True)
        out.mkdir(parents=True, exist_ok=True)
        (out / MARKERS[command]).write_text(
            f"written by spanwatch {command}: the next demo or lab into this folder replaces its run\n"
        )
    except OSError as e:
        raise RunFolderError(f"cannot replace the earlier run in {out}: {e}") from e
