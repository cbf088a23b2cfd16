"""The requests about OpenKruise Advanced StatefulSets to their rules. Pure.

:mod:`webhook.rules.admission` asks here as it asks :mod:`webhook.rules.pooladmission`; None
means "not an Advanced StatefulSet request". Their pods and claims need nothing of their own
here: the StatefulSet rules place them, the owner's group telling the two kinds apart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from webhook.config import Defaults
from webhook.model.kruise import GROUP, KIND
from webhook.model.store import Store
from webhook.rules import kruise
from webhook.rules import mutate as mutations
from webhook.rules.decision import Decision, allow

if TYPE_CHECKING:
    from webhook.rules.admission import Request


def _is_kruise(request: Request) -> bool:
    # The resource's group: a /scale request's kind is autoscaling/v1 Scale.
    return request.resource == "statefulsets" and request.resource_group == GROUP


def mutate(request: Request, store: Store, defaults: Defaults) -> Decision | None:
    """``/mutate`` of an Advanced StatefulSet: its zone list on CREATE, filled as for a set."""
    if not _is_kruise(request):
        return None
    if not defaults.kruise or request.operation != "CREATE" or request.sub_resource:
        return allow()
    if request.kind != KIND or request.group != GROUP:
        return allow()
    return mutations.mutate_statefulset(request.object, store=store, group=GROUP)


def validate(request: Request, store: Store, defaults: Defaults) -> Decision | None:
    """``/validate`` of an Advanced StatefulSet or its ``/scale``: the live-set guard."""
    if not _is_kruise(request):
        return None
    if not defaults.kruise or request.operation not in ("CREATE", "UPDATE"):
        return allow()
    ns = request.namespace
    if request.sub_resource == "scale":
        if request.kind != "Scale" or request.operation != "UPDATE":
            return allow()
        return kruise.validate_kruise_scale(
            request.object, old=request.old_object, name=request.name, namespace=ns, store=store
        )
    if request.sub_resource or request.kind != KIND or request.group != GROUP:
        return allow()  # status cannot change spec or annotations
    before = request.old_object if request.operation == "UPDATE" else None
    return kruise.validate_kruise_set(request.object, old=before, namespace=ns, store=store)
