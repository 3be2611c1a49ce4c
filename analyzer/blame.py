"""The blame's public names, for the analysis, the live view and the bench: the method itself is
``analyzer.attribution`` (one module per step; ``docs/method.md``)."""

from __future__ import annotations

from analyzer.attribution.pipeline import attribute
from analyzer.attribution.steady import JobFigures
from analyzer.attribution.tables import Blame

__all__ = ["Blame", "JobFigures", "attribute"]
