"""``demo --fast``'s work with each phase timed, on a fixed epoch (``bench/bench_fast_demo.py`` runs it).

Run: ``PYTHONPATH=CHECKOUT python spanwatch/fast_phases.py SCENARIO LENGTH OUT EPOCH``: ``SCENARIO`` a file or
``builtin``, ``LENGTH`` seconds (``--duration``) or ``xK`` (stretched K times), ``EPOCH`` the fabric's start in
epoch seconds. Prints wall and CPU seconds of record, analysis, and report with score as JSON. It is run by path,
so a baseline checkout without this file can be timed with it: its imports resolve on PYTHONPATH.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

BUILTIN = "builtin"


def run_once(scenario_path: Path, length: str, out: Path, epoch_s: float) -> dict[str, dict[str, float]]:
    """Record, analyse, report and score ``scenario_path`` into ``out``; wall and CPU seconds per phase.

    As ``demo --fast`` does it: where the checkout has ``spanwatch.report_process``, the report is rendered
    in a process forked before the recording while this one scores (its CPU counted once it has ended, in
    ``report+score``); else the report, then the score.
    """
    from spanwatch.demo import analysis_inputs, write_claims
    from spanwatch.fast import record
    from spanwatch.sim import scenario as scenarios

    try:
        from spanwatch.report_process import ReportProcess
    except ImportError:  # a checkout from before it
        ReportProcess = None  # type: ignore[assignment,misc]

    if str(scenario_path) == BUILTIN:  # what ``spanwatch demo --fast --duration D`` runs
        s = scenarios.builtin(float(length))
    elif length.startswith("x"):  # ``--time-scale K``
        s = scenarios.scaled(scenarios.load(scenario_path), float(length[1:]))
    else:
        s = scenarios.with_duration(scenarios.load(scenario_path), float(length), str(scenario_path))
    times: dict[str, dict[str, float]] = {}

    def timed(name: str, start: tuple[float, float]) -> tuple[float, float]:
        now = (time.monotonic(), _cpu())
        times[name] = {"wall": now[0] - start[0], "cpu": now[1] - start[1]}
        return now

    mark = (time.monotonic(), _cpu())
    reporter = ReportProcess() if ReportProcess is not None else None
    recording = record(s, out, epoch_s=epoch_s)
    mark = timed("record", mark)
    from analyzer.analysis import Analysis  # polars: after the report's process is forked, as the demo does
    from spanwatch.analyze import scored

    write_claims(out, recording.sim.scenario)
    inputs = analysis_inputs(out, recording.log)
    Analysis(inputs).run().write(out)
    mark = timed("analysis", mark)
    if reporter is None:
        from analyzer.report.command import write_report

        write_report(out, inputs.config, inputs.claims)
        scored(out / "truth.json", inputs, out)
    else:
        reporter.render(out, inputs.config, inputs.claims)
        scored(out / "truth.json", inputs, out)
        reporter.written()
        reporter.close()
    timed("report+score", mark)
    return times


def _cpu() -> float:
    """CPU seconds of this process and of its finished children (the recording's model process)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


if __name__ == "__main__":
    # Run by path, this folder is first on sys.path: its modules must not pass for top-level ones.
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    print(json.dumps(run_once(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), float(sys.argv[4]))))
