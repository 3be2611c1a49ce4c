"""logfmt lines: one ``key=value`` line per log record, the one format of ``spanwatch`` and its workers."""

from __future__ import annotations

import logging
import time


class LogfmtFormatter(logging.Formatter):
    """One ``key=value`` line per record, for journald and log shippers when not on a terminal.

    Args:
        fields: fixed ``key=value`` pairs written after ``logger`` (a worker's ``worker=i/W``).
    """

    def __init__(self, fields: dict[str, str] | None = None) -> None:
        super().__init__()
        self.fields = "".join(f" {key}={value}" for key, value in (fields or {}).items())

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        # One record, one line: a multi-line message (a config rejection listing its problems) keeps its
        # line breaks escaped, as logfmt readers expect.
        message = record.getMessage().replace('"', "'").replace("\n", "\\n")
        line = (
            f"ts={stamp}.{int(record.msecs):03d}Z level={record.levelname.lower()} "
            f'logger={record.name}{self.fields} msg="{message}"'
        )
        if record.exc_info:
            line += f' exc="{self.formatException(record.exc_info)!r}"'
        return line
