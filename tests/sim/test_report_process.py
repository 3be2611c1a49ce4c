"""``demo --fast``'s report rendered in a forked process while the demo scores (``spanwatch.report_process``).

The files must be the ones ``write_report`` writes in the demo's own process, its failures must reach the
demo as they were raised, and a report never asked for must not leave a process behind.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from analyzer.analysis import Analysis
from analyzer.errors import InputError
from analyzer.report.command import FILES, write_report
from spanwatch.demo import analysis_inputs, write_claims
from spanwatch.fast import record
from spanwatch.report_process import ReportProcess, ReportProcessError
from spanwatch.sim import scenario as scenarios


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short fast recording of the built-in demo, analysed."""
    out = tmp_path_factory.mktemp("analysed") / "demo"
    recording = record(scenarios.builtin(12.0), out, epoch_s=1_790_000_000.25)
    write_claims(out, recording.sim.scenario)
    Analysis(analysis_inputs(out, recording.log)).run().write(out)
    return out


def test_the_report_of_the_process_is_the_report_of_this_one(analysed: Path, tmp_path: Path) -> None:
    here = tmp_path / "here" / "demo"
    shutil.copytree(analysed, here)
    written_here = write_report(here, here / "config.yaml", here / "claims.yaml")
    there = tmp_path / "there" / "demo"
    shutil.copytree(analysed, there)
    reporter = ReportProcess()
    try:
        reporter.render(there, there / "config.yaml", there / "claims.yaml")
        written_there = reporter.written()
    finally:
        reporter.close()
    assert [p.name for p in written_there] == [p.name for p in written_here] == list(FILES)
    for name in FILES:
        ours = (here / name).read_text().replace(str(here.parent), "<parent>")
        theirs = (there / name).read_text().replace(str(there.parent), "<parent>")
        assert ours == theirs, name
    assert "<svg" in (there / "report.html").read_text()
    assert not reporter.process.is_alive()


def test_a_failing_report_fails_here_in_its_own_words(tmp_path: Path) -> None:
    with pytest.raises(InputError) as here:
        write_report(tmp_path / "no-analysis")
    reporter = ReportProcess()
    try:
        reporter.render(tmp_path / "no-analysis", None, None)
        with pytest.raises(ReportProcessError) as there:
            reporter.written()
    finally:
        reporter.close()
    assert str(there.value) == str(here.value)


def test_forked_before_polars_runs_else_started_afresh(tmp_path: Path) -> None:
    """The demo forks it before anything imports polars (whose threads a fork would strand); a test
    process has polars already, so its reports above were spawned."""
    spawned = ReportProcess()
    spawned.close()
    assert spawned.method == "spawn"
    script = (
        "import sys\n"
        "from spanwatch.report_process import ReportProcess\n"
        "r = ReportProcess()\n"
        "assert 'polars' not in sys.modules\n"
        "from spanwatch.report_process import ReportProcessError\n"
        f"r.render(__import__('pathlib').Path({str(tmp_path)!r}), None, None)\n"
        "try:\n"
        "    r.written()\n"
        "except ReportProcessError:\n"
        "    print(r.method, 'raised')\n"
        "r.close()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["fork", "raised"]


def test_a_report_never_asked_for_leaves_no_process() -> None:
    reporter = ReportProcess()
    reporter.close()
    reporter.close()  # idempotent
    assert not reporter.process.is_alive() and reporter.process.exitcode == 0
