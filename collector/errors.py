"""Errors spanwatch raises on purpose; user errors print a message and exit non-zero, never a traceback.

SpanwatchError
├── ConfigError          the config (or a file it names) is wrong; carries every problem found
├── MappingError         a mapping table shipped with the package is malformed (a bug, caught at start-up)
└── SourceError          talking to one device failed; ``status`` is the spanwatch_polls_total status
    ├── TimeoutError_    no answer within the deadline                    status="timeout"
    ├── UnreachableError the transport failed (refused, no route)         status="unreachable"
    ├── AuthError        wrong community, user or keys                    status="auth_error"
    └── InvalidResponse  the device answered something unusable           status="invalid_response"
"""

from __future__ import annotations


class SpanwatchError(Exception):
    """Base of every error spanwatch raises on purpose."""


class ConfigError(SpanwatchError):
    """The configuration is invalid.

    Attributes:
        problems: one line per problem, each starting with its location.
    """

    def __init__(self, *problems: str) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


class MappingError(SpanwatchError):
    """A shipped mapping table does not validate."""


class SourceError(SpanwatchError):
    """Talking to one device failed."""

    status = "error"


class TimeoutError_(SourceError):  # the builtin TimeoutError is a different thing
    status = "timeout"


class UnreachableError(SourceError):
    status = "unreachable"


class AuthError(SourceError):
    status = "auth_error"


class InvalidResponse(SourceError):
    status = "invalid_response"
