"""The admission engine: a parsed request in, an :class:`~webhook.wire.review.Outcome` out. Pure.

``mutate`` and ``validate`` are what ``/mutate`` and ``/validate`` answer; ``chain`` is what
the API server makes of both (mutation first, then validation of the mutated object), which
``stszone review`` prints. Dry-run requests take exactly the same path: nothing here has side
effects, which is what ``sideEffects: None`` promises.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from webhook.config import Defaults
from webhook.errors import BadObject, Denied
from webhook.model.store import Store
from webhook.rules import claims, scaling
from webhook.rules import mutate as mutations
from webhook.rules import validate as validations
from webhook.wire import review
from webhook.wire.patches import apply
from webhook.wire.review import Outcome, Request

Endpoint = Literal["mutate", "validate"]


def _refused(request: Request, err: Denied | BadObject) -> Outcome:
    """The denial of a request the rules refused (one place for both endpoints)."""
    if isinstance(err, Denied):
        return review.denied(err.message, reason=err.reason)
    return review.denied(f"malformed {request.kind}: {err.message}", code=400, reason="BadRequest")


def mutate(request: Request, *, store: Store, defaults: Defaults) -> Outcome:
    """Answer ``/mutate``."""
    if request.operation != "CREATE" or request.namespace in defaults.excluded_namespaces:
        return review.allowed()
    obj, ns, group, kind = request.object, request.namespace, request.group, request.kind
    try:
        if kind == "Pod" and not group:
            return mutations.mutate_pod(obj, namespace=ns, store=store, defaults=defaults)
        if kind == "PersistentVolumeClaim" and not group:
            return claims.mutate_claim(obj, namespace=ns, store=store, requester=request.username)
        if kind == "StatefulSet" and group == "apps" and not request.sub_resource:
            return mutations.mutate_statefulset(obj, store=store)
    except (Denied, BadObject) as err:
        return _refused(request, err)
    return review.allowed()


def validate(request: Request, *, store: Store, defaults: Defaults) -> Outcome:
    """Answer ``/validate``."""
    if request.namespace in defaults.excluded_namespaces:
        return review.allowed()
    obj, ns, group, kind = request.object, request.namespace, request.group, request.kind
    operation, sub_resource = request.operation, request.sub_resource
    try:
        if kind == "Pod" and not group and operation == "CREATE":
            return validations.validate_pod(obj, namespace=ns, store=store, defaults=defaults)
        if request.resource == "statefulsets" and sub_resource == "scale":
            # kubectl scale and the HPA: kind autoscaling/v1 Scale, no annotations of its own.
            # The resource group tells apps/v1 StatefulSets from look-alikes (OpenKruise's, say).
            if kind != "Scale" or operation != "UPDATE" or request.resource_group != "apps":
                return review.allowed()
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
    return review.allowed()


ANSWER: dict[Endpoint, Callable[..., Outcome]] = {"mutate": mutate, "validate": validate}


def chain(request: Request, *, store: Store, defaults: Defaults) -> Outcome:
    """What the API server makes of both webhooks: mutate, then validate the mutated object.

    A denial from either wins; otherwise the mutation's patch with the warnings of both.
    """
    mutated = mutate(request, store=store, defaults=defaults)
    if not mutated.allowed:
        return mutated
    after = request
    if mutated.patch:
        after = request._replace(object=apply(request.object, mutated.patch))
    checked = validate(after, store=store, defaults=defaults)
    if not checked.allowed:
        return checked.with_warnings(mutated.warnings)
    return mutated.with_warnings(checked.warnings)
