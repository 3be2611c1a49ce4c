"""The vendor claims file (interfaces.md): read and checked now, compared in the report (a later issue).

Only what can be checked without the report is checked: the file is YAML with a ``vendors`` list, every
claim names a measure of ``analyzer.measures.MEASURES`` (an unknown one is an error, not a skip) and an
operator the comparison understands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from analyzer.errors import InputError
from analyzer.measures import MEASURES

OPERATORS = ("<", "<=", "==", ">=", ">")


def _claim_problems(claim: Any, where: str) -> list[str]:
    if not isinstance(claim, dict):
        return [f"{where}: a claim must be a mapping"]
    problems = []
    if claim.get("measure") not in MEASURES:
        problems.append(
            f"{where}.measure: unknown measure {claim.get('measure')!r} (known: {', '.join(MEASURES)})"
        )
    if claim.get("op") not in OPERATORS:
        problems.append(f"{where}.op: must be one of {', '.join(OPERATORS)}")
    if not isinstance(claim.get("value"), int | float):
        problems.append(f"{where}.value: must be a number")
    return problems


def validate_claims(path: Path) -> int:
    """Check a claims file.

    Args:
        path: the YAML file.

    Returns:
        The number of claims.

    Raises:
        InputError: the file is unreadable or invalid; the message lists every problem with its location.
    """
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise InputError(path, f"not valid YAML: {exc}") from None
    vendors = raw.get("vendors") if isinstance(raw, dict) else None
    if not isinstance(vendors, list):
        raise InputError(path, "vendors: a list of vendors is required")
    problems: list[str] = []
    count = 0
    for i, vendor in enumerate(vendors):
        claims = vendor.get("claims", []) if isinstance(vendor, dict) else None
        if not isinstance(claims, list):
            problems.append(f"vendors[{i}].claims: must be a list")
            continue
        for j, claim in enumerate(claims):
            problems += _claim_problems(claim, f"vendors[{i}].claims[{j}]")
            count += 1
    if problems:
        raise InputError(path, "; ".join(problems))
    return count
