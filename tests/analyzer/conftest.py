"""Fixtures for analyzer tests: where the shared real-workload test data lives (skipped when absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
TRAINING_DATA = PROJECT_ROOT.parent / "shared" / "testdata" / "training"


@pytest.fixture
def training_data() -> Path:
    """The shared training test data folder; skips the test when the project is checked out alone."""
    if not TRAINING_DATA.is_dir():
        pytest.skip(f"shared training test data not found at {TRAINING_DATA}")
    return TRAINING_DATA
