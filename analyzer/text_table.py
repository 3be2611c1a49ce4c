"""Plain-text tables for the terminal: a title, a header, aligned columns.

The commands print a few small tables (the plan, the demo's and the lab's summaries); columns padded with
spaces read the same in a terminal, a log file and a CI transcript, and need no terminal library in the
runtime install (its size is budgeted: ``bench/bench_install.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


class TextTable:
    """Rows of strings under named columns, rendered aligned.

    Args:
        title: the line above the table.
        columns: the column names.
        right: the columns aligned to the right (numbers).
    """

    def __init__(self, title: str, columns: Sequence[str], right: Iterable[str] = ()) -> None:
        self.title = title
        self.columns = list(columns)
        self.right = set(right)
        self.rows: list[list[str]] = []

    def add_row(self, *cells: str) -> None:
        """Append a row (one string per column)."""
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns")
        self.rows.append([str(c) for c in cells])

    def render(self) -> str:
        """The title, the header, a rule and the rows, two spaces between columns."""
        widths = [max([len(c), *(len(r[i]) for r in self.rows)]) for i, c in enumerate(self.columns)]

        def line(cells: Sequence[str]) -> str:
            padded = (
                cell.rjust(width) if name in self.right else cell.ljust(width)
                for cell, width, name in zip(cells, widths, self.columns, strict=True)
            )
            return "  ".join(padded).rstrip()

        rule = "  ".join("-" * w for w in widths)
        return "\n".join([self.title, line(self.columns), rule, *(line(r) for r in self.rows)])
