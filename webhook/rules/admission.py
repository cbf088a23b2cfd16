"""The admission engine: a request in the rules' terms in, a :class:`Decision` out. Pure.

``mutate`` and ``validate`` are what ``/mutate`` and ``/validate`` decide; the wire
(:mod:`webhook.wire.review`) reads a request from an AdmissionReview and renders the decision
back. A request changes nothing but its answer: the view is only read, so a dry run is decided
exactly like the real request (the server turns a decision's notices into Events, never for a
dry run).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Literal, NamedTuple

from webhook.config import Defaults
from webhook.errors import BadObject, Denied
from webhook.model.kruise import GROUP as KRUISE
from webhook.model.kruise import KIND as KRUISE_KIND
from webhook.model.nodepools import GROUP as STRIMZI
from webhook.model.store import Store
from webhook.rules import claims, kruiseadmission, podcheck, pooladmission, scaling
from webhook.rules import mutate as mutations
from webhook.rules import validate as validations
from webhook.rules.decision import Decision, allow, refuse

Endpoint = Literal["mutate", "validate"]


class Request(NamedTuple):
    """What the rules read of one admission request (``AdmissionReview.request``)."""

    kind: str
    group: str
    resource: str
    sub_resource: str
    operation: str
    namespace: str
    name: str
    #: The objects as the API server sent them ({} when absent); the rules never change them.
    object: dict[str, Any]
    old_object: dict[str, Any]
    dry_run: bool = False
    #: ``request.resource.group``: tells apps/v1 StatefulSets from look-alikes on a subresource.
    resource_group: str = ""
    #: ``request.userInfo.username``: who asked (the StatefulSet controller, a user, the HPA).
    username: str = ""

    def __repr__(self) -> str:  # the identity of the request, never the objects it carries
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"Request({self.operation} {self.kind} {where})"


def _refused(request: Request, err: Denied | BadObject) -> Decision:
    """The denial of a request the rules refused (one place for both endpoints)."""
    if isinstance(err, Denied):
        return refuse(err.message, reason=err.reason)
    return refuse(f"malformed {request.kind}: {err.message}", code=400, reason="BadRequest")


class KindRules(NamedTuple):
    """The rules of one ordinal-workload kind beyond apps/v1 StatefulSets, asked first: each
    returns None for a request that is not about its kind (its workloads, their pods)."""

    mutate: Callable[[Request, Store, Defaults], Decision | None]
    validate: Callable[[Request, Store, Defaults], Decision | None]
    #: (kind, group) of the workload itself: its UPDATE is judged against the old object.
    workload: tuple[str, str]


#: Strimzi KafkaNodePools, OpenKruise Advanced StatefulSets; a new kind is one more module
#: and one more entry here.
KINDS: Final = (
    KindRules(pooladmission.mutate, pooladmission.validate, ("KafkaNodePool", STRIMZI)),
    KindRules(kruiseadmission.mutate, kruiseadmission.validate, (KRUISE_KIND, KRUISE)),
)


def mutate(request: Request, *, store: Store, defaults: Defaults) -> Decision:
    """Decide ``/mutate``."""
    if request.namespace in defaults.excluded_namespaces:
        return allow()
    try:
        for kind_rules in KINDS:
            decision = kind_rules.mutate(request, store, defaults)
            if decision is not None:
                return decision
    except (Denied, BadObject) as err:
        return _refused(request, err)
    if request.operation != "CREATE":
        return allow()
    obj, ns, group, kind = request.object, request.namespace, request.group, request.kind
    try:
        if kind == "Pod" and not group:
            return mutations.mutate_pod(
                obj, namespace=ns, store=store, defaults=defaults, requester=request.username
            )
        if kind == "PersistentVolumeClaim" and not group:
            return claims.mutate_claim(obj, namespace=ns, store=store, requester=request.username)
        if kind == "StatefulSet" and group == "apps" and not request.sub_resource:
            return mutations.mutate_statefulset(obj, store=store)
    except (Denied, BadObject) as err:
        return _refused(request, err)
    return allow()


#: The workloads whose UPDATE is judged against the object it replaces.
_COMPARED: Final = frozenset({("StatefulSet", "apps"), *(rules.workload for rules in KINDS)})


def _set_update_without_old(request: Request) -> bool:
    """An UPDATE of a workload (an apps/v1 or OpenKruise StatefulSet, a KafkaNodePool, whose
    brokers are the old object's status) that lacks it as it was: a hand-written review
    (``stszone review``); the API server always sends it."""
    return (
        (request.kind, request.group) in _COMPARED
        and request.operation == "UPDATE"
        and not request.sub_resource
        and not request.old_object
    )


def validate(request: Request, *, store: Store, defaults: Defaults) -> Decision:
    """Decide ``/validate``."""
    if request.namespace in defaults.excluded_namespaces:
        return allow()
    obj, ns, group, kind = request.object, request.namespace, request.group, request.kind
    operation, sub_resource = request.operation, request.sub_resource
    if _set_update_without_old(request):
        return refuse(
            f"{request.kind} {request.name} UPDATE without request.oldObject: every check "
            "compares it with the one it replaces; give that one as oldObject (the API server "
            "always sends it)",
            code=400,
            reason="BadRequest",
        )
    try:
        for kind_rules in KINDS:
            decision = kind_rules.validate(request, store, defaults)
            if decision is not None:
                return decision
        if kind == "Pod" and not group and operation == "CREATE":
            return podcheck.validate_pod(
                obj, namespace=ns, store=store, defaults=defaults, requester=request.username
            )
        if request.resource == "statefulsets" and sub_resource == "scale":
            # kubectl scale and the HPA: kind autoscaling/v1 Scale, no annotations of its own.
            # The resource group tells apps/v1 StatefulSets from look-alikes (OpenKruise's, say).
            if kind != "Scale" or operation != "UPDATE" or request.resource_group != "apps":
                return allow()
            return scaling.validate_scale(
                obj, old=request.old_object, name=request.name, namespace=ns, store=store
            )
        # Other subresources (status) cannot change spec or annotations: nothing to check.
        if (
            kind == "StatefulSet"
            and group == "apps"
            and not sub_resource
            and operation in ("CREATE", "UPDATE")
        ):
            before = request.old_object if operation == "UPDATE" else None
            return validations.validate_statefulset(obj, old=before, namespace=ns, store=store)
    except (Denied, BadObject) as err:
        return _refused(request, err)
    return allow()


DECIDE: dict[Endpoint, Callable[..., Decision]] = {"mutate": mutate, "validate": validate}
