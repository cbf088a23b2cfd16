"""Validation of a StatefulSet pod's final state: what its mode requires, it carries. Pure.

The validating webhook runs after every mutating webhook, so it checks what will really be
stored: a pod that lost its zone requirement to a later webhook (or never met stszone's
mutating webhook) is refused here, not discovered later in the wrong zone.
"""

from __future__ import annotations

from webhook.config import Defaults
from webhook.model import objects
from webhook.model.annotations import DEFAULT_SCHEDULER, ZONE
from webhook.model.objects import JSON
from webhook.model.store import Store
from webhook.rules import affinity
from webhook.rules.decision import Decision, allow, refuse
from webhook.rules.plan import check_node_name, plan_pod, read_pod

_WHY_MISSING = (
    "a mutating webhook that ran after stszone removed it, or stszone's mutating webhook was not "
    "called for this pod (check the MutatingWebhookConfiguration and its namespaceSelector)"
)


def validate_pod(
    pod: JSON, *, namespace: str, store: Store, defaults: Defaults, requester: str
) -> Decision:
    """Deny a managed pod that does not carry what its mode requires (``requester``: who sent
    its create, ``request.userInfo.username``)."""
    view = read_pod(pod, requester=requester)
    if view is None:
        return allow()
    plan = plan_pod(view, namespace=namespace, store=store)
    check_node_name(view, plan, namespace=namespace, store=store)
    spec = view.spec
    name = view.name or f"ordinal {plan.ordinal}"
    mode = plan.policy.declared.mode
    zone = plan.placement.zone
    if mode != "node-ordinal" and not zone:
        return allow()  # its volume can attach nowhere: stszone pins it to no zone
    recorded = view.annotations.get(ZONE)
    if mode != "node-ordinal" and recorded and recorded != zone:
        key = plan.policy.declared.topology_key
        if mode == "scheduler" or affinity.pins(spec, key, recorded):
            # stszone's mutating webhook did run, on a replica whose view placed it elsewhere.
            return refuse(
                f"pod {name} was pinned to {recorded} by a stszone replica whose view of the "
                f"cluster differs from this one's, which places ordinal {plan.ordinal} in "
                f"{zone}: one of them has not yet seen a recent change (the set's zone list or "
                "start, a claim or its volume); the StatefulSet controller retries the create",
                reason="ZoneRequirementMissing",
            )
    if mode == "affinity":
        key = plan.policy.declared.topology_key
        if not affinity.pins(spec, key, zone):
            return refuse(
                f"pod {name} reached validation without the required nodeAffinity {key} In "
                f"[{zone}] that stszone sets for ordinal {plan.ordinal}: {_WHY_MISSING}",
                reason="ZoneRequirementMissing",
            )
    elif mode == "node-ordinal":
        # Node-ordinal mode without stszone.io/node-label is refused as malformed: the label is set.
        label = plan.policy.declared.node_label or ""  # pragma: no mutate (never empty here)
        if not affinity.pins(spec, label, str(plan.ordinal)):
            return refuse(
                f"pod {name} reached validation without the required nodeAffinity {label} In "
                f"[{plan.ordinal}] of node-ordinal mode: {_WHY_MISSING}",
                reason="NodeRequirementMissing",
            )
    else:
        scheduler = objects.string(spec, "schedulerName", path="spec") or DEFAULT_SCHEDULER
        recorded = view.annotations.get(ZONE)
        wanted = plan.policy.declared.scheduler_name or defaults.scheduler_name
        # The extender may sit in the default scheduler's own profile: then wanted is it.
        if (scheduler == DEFAULT_SCHEDULER and wanted != DEFAULT_SCHEDULER) or recorded != zone:
            return refuse(
                f"pod {name} reached validation with schedulerName "
                f"{scheduler!r} and {ZONE}={recorded!r}; scheduler mode "
                f"needs schedulerName {wanted!r} and {ZONE}={zone!r}: {_WHY_MISSING}",
                reason="SchedulerRequirementMissing",
            )
    return allow()
