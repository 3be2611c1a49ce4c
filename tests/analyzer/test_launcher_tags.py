"""mpirun's ``--tag-output`` tag wherever it falls in a row: the row reads as if the tag were not there.

mpirun tags every write it forwards, so a row written in pieces carries the tag at each piece (the real P5
log of ``test_inputs.py``). These properties put tags at random places of random nccl-tests result rows.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer.ingest import parse_file
from analyzer.ingest._common import untag

HEADER = (
    "#                                                              out-of-place                       in-place",
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)",
)
# What may come before the first tag: nothing, indentation, `kubectl logs --timestamps`, mpirun --timestamp-output.
BEFORE_FIRST_TAG = ("", "   ", "2026-11-30T10:00:00.123456789Z ", "Mon Nov 30 10:00:00 2026")

tags = st.builds(
    "[{}]<{}>:".format,
    st.builds("{},{}".format, st.integers(0, 99), st.integers(0, 4095)),
    st.sampled_from(["stdout", "stderr"]),
)


@st.composite
def result_rows(draw: st.DrawFn) -> str:
    """One nccl-tests result row: the five fixed fields and two timing groups, random widths between fields."""
    size = draw(st.integers(0, 2**40))
    fields = [str(size), str(size // 4), draw(st.sampled_from(["float", "half", "bfloat16"])), "sum", "-1"]
    for _ in range(2):
        time, algbw, busbw = (draw(st.floats(0, 1e6, allow_nan=False)) for _ in range(3))
        wrong = draw(st.sampled_from(["0", "N/A", "1.2e+06"]))
        fields += [f"{time:.2f}", f"{algbw:.2f}", f"{busbw:.2f}", wrong]
    gaps = draw(st.lists(st.integers(1, 6), min_size=len(fields), max_size=len(fields)))
    return "".join(" " * gap + field for gap, field in zip(gaps, fields, strict=True))


def _between_fields(row: str) -> list[int]:
    """Every position of ``row`` that touches the whitespace between two fields, or its end."""
    return [i for i in range(1, len(row) + 1) if i == len(row) or row[i].isspace() or row[i - 1].isspace()]


def _tagged(row: str, places: list[int], inserted: list[str], before: str) -> str:
    """``row`` as mpirun prints it: ``before``, the last of ``inserted``, then the others at ``places``."""
    pieces, start = [], 0
    for place, tag in zip(sorted(places), inserted[:-1], strict=True):
        pieces += [row[start:place], tag]
        start = place
    return before + inserted[-1] + "".join(pieces) + row[start:]


@settings(max_examples=300, deadline=None)
@given(result_rows(), st.data())
def test_tags_anywhere_in_a_row_give_back_the_row(row: str, data: st.DataObject) -> None:
    places = data.draw(st.lists(st.integers(1, len(row)), max_size=4))  # anywhere, even inside a field
    inserted = data.draw(st.lists(tags, min_size=len(places) + 1, max_size=len(places) + 1))
    before = data.draw(st.sampled_from(BEFORE_FIRST_TAG))
    assert untag(_tagged(row, places, inserted, before)) == row


def _parse(lines: list[str]) -> tuple[pl.DataFrame, int, int]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "all_reduce_perf.log"
        path.write_text("".join(line + "\n" for line in lines))
        result = parse_file(path)
    return result.table("collectives").drop("source_file"), result.counts["result_rows"], len(result.problems)


@settings(max_examples=40, deadline=None)
@given(st.lists(result_rows(), min_size=1, max_size=6), st.data())
def test_a_table_with_tags_between_fields_parses_as_without(rows: list[str], data: st.DataObject) -> None:
    tagged = []
    for line in [*HEADER, *rows]:
        places = data.draw(st.lists(st.sampled_from(_between_fields(line)), unique=True, max_size=3))
        inserted = data.draw(st.lists(tags, min_size=len(places) + 1, max_size=len(places) + 1))
        tagged.append(_tagged(line, places, inserted, data.draw(st.sampled_from(BEFORE_FIRST_TAG))))

    plain, plain_rows, plain_problems = _parse([*HEADER, *rows])
    parsed, parsed_rows, parsed_problems = _parse(tagged)

    assert (plain_rows, plain_problems) == (len(rows), 0)
    assert (parsed_rows, parsed_problems) == (len(rows), 0)
    assert parsed.equals(plain)
