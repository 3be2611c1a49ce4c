"""The job's training log, as a real job prints it: plain step JSONL, Megatron-LM or torchtitan lines.

Every format logs every ``log.every`` iterations; a line then holds the interval's average (Megatron's
"elapsed time per iteration", torchtitan's rate over the interval; JSONL gets one object per rank with the
interval's ``start``/``end`` and ``interval_steps``). Clocks are the training hosts' (``clock_skew``
included). Steps count from 1, as the logs number iterations.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from spanwatch.sim.scenario import Scenario
from spanwatch.sim.training import StepRecord
from spanwatch.sim.truth import rfc3339
from spanwatch.sim.truth_build import LOG_FILES


class JobLog:
    """Writes the log of a run into ``folder`` as steps complete.

    Args:
        scenario: the run (its ``job.log`` and ranks).
        folder: where the log file goes (``LOG_FILES[format]``).
        host: model seconds -> epoch seconds on the training hosts' clock.
    """

    def __init__(self, scenario: Scenario, folder: Path, host: Callable[[float], float]) -> None:
        self.s = scenario
        self.host = host
        self.path = folder / LOG_FILES[scenario.job.log.format]
        self.file: IO[str] = self.path.open("w")
        self.pending: list[StepRecord] = []
        self.total = 1_000_000

    def write(self, record: StepRecord) -> None:
        """Add a completed step; prints a line when an interval is complete."""
        self.pending.append(record)
        if len(self.pending) < self.s.job.log.every:
            return
        first, last = self.pending[0], self.pending[-1]
        n = len(self.pending)
        self.pending = []
        lines = getattr(self, f"_{self.s.job.log.format}")(first, last, n)
        self.file.write("".join(line + "\n" for line in lines))
        self.file.flush()

    def close(self) -> None:
        self.file.close()

    def _jsonl(self, first: StepRecord, last: StepRecord, n: int) -> list[str]:
        start, end = rfc3339(self.host(first.start_s)), rfc3339(self.host(last.end_s))
        extra = {"interval_steps": n} if n > 1 else {}
        return [
            json.dumps({"step": last.step + 1, "start": start, "end": end, "rank": rank, **extra})
            for rank in range(self.s.ranks)
        ]

    def _megatron(self, first: StepRecord, last: StepRecord, n: int) -> list[str]:
        clock = datetime.fromtimestamp(self.host(last.end_s), UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
        per_ms = (last.end_s - first.start_s) / n * 1e3
        it = last.step + 1
        batch = 8 * self.s.ranks
        return [
            f"[{clock}] iteration {it:8d}/{self.total:8d} | consumed samples: {it * batch:12d} | "
            f"elapsed time per iteration (ms): {per_ms:.1f} | learning rate: 1.000000E-04 | "
            f"global batch size: {batch:5d} | lm loss: {7.0 / (1 + it / 100):.6E} | loss scale: 1.0 | "
            "number of skipped iterations:   0 | number of nan iterations:   0 |"
        ]

    def _torchtitan(self, first: StepRecord, last: StepRecord, n: int) -> list[str]:
        stamp = datetime.fromtimestamp(self.host(last.end_s), UTC).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
        seconds = max(last.end_s - first.start_s, 1e-9)
        tps = round(8 * 4096 * n / seconds)
        it = last.step + 1
        return [
            f"[rank{rank}]:[titan] {stamp} - root - INFO - \x1b[31mstep: {it:2d}  \x1b[32mloss: "
            f"{7.0 / (1 + it / 100):7.4f}  \x1b[33mmemory: 21.01GiB(22.11%)  \x1b[34mtps: {tps:,}  "
            "\x1b[36mtflops: 123.40  \x1b[35mmfu: 4.59%\x1b[39m"
            for rank in range(0, self.s.ranks, self.s.job.ranks_per_site)
        ]
