"""The fast recording's model side: the fabric stepped to each snapshot the recorder asks for.

The recorder (``spanwatch.fast``) plans every snapshot time at the start (``spanwatch.fast_schedule``), so
that a model in a second process (``ModelProcess``, the default on a machine with fork) steps on from one
to the next while the recorder does the collector's work on the snapshots already taken (a few of them
ahead, as far as the pipe holds): the wall time of a recording falls to about the model's alone, the CPU
stays the same (plus the snapshots' pickling). ``ModelInProcess`` does the same arithmetic in the
recorder's process, on demand. Either way the model steps exactly as the live
fabric does: ``Fabric.step`` until the asked time, the completed steps to the job's log, ``snapshot.take``.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import traceback
from collections import deque
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Protocol, cast

from collector.errors import SpanwatchError
from spanwatch.sim import snapshot
from spanwatch.sim.fabric import Fabric, steps_until
from spanwatch.sim.joblog import JobLog
from spanwatch.sim.runtime import SimulatedFabric
from spanwatch.sim.snapshot import Snapshot
from spanwatch.sim.training import StepRecord
from spanwatch.sim.truth_build import LOG_FILES

TOLERANCE_S = 1e-12  # a step ending this close past the asked time still counts as before it


class ModelError(SpanwatchError):
    """The model's process failed (the message carries its traceback) or vanished."""


def stepped(now: float, dt: float, due: float) -> float:
    """The model's time after stepping from ``now`` to ``due`` (``fabric.steps_until``)."""
    return steps_until(now, dt, due, TOLERANCE_S)[1]


def advance(sim: SimulatedFabric, due: float, prev: Snapshot) -> Snapshot:
    """Step ``sim``'s model to ``due``, hand its completed steps to the log, and snapshot it."""
    f = sim.fabric
    f.step_until(due, TOLERANCE_S)
    sim.drain()
    return snapshot.take(f, round((sim.t0 + f.t) * 1e9), f.t, prev)


class Model(Protocol):
    """Where the recorder's snapshots come from."""

    log_path: Path

    def plan(self, dues: list[float]) -> None:
        """Ask for a snapshot after stepping to each of ``dues`` (model seconds, increasing), in order."""

    def snapshot(self) -> Snapshot:
        """The next snapshot planned (waiting for it)."""

    def finish(self) -> None:
        """Close the job's log and leave the model's final state (fabric, steps) in the recorder's ``sim``."""

    def close(self) -> None:
        """Release what it holds (idempotent; after ``finish`` or on failure)."""


class ModelInProcess:
    """The model stepped in this process when a snapshot is read."""

    def __init__(self, sim: SimulatedFabric, out: Path) -> None:
        self.sim = sim
        self.log = JobLog(sim.scenario, out, sim.host)
        self.log_path = self.log.path
        sim.on_step = self.log.write
        self._due: deque[float] = deque()
        self._last = sim.snap

    def plan(self, dues: list[float]) -> None:
        self._due.extend(dues)

    def snapshot(self) -> Snapshot:
        self._last = advance(self.sim, self._due.popleft(), self._last)
        return self._last

    def finish(self) -> None:
        self.log.close()

    def close(self) -> None:
        self.log.close()


class ModelProcess:
    """The model stepped in a forked process, sending each planned snapshot over a pipe as soon as taken."""

    def __init__(self, sim: SimulatedFabric, out: Path) -> None:
        self.sim = sim
        self.log_path = out / LOG_FILES[sim.scenario.job.log.format]
        ours, theirs = multiprocessing.Pipe()
        # fork: the child starts from this very model (its state, its random generators), nothing pickled.
        self.process = multiprocessing.get_context("fork").Process(
            target=_serve, args=(theirs, ours, sim, out), name="spanwatch-model", daemon=True
        )
        self.process.start()
        theirs.close()
        self.conn = ours

    def plan(self, dues: list[float]) -> None:
        try:
            self.conn.send(dues)
        except OSError:  # it has ended: it says why in what it sent last
            while True:
                self._receive()

    def snapshot(self) -> Snapshot:
        answer = self._receive()
        assert isinstance(answer, Snapshot)
        return answer

    def finish(self) -> None:
        self.conn.send(None)
        fabric, steps = cast(tuple[Fabric, list[StepRecord]], self._receive())
        self.sim.fabric, self.sim.steps = fabric, steps
        self.process.join()

    def close(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.conn.close()

    def _receive(self) -> object:
        try:
            answer = self.conn.recv()
        except EOFError:
            raise ModelError(
                f"the model's process ended without answering (exit {self.process.exitcode})"
            ) from None
        if isinstance(answer, _Failed):
            raise ModelError(f"the model's process failed:\n{answer.text}")
        return answer


class _Failed:
    def __init__(self, text: str) -> None:
        self.text = text


def _serve(conn: Connection, recorders_end: Connection, sim: SimulatedFabric, out: Path) -> None:
    """The model's process: a snapshot per planned time, then the final state when asked (``None``)."""
    recorders_end.close()  # its fork's copy: so that the recorder's end closing (it died) ends the wait here
    try:
        log = JobLog(sim.scenario, out, sim.host)
        sim.on_step = log.write
        last = sim.snap
        while (dues := conn.recv()) is not None:
            for due in dues:
                last = advance(sim, due, last)
                conn.send(last)
        log.close()
        sim.on_step = None
        conn.send((sim.fabric, sim.steps))
    except BaseException:  # any failure goes to the recorder, which raises it
        with contextlib.suppress(OSError):  # the recorder gone: nobody to tell
            conn.send(_Failed(traceback.format_exc()))
    finally:
        conn.close()
