"""The one error tree of stszone.

::

    StszoneError              base of everything raised on purpose
    ├── BadRequest            the HTTP request itself is wrong       -> HTTP 4xx, plain message
    │   └── PayloadTooLarge   body over the 7 MiB cap                -> HTTP 413
    ├── BadObject             a field of the reviewed object has the -> allowed: false, code 400
    │                         wrong shape (the review itself is fine)
    ├── Denied                the object breaks a placement rule     -> allowed: false, code 403
    └── ConfigError           a flag, file or setting is unusable    -> CLI exit 2, never HTTP

Each error carries the HTTP status it maps to (like h11's ``error_status_hint``) so that
``server/handlers.py`` is the only place that turns them into responses, and the pure modules
never import aiohttp.
"""

from __future__ import annotations


class StszoneError(Exception):
    """Base class; ``status`` is the HTTP status hint."""

    status: int = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(StszoneError):
    """The HTTP request is not an AdmissionReview we can answer (400)."""

    status = 400


class PayloadTooLarge(BadRequest):
    """The request body exceeds the configured cap (413)."""

    status = 413


class BadObject(StszoneError):
    """A field of the reviewed object has the wrong type; answered as a denial with code 400."""

    status = 400


class Denied(StszoneError):
    """The object breaks a rule; answered as ``allowed: false`` with this message (403)."""

    status = 403

    def __init__(self, message: str, *, reason: str = "Forbidden") -> None:
        super().__init__(message)
        self.reason = reason


class ConfigError(StszoneError):
    """A command-line flag, file or setting cannot be used; the CLI exits 2 with the message."""

    status = 2


def one_line(err: BaseException) -> str:
    """``err``'s text on one line, for a ConfigError: a YAML error's problem and where it is
    (``line 3, column 5: ...``, counted from 1 as editors do) rather than PyYAML's several
    lines with a quoted snippet and a caret; any other error's lines joined."""
    problem, mark = getattr(err, "problem", None), getattr(err, "problem_mark", None)
    if isinstance(problem, str) and mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return " ".join(str(err).split())
