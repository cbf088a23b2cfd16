"""The fake API server's ``events.k8s.io/v1`` Events: create and merge-patch, validated as the
real API server validates them, so a test fails where a real cluster would refuse the write.

The checks are written from ``pkg/apis/core/validation/events.go`` (Kubernetes 1.3x), the
strict validation that applies to writes through ``events.k8s.io/v1``:

- create: a DNS-1123 ``metadata.name``; ``eventTime`` set; ``type`` Normal or Warning;
  ``reportingController`` a qualified name; ``reportingInstance``, ``action`` and ``reason``
  present and at most 128 characters; ``note`` at most 1024 bytes; a ``series``, when given,
  with ``count`` >= 2 and ``lastObservedTime``; the deprecated core/v1 fields unset; and the
  Event in its regarding object's namespace (stszone's rule; the server checks it for
  cluster-scoped objects only);
- update: every field but ``series`` and metadata immutable (``note`` included), a changed
  series valid.

PATCH takes ``application/merge-patch+json`` (RFC 7386) and, as a real server does, the
strategic-merge content type with the same meaning for these fields.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any, Final

from aiohttp import web

from tests.fakeobjects import Route, current, status
from webhook.model.names import is_dns_subdomain, is_qualified_name

JSON = dict[str, Any]
LIMIT: Final = 128
NOTE_LIMIT: Final = 1024
MICRO_TIME: Final = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
PATCH_TYPES: Final = ("application/merge-patch+json", "application/strategic-merge-patch+json")
#: Fields an update may not change (``ValidateEventUpdate``).
IMMUTABLE: Final = (
    "regarding",
    "related",
    "reason",
    "note",
    "type",
    "eventTime",
    "action",
    "reportingController",
    "reportingInstance",
)


def _series_problems(series: Any) -> list[str]:
    if series is None:
        return []
    if not isinstance(series, dict):
        return ["series: not an object"]
    problems = []
    if not isinstance(series.get("count"), int) or series["count"] < 2:
        problems.append("series.count: should be at least 2")
    if not MICRO_TIME.match(str(series.get("lastObservedTime", ""))):
        problems.append("series.lastObservedTime: Required value")
    return problems


def create_problems(event: JSON, *, namespace: str) -> list[str]:
    """What the API server would refuse in ``event``, created in ``namespace``."""
    problems = []
    meta = event.get("metadata", {})
    if not is_dns_subdomain(str(meta.get("name", ""))):
        problems.append(f"metadata.name: {meta.get('name')!r} is not a DNS-1123 subdomain")
    if not MICRO_TIME.match(str(event.get("eventTime", ""))):
        problems.append("eventTime: Required value (a MicroTime)")
    if event.get("type") not in ("Normal", "Warning"):
        problems.append(f"type: has invalid value: {event.get('type')}")
    if not is_qualified_name(str(event.get("reportingController", ""))):
        problems.append("reportingController: not a qualified name")
    for name in ("reportingInstance", "action", "reason"):
        value = str(event.get(name, ""))
        if not value or len(value) > LIMIT:
            problems.append(f"{name}: required, at most {LIMIT} characters")
    if len(str(event.get("note", "")).encode()) > NOTE_LIMIT:
        problems.append(f"note: can have at most {NOTE_LIMIT} characters")
    for legacy in ("deprecatedFirstTimestamp", "deprecatedLastTimestamp", "deprecatedCount"):
        if event.get(legacy):
            problems.append(f"{legacy}: needs to be unset")
    regarding = event.get("regarding") or {}
    if regarding.get("namespace", "") != namespace:
        problems.append("regarding.namespace: does not match event.namespace")
    return problems + _series_problems(event.get("series"))


def update_problems(new: JSON, old: JSON) -> list[str]:
    """What the API server would refuse in an update of ``old`` to ``new``."""
    problems = [f"{f}: field is immutable" for f in IMMUTABLE if new.get(f) != old.get(f)]
    if new.get("series") != old.get("series"):
        problems += _series_problems(new.get("series"))
    return problems


def merged(target: Any, patch: Any) -> Any:
    """RFC 7386: ``patch`` merged into ``target``."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merged(out.get(key), value)
    return out


def _closed(namespace: str, name: str, state: str | None) -> web.Response | None:
    """A create's answer in a namespace being deleted or gone, as the lab (1.36) answered."""
    if state == "Gone":
        return web.json_response(
            {
                **_STATUS,
                "message": f'namespaces "{namespace}" not found',
                "reason": "NotFound",
                "details": {"name": namespace, "kind": "namespaces"},
                "code": 404,
            },
            status=404,
        )
    if state == "Terminating":
        cause = {
            "reason": "NamespaceTerminating",
            "message": f"namespace {namespace} is being terminated",
            "field": "metadata.namespace",
        }
        message = (
            f'events.events.k8s.io "{name}" is forbidden: unable to create new content in '
            f"namespace {namespace} because it is being terminated"
        )
        details = {"name": name, "group": "events.k8s.io", "kind": "events", "causes": [cause]}
        return web.json_response(
            {**_STATUS, "message": message, "reason": "Forbidden", "details": details, "code": 403},
            status=403,
        )
    return None


_STATUS: Final = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}


def _invalid(name: str, problems: list[str]) -> web.Response:
    return status(422, "Invalid", f'Event.events.k8s.io "{name}" is invalid: {"; ".join(problems)}')


async def write(api: Any, request: web.Request, where: Route) -> web.Response:
    """Create (POST to a namespace's collection) or patch (PATCH one Event)."""
    raw = await request.read()
    try:
        body: Any = json.loads(raw)
    except ValueError:
        return status(400, "BadRequest", "the body is not JSON")
    verb = {"POST": "create", "PATCH": "patch"}.get(request.method)
    if verb is None:
        return status(405, "MethodNotAllowed", f"{request.method} is not served here")
    name = where.name or str(body.get("metadata", {}).get("name", ""))
    target = Route(where.resource, where.namespace, name)
    fault = api.record(verb, target, request, body)
    if fault is not None and fault.what == "status":
        reason = {403: "Forbidden", 404: "NotFound", 429: "TooManyRequests"}.get(fault.code)
        return status(fault.code, reason or "InternalError", f"injected failure {fault.code}")
    if fault is not None and fault.what == "drop":
        if request.transport is not None:
            request.transport.abort()
        return web.Response()
    existing = current(api.objects, target)
    closed = _closed(where.namespace, name, api.namespaces_closed.get(where.namespace))
    if verb == "create" and closed is not None:
        return closed
    if verb == "create":
        if where.name:
            return status(405, "MethodNotAllowed", "create by POST to the collection")
        problems = create_problems(body, namespace=where.namespace)
        if problems:
            return _invalid(name, problems)
        if existing is not None:
            return status(409, "AlreadyExists", f'events.events.k8s.io "{name}" already exists')
        metadata = {**body["metadata"], "uid": str(uuid.uuid4())}
        api.put("events", {**body, "metadata": metadata})
        return web.json_response(current(api.objects, target), status=201)
    if request.content_type not in PATCH_TYPES:
        return status(415, "UnsupportedMediaType", f"only {', '.join(PATCH_TYPES)} here")
    if existing is None:
        return status(404, "NotFound", f'events.events.k8s.io "{name}" not found')
    patched = merged(existing, body)
    problems = update_problems(patched, existing)
    if problems:
        return _invalid(name, problems)
    api.put("events", patched)
    return web.json_response(current(api.objects, target))
