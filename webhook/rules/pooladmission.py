"""The requests about Strimzi KafkaNodePools, their brokers' pods and claims, to their rules. Pure.

:mod:`webhook.rules.admission` asks here first; None means "not a pool request" and the
StatefulSet rules decide. A pod or claim is a pool broker's when the operator's labels
(``strimzi.io/cluster``, ``strimzi.io/pool-name``) name a pool the view holds. ``defaults`` is
not read: with the kind off, the view holds no pool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from webhook.config import Defaults
from webhook.model.nodepools import GROUP
from webhook.model.store import Store
from webhook.rules import pools, poolscaling
from webhook.rules.decision import Decision, allow

if TYPE_CHECKING:
    from webhook.rules.admission import Request


def _is_pool(request: Request) -> bool:
    return request.resource == "kafkanodepools" and request.resource_group in ("", GROUP)


def mutate(request: Request, store: Store, defaults: Defaults) -> Decision | None:
    """``/mutate`` of a pool request; None for any other."""
    obj, ns, op = request.object, request.namespace, request.operation
    if _is_pool(request) and request.kind == "KafkaNodePool" and not request.sub_resource:
        if op == "CREATE":
            return pools.mutate_nodepool(obj, store=store)
        if op == "UPDATE":
            return poolscaling.mutate_pool_update(
                obj, old=request.old_object, namespace=ns, store=store
            )
        return None
    if op != "CREATE" or request.group or pools.pool_member(obj) is None:
        return None
    if request.kind == "Pod":
        return pools.mutate_pool_pod(obj, namespace=ns, store=store)
    if request.kind == "PersistentVolumeClaim":
        return pools.mutate_pool_claim(obj, namespace=ns, store=store)
    return None


def validate(request: Request, store: Store, defaults: Defaults) -> Decision | None:
    """``/validate`` of a pool request; None for any other."""
    if request.kind == "Pod" and not request.group and request.operation == "CREATE":
        if pools.pool_member(request.object) is None:
            return None
        return pools.validate_pool_pod(request.object, namespace=request.namespace, store=store)
    if not _is_pool(request):
        return None
    if request.operation == "CREATE" and request.kind == "KafkaNodePool":
        obj = request.object
        read = poolscaling.written(obj, store=store)
        invalid = poolscaling.pool_annotation_problems(obj, read=read, old=None)
        return invalid or allow(
            warnings=poolscaling.pool_spread_warnings(obj, read=read, old=None, store=store)
        )
    if request.operation != "UPDATE":
        return None
    if request.sub_resource == "scale" and request.kind == "Scale":
        return poolscaling.validate_pool_scale(
            request.object,
            old=request.old_object,
            name=request.name,
            namespace=request.namespace,
            store=store,
        )
    if request.kind == "KafkaNodePool" and not request.sub_resource:
        return poolscaling.validate_pool_update(
            request.object, old=request.old_object, namespace=request.namespace, store=store
        )
    return None
