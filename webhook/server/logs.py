"""Logging set-up: ``--log-format text|json``, one line per record."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError

from webhook.rules.decision import ZoneAnnotation
from webhook.wire.review import Answer, Review

_RESERVED = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}
#: One debug line per admission decision (``--log-level debug``); identities only, never objects.
_DECISIONS = logging.getLogger("stszone.decision")
#: Requests aiohttp could not parse, one debug line each.
_CLIENTS = logging.getLogger("stszone.server")
#: Longest request-supplied string written to a log line (names are <= 253 characters).
_MAX_FIELD = 256


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, plus any ``extra=`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in _RESERVED})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def setup(*, fmt: str = "text", level: str = "info") -> None:
    """Configure the root logger for the chosen format and level."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # aiohttp logs every TLS handshake reset at error level; they are client problems.
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    server = logging.getLogger("aiohttp.server")
    if not any(isinstance(f, ClientErrors) for f in server.filters):
        server.addFilter(ClientErrors())


class ClientErrors(logging.Filter):
    """aiohttp's records of requests it could not parse, as one debug line each.

    aiohttp answers a malformed request (no ``Host``, an over-long header, not HTTP at all) with
    a 400 and logs it at error level with a traceback: anyone who can reach the port could fill
    the log. The client's mistake is told to the client; the log keeps a line at debug level.
    A body aiohttp could not decode (its Content-Encoding, its chunked framing) is answered by
    the handler, and logged by aiohttp when it drains the rest of it: the same client mistake.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if not isinstance(error, HttpProcessingError | RequestPayloadError):
            return True
        what = error.message if isinstance(error, HttpProcessingError) else error
        _CLIENTS.debug("%s: %s", record.getMessage(), str(what).replace("\n", " "))
        return False


def _field(text: str) -> str:
    """A request-supplied string made safe for one log line: escaped, and cut."""
    if len(text) > _MAX_FIELD:
        text = text[:_MAX_FIELD] + "..."
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


def decisions_logged() -> bool:
    """Whether :func:`log_decision` writes anything at the level set (debug)."""
    return _DECISIONS.isEnabledFor(logging.DEBUG)


def log_decision(
    endpoint: str,
    parsed: Review | None,
    answered: Answer | None,
    seconds: float,
    status: int,
) -> None:
    """Server observer: one debug line per admission decision, with structured fields.

    uid, kind, namespace/name, operation, dry run, decision, zone, reason and duration -- the
    identity of the request and what was decided, never the object or the user's credentials.
    """
    if not _DECISIONS.isEnabledFor(logging.DEBUG) or endpoint not in ("mutate", "validate"):
        return
    verdict = answered.result if answered is not None and status == 200 else "error"
    decision = answered.decision if answered is not None else None
    zone = ""
    if decision is not None:
        zone = next((e.zone for e in decision.edits if isinstance(e, ZoneAnnotation)), "")
    request = parsed.request if parsed is not None else None
    fields: dict[str, Any] = {
        "endpoint": endpoint,
        "uid": _field(parsed.uid) if parsed else "",
        "kind": _field(request.kind) if request else "",
        "namespace": _field(request.namespace) if request else "",
        "object": _field(request.name) if request else "",
        "operation": request.operation if request else "",
        "dry_run": request.dry_run if request else False,
        "decision": verdict,
        "zone": _field(zone),
        "reason": decision.reason if decision is not None and not decision.allowed else "",
        "http_status": status,
        "duration_ms": round(seconds * 1e3, 3),
    }
    _DECISIONS.debug(
        "%s %s %s %s/%s uid=%s decision=%s zone=%s reason=%s %.2fms",
        endpoint,
        fields["operation"] or "-",
        fields["kind"] or "-",
        fields["namespace"] or "-",
        fields["object"] or "-",
        fields["uid"] or "-",
        verdict,
        fields["zone"] or "-",
        fields["reason"] or "-",
        seconds * 1e3,
        extra=fields,
    )
