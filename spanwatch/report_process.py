"""The vendor report rendered in a second process while this one scores (``spanwatch demo --fast``).

The report (``analyzer.report.command.write_report``: matplotlib's charts, HTML, Markdown, JSON) and the
score (the control analysis and the figures) read the same finished analysis and write different files, so
they can run side by side. The process starts before the recording and does its imports (matplotlib, the
report) while the recording runs: what is left after the analysis is the longer of the report and the score,
not both. The files are the ones ``write_report`` writes in this process. It is forked while polars is not
yet imported here (polars starts threads on import, and a fork of them deadlocks the child's first query),
else started afresh (``spawn``: the same, with all its imports to do).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import sys
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from collector.errors import SpanwatchError


class ReportProcessError(SpanwatchError):
    """The report failed: an input's problem in the words ``write_report`` raised it with, or a bug's
    traceback."""


class ReportProcess:
    """One report, rendered in another process on ``render``; ``written`` waits for it."""

    def __init__(self) -> None:
        ours, theirs = multiprocessing.Pipe()
        fork = _can_fork()
        self.method = "fork" if fork else "spawn"
        context = multiprocessing.get_context("fork") if fork else multiprocessing.get_context("spawn")
        # Forked, it holds a copy of our end too; it closes it, so that our end closing (we died) ends it.
        self.process = context.Process(
            target=_serve, args=(theirs, ours), name="spanwatch-report", daemon=True
        )
        self.process.start()
        theirs.close()
        self.conn = ours

    def render(self, analysis_dir: Path, config: Path | None, claims: Path | None) -> None:
        """Start ``write_report(analysis_dir, config, claims)`` there."""
        with contextlib.suppress(OSError):  # it has ended (failed importing): ``written`` says why
            self.conn.send((analysis_dir, config, claims))

    def written(self) -> list[Path]:
        """The files written (``write_report``'s answer), or its exception raised here."""
        try:
            answer = self.conn.recv()
        except EOFError:
            raise ReportProcessError(
                f"the report's process ended without answering (exit {self.process.exitcode})"
            ) from None
        if isinstance(
            answer, _Failed
        ):  # a bad input in its own words (as in this process); a bug with its place
            raise ReportProcessError(answer.message if answer.traceback is None else answer.traceback)
        assert isinstance(answer, list)
        return answer

    def close(self) -> None:
        """Stop the process (idempotent): a report never asked for is not rendered."""
        with contextlib.suppress(OSError):
            self.conn.send(None)
        self.process.join(timeout=5.0)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


def _can_fork() -> bool:
    """Whether a fork of this process is safe: the platform forks and no polars thread runs yet."""
    return "fork" in multiprocessing.get_all_start_methods() and "polars" not in sys.modules


@dataclass(frozen=True)
class _Failed:
    """What the report's process raised: its message, and for a bug (not a ``SpanwatchError``) where."""

    message: str
    traceback: str | None


def _serve(conn: Connection, demos_end: Connection) -> None:
    """The report's process: imports first, then one report when asked (``None``: none)."""
    demos_end.close()
    try:
        # What rendering imports anyway, done while the recording runs.
        import matplotlib.backends.backend_svg
        import matplotlib.figure  # noqa: F401

        from analyzer.report.command import write_report

        request = conn.recv()
        if request is None:
            return
        analysis_dir, config, claims = request
        conn.send(write_report(analysis_dir, config, claims))
    except EOFError:
        return  # the demo ended before asking
    except BaseException as e:  # any failure goes to the demo, which raises it
        failed = _Failed(str(e), None if isinstance(e, SpanwatchError) else traceback.format_exc())
        with contextlib.suppress(OSError):
            conn.send(failed)
    finally:
        conn.close()
