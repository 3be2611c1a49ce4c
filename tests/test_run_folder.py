"""``spanwatch demo --out`` and ``spanwatch lab --out``: a folder an earlier demo or lab wrote is replaced,
never read with the new run; an archive neither wrote is refused and left as it was."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from spanwatch import demo
from spanwatch.lab import command as lab
from spanwatch.run_folder import MARKERS, RunFolderError


def _earlier_demo(out: Path) -> None:
    """The files an earlier demo run leaves: its archive, log, truth, control run, plus a user's note."""
    (out / "archive" / "date=2026-12-01").mkdir(parents=True)
    (out / "archive" / "date=2026-12-01" / "old.parquet").write_bytes(b"PAR1")
    (out / "control").mkdir()
    (out / "control" / "score.json").write_text("{}")
    (out / "megatron.log").write_text("iteration 1\n")
    (out / "truth.json").write_text("{}")
    (out / "notes.txt").write_text("mine\n")


def test_an_earlier_demos_recording_is_replaced_and_nothing_else(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _earlier_demo(out)
    demo.fresh_out(out)
    assert sorted(p.name for p in out.iterdir()) == [MARKERS["demo"], "notes.txt"]
    # The marker alone (a demo stopped before it wrote its truth) is enough the next time.
    (out / "archive").mkdir()
    demo.fresh_out(out)
    assert not (out / "archive").exists()
    # An archive linked elsewhere loses its link, never what it points to.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "kept.parquet").write_bytes(b"PAR1")
    (out / "archive").symlink_to(elsewhere)
    demo.fresh_out(out)
    assert not (out / "archive").is_symlink() and (elsewhere / "kept.parquet").is_file()


def test_an_archive_no_demo_wrote_is_refused_and_kept(tmp_path: Path) -> None:
    out = tmp_path / "collector"
    (out / "archive").mkdir(parents=True)
    (out / "archive" / "real.parquet").write_bytes(b"PAR1")
    for replace in (demo.fresh_out, lab.fresh_out):
        with pytest.raises(RunFolderError, match=r"no spanwatch (demo|lab) wrote it"):
            replace(out)
    assert (out / "archive" / "real.parquet").read_bytes() == b"PAR1"
    assert sorted(p.name for p in out.iterdir()) == ["archive"]


def test_a_lab_replaces_an_earlier_lab_or_demo_run(tmp_path: Path) -> None:
    """The lab records into the same names a second time, and analyses its folder's whole archive."""
    out = tmp_path / "out"
    _earlier_demo(out)
    for name in ("control-run", "run", "lab-logs"):
        (out / name).mkdir()
        (out / name / "steps.rank0.jsonl").write_text("{}\n")
    (out / "steps.jsonl").write_text("{}\n")
    lab.fresh_out(out)
    assert sorted(p.name for p in out.iterdir()) == [MARKERS["lab"], "megatron.log", "notes.txt"]
    # The lab's own marker is enough for the demo next.
    (out / "archive").mkdir()
    demo.fresh_out(out)
    assert not (out / "archive").exists()


def test_an_earlier_run_that_cannot_be_removed_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never left in place to be analysed with the new run (permissions would not stop root: a failing
    removal stands in for them)."""
    out = tmp_path / "out"
    _earlier_demo(out)

    def refuse(path: Path) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(shutil, "rmtree", refuse)
    with pytest.raises(RunFolderError, match="cannot replace the earlier run"):
        demo.fresh_out(out)


def test_a_lab_refused_for_another_running_one_leaves_the_folder_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The running lab may be recording into the same folder: its archive is not the second one's to remove."""
    from spanwatch.lab import netns

    out = tmp_path / "out"
    _earlier_demo(out)
    monkeypatch.setattr(netns, "can_create", lambda: None)
    monkeypatch.setattr(lab, "preflight", lambda: None)
    lock = tmp_path / "lab.lock"
    monkeypatch.setattr(netns.Lock.__init__, "__defaults__", (lock,))  # the machine's lock left alone
    args = argparse.Namespace(config=lab.lab_config.DEFAULT, duration=None, control=None, out=out)
    with netns.Lock(lock), pytest.raises(netns.LabError, match="another spanwatch lab is running"):
        lab.run_command(args)
    assert (out / "archive" / "date=2026-12-01" / "old.parquet").is_file()


@pytest.mark.integration
def test_two_demos_into_one_folder_analyse_only_the_second(tmp_path: Path) -> None:
    """The README's ``./dev demo`` runs into ``out`` every time: the second run's archive holds its own
    readings only, as many as the first's, and its analysis and score read those."""
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "spanwatch.cli", "demo", "--fast", "--duration", "20", "--out", str(out)]
    rows = []
    for _ in range(2):
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
        assert run.returncode == 0, run.stderr[-3000:]
        archive = pl.scan_parquet(str(out / "archive" / "**" / "*.parquet"))
        rows.append(archive.select(pl.len()).collect().item())
    assert rows[0] == rows[1] > 0
    # An archive no demo wrote: one clear line, exit 1, before anything is recorded.
    collector = tmp_path / "collector"
    (collector / "archive").mkdir(parents=True)
    refused = subprocess.run([*cmd[:-1], str(collector)], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1
    assert "no spanwatch demo wrote it" in refused.stderr and list(collector.iterdir()) == [
        collector / "archive"
    ]
