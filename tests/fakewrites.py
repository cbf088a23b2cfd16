"""The fake API server's writes for ``--manage-certs``: create, update and JSON Patch, with the
optimistic concurrency of a real one.

- ``POST`` to a collection creates: ``409 AlreadyExists`` when the name is taken; the object gets
  a ``uid``, a ``creationTimestamp`` and a ``resourceVersion``.
- ``PUT`` to an object updates: ``404`` when absent, ``409 Conflict`` when the body's
  ``resourceVersion`` is not the stored one (a body without one updates unconditionally, as
  Secrets and Leases allow).
- ``PATCH`` with ``application/json-patch+json`` applies the operations (``jsonpatch``); a
  patched ``metadata.resourceVersion`` that differs from the stored one is a ``409 Conflict``
  (how a client makes a patch conditional), a failing ``test`` operation a ``422``.

- A ``kubernetes.io/tls`` Secret without ``tls.crt`` or ``tls.key`` in its data is refused with
  ``422 Invalid``, on create, update and patch alike (the API server's ValidateSecret).

Faults queued with ``inject(resource, "create" | "update" | "patch", Fault.status(403))`` answer
first (RBAC refusing a write). Every write that lands is in ``objects.history``, and the hooks
in ``api.on_write`` run with (resource, verb, object) -- a test's way to act at an exact point,
such as stopping a leader right after one of its writes.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any, Final

import jsonpatch
from aiohttp import web

from tests.fakeobjects import Route, current, status
from tests.fakestate import RESOURCES

JSON = dict[str, Any]
#: Called with (resource, verb, the object as stored) after each write that landed.
WriteHook = Callable[[str, str, JSON], None]

WRITABLE: Final = frozenset(
    {"secrets", "leases", "mutatingwebhookconfigurations", "validatingwebhookconfigurations"}
)
_VERBS: Final = {"POST": "create", "PUT": "update", "PATCH": "patch"}
_JSON_PATCH: Final = "application/json-patch+json"


def _stored(api: Any, where: Route) -> JSON:
    obj = current(api.objects, Route(where.resource, where.namespace, where.name))
    assert obj is not None
    _, kind, api_version, _ = RESOURCES[where.resource]
    return {"kind": kind, "apiVersion": api_version, **obj}


def _conflict(where: Route) -> web.Response:
    return status(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {where.resource} "{where.name}": the object has been '
        "modified; please apply your changes to the latest version and try again",
    )


def _invalid(where: Route, obj: JSON) -> web.Response | None:
    """The API server's validation of what is about to be stored, as far as stszone meets it."""
    if where.resource != "secrets" or obj.get("type") != "kubernetes.io/tls":
        return None
    data = obj.get("data") or {}
    missing = [f"data[{key}]: Required value" for key in ("tls.crt", "tls.key") if key not in data]
    if not missing:
        return None
    listed = missing[0] if len(missing) == 1 else f"[{', '.join(missing)}]"
    return status(422, "Invalid", f'Secret "{where.name}" is invalid: {listed}')


def _land(api: Any, verb: str, where: Route, obj: JSON, *, code: int = 200) -> web.Response:
    refused = _invalid(where, obj)
    if refused is not None:
        return refused
    api.put(where.resource, obj)
    stored = _stored(api, where)
    for hook in api.on_write:
        hook(where.resource, verb, stored)
    return web.json_response(stored, status=code)


async def write(api: Any, request: web.Request, where: Route) -> web.Response:
    """Create, update or patch one of the :data:`WRITABLE` resources."""
    verb = _VERBS.get(request.method)
    if verb is None:
        return status(405, "MethodNotAllowed", f"{request.method} is not served here")
    raw = await request.read()
    try:
        body: Any = json.loads(raw)
    except ValueError:
        return status(400, "BadRequest", "the body is not JSON")
    name = where.name or (body.get("metadata", {}).get("name", "") if verb == "create" else "")
    target = Route(where.resource, where.namespace, name)
    fault = api.record(verb, target, request, body)
    if fault is not None and fault.what == "status":
        reason = {403: "Forbidden", 404: "NotFound", 500: "InternalError"}.get(fault.code, "")
        return status(fault.code, reason or "Failure", f"injected failure {fault.code}")
    existing = current(api.objects, target)
    if verb == "create":
        if where.name:
            return status(405, "MethodNotAllowed", "create by POST to the collection")
        if existing is not None:
            return status(409, "AlreadyExists", f'{where.resource} "{name}" already exists')
        metadata = {**body["metadata"], "uid": str(uuid.uuid4())}
        metadata["creationTimestamp"] = "2026-11-30T12:00:00Z"
        if where.namespace:
            metadata["namespace"] = where.namespace
        return _land(api, verb, target, {**body, "metadata": metadata}, code=201)
    if existing is None:
        return status(404, "NotFound", f'{where.resource} "{name}" not found')
    stored_version = existing["metadata"]["resourceVersion"]
    if verb == "update":
        wanted = body.get("metadata", {}).get("resourceVersion")
        if wanted and wanted != stored_version:
            return _conflict(target)
        metadata = {**body["metadata"], "uid": existing["metadata"].get("uid")}
        return _land(api, verb, target, {**body, "metadata": metadata})
    if request.content_type != _JSON_PATCH:
        return status(415, "UnsupportedMediaType", f"only {_JSON_PATCH} is served here")
    try:
        patched = jsonpatch.apply_patch(_stored(api, target), body)
    except jsonpatch.JsonPatchTestFailed as err:
        return status(422, "Invalid", str(err))
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as err:
        return status(400, "BadRequest", str(err))
    if patched["metadata"].get("resourceVersion") != stored_version:
        return _conflict(target)
    return _land(api, verb, target, patched)
