"""The fake API server's object routes: one object by name, and the writes rebalance makes.

- ``GET /api/v1/namespaces/NS/pods/NAME`` (and nodes, claims, StatefulSets): the object, or a
  404 ``Status``;
- ``POST .../pods/NAME/eviction`` (policy/v1 Eviction): ``dryRun=All`` checks only; otherwise
  the pod is deleted and the eviction hooks run (a test's stand-in for the StatefulSet
  controller, the webhook and the scheduler). ``deleteOptions.preconditions.uid`` must match;
- ``DELETE .../persistentvolumeclaims/NAME``: a claim carrying the ``kubernetes.io/pvc-protection``
  finalizer only gets its ``deletionTimestamp`` (it stays until the test's controller removes
  it, as the protection controller does once no pod uses it); ``preconditions.uid`` must match.

Faults queued with ``inject(resource, "evict" | "delete" | "get", ...)`` answer first; a 429 on an
eviction carries the cause a real server gives when a PodDisruptionBudget refuses.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

from tests.fakestate import RESOURCES, with_kind

if TYPE_CHECKING:
    from tests.fakeapi import Fault

JSON = dict[str, Any]
#: A test's controller: called with (namespace, pod name) after an eviction deleted the pod.
EvictHook = Callable[[str, str], None]

_PATH = re.compile(
    r"^/(?P<group>api/v1|apis/[a-z0-9.]+/v1[a-z0-9]*)(?:/namespaces/(?P<namespace>[^/]+))?"
    r"/(?P<plural>[a-z]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>eviction))?$"
)
#: (group version path, plural) -> resource: two groups serve ``statefulsets``.
_PLURALS = {tuple(path[1:].rsplit("/", 1)): name for name, (path, *_) in RESOURCES.items()}


@dataclass(frozen=True, slots=True)
class Route:
    """What a path names: a collection (maybe of one namespace), or one object."""

    resource: str
    namespace: str = ""
    name: str = ""
    subresource: str = ""


def route(path: str) -> Route | None:
    """The route of ``path``, or None for paths the fake does not serve."""
    match = _PATH.match(path)
    resource = _PLURALS.get((match["group"], match["plural"])) if match is not None else None
    if match is None or resource is None:
        return None
    return Route(resource, match["namespace"] or "", match["name"] or "", match["sub"] or "")


def status(
    code: int,
    reason: str,
    message: str,
    *,
    causes: tuple[str, ...] = (),
    retry_after: int | None = None,
) -> web.Response:
    """A ``Status`` answer, with ``details.causes`` and ``Retry-After`` when given."""
    body: JSON = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if code < 400 else "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if causes:
        body["details"] = {"causes": [{"reason": "DisruptionBudget", "message": c} for c in causes]}
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return web.json_response(body, status=code, headers=headers)


def current(objects: Any, where: Route) -> JSON | None:
    """The stored object a route names, decoded (None when absent)."""
    stored = objects.tables[where.resource].get((where.namespace, where.name))
    if stored is None:
        return None
    obj: JSON = json.loads(stored.body)
    return obj


def get_object(objects: Any, where: Route) -> web.Response:
    """GET one object, as a real server answers (with kind and apiVersion)."""
    stored = objects.tables[where.resource].get((where.namespace, where.name))
    if stored is None:
        return status(404, "NotFound", f'{where.resource} "{where.name}" not found')
    _, kind, api_version, _ = RESOURCES[where.resource]
    return web.Response(
        body=with_kind(stored.body, kind, api_version), content_type="application/json"
    )


def _precondition(obj: JSON, options: Any) -> web.Response | None:
    wanted = (
        (options or {}).get("preconditions", {}).get("uid") if isinstance(options, dict) else None
    )
    if wanted and obj["metadata"].get("uid") != wanted:
        return status(
            409,
            "Conflict",
            f"Precondition failed: UID in precondition: {wanted}, UID in object meta: "
            f"{obj['metadata'].get('uid')}",
        )
    return None


def evict(api: Any, where: Route, body: Any, *, dry_run: bool, fault: Fault | None) -> web.Response:
    """An Eviction of one pod: refused by an injected fault, checked, or carried out."""
    if fault is not None and fault.code == 429:
        return status(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
            causes=("The disruption budget db needs 3 healthy pods and has 3 currently",),
        )
    if fault is not None:
        return status(fault.code, "InternalError", f"injected failure {fault.code}")
    pod = current(api.objects, where)
    if pod is None:
        return status(404, "NotFound", f'pods "{where.name}" not found')
    refused = _precondition(pod, body.get("deleteOptions") if isinstance(body, dict) else None)
    if refused is not None:
        return refused
    if not dry_run:
        api.delete("pods", where.name, namespace=where.namespace)
        for hook in api.on_evict:
            hook(where.namespace, where.name)
    return status(201, "", "")


def delete_claim(api: Any, where: Route, body: Any, *, fault: Fault | None) -> web.Response:
    """DELETE a claim: marked for deletion while protected, else removed."""
    if fault is not None:
        return status(fault.code, "InternalError", f"injected failure {fault.code}")
    claim = current(api.objects, where)
    if claim is None:
        return status(404, "NotFound", f'persistentvolumeclaims "{where.name}" not found')
    refused = _precondition(claim, body)
    if refused is not None:
        return refused
    if "kubernetes.io/pvc-protection" in (claim["metadata"].get("finalizers") or []):
        claim["metadata"]["deletionTimestamp"] = "2026-11-30T12:00:00Z"
        api.put(where.resource, claim)
    else:
        api.delete(where.resource, where.name, namespace=where.namespace)
    return web.json_response(claim)


async def write(api: Any, request: web.Request) -> web.StreamResponse:
    """POST an Eviction or DELETE a claim (``api`` is the FakeApi: it records and faults)."""
    where = route(request.path)
    if where is None or not where.name:
        return status(404, "NotFound", "the server could not find the requested resource")
    body = await request.json() if request.can_read_body else None
    evicting = request.method == "POST" and where.subresource == "eviction"
    deleting = request.method == "DELETE" and where.resource == "persistentvolumeclaims"
    if not (evicting or deleting):
        return status(405, "MethodNotAllowed", f"{request.method} is not served here")
    fault = api.record("evict" if evicting else "delete", where, request, body)
    if fault is not None and fault.what == "slow":  # answered late, as if nothing went wrong
        await asyncio.sleep(fault.seconds)
        fault = None
    if deleting:
        return delete_claim(api, where, body, fault=fault)
    dry_run = request.query.get("dryRun") == "All"
    return evict(api, where, body, dry_run=dry_run, fault=fault)
