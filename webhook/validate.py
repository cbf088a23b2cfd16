"""Validation: StatefulSet annotations and the final state of pods. Pure.

The validating webhook runs after every mutating webhook, so it checks what will really be
stored: a pod that lost its zone requirement to a later webhook (or never met stszone's
mutating webhook) is refused here, not discovered later in the wrong zone.
"""

from __future__ import annotations

from typing import Any

from webhook import affinity, objects, review
from webhook.config import Defaults
from webhook.mutate import plan_pod
from webhook.review import Outcome
from webhook.spec import DEFAULT_SCHEDULER, ZONE, InvalidSpec, parse_spec
from webhook.state import Store

JSON = dict[str, Any]

_WHY_MISSING = (
    "a mutating webhook that ran after stszone removed it, or stszone's mutating webhook was not "
    "called for this pod (check the MutatingWebhookConfiguration and its namespaceSelector)"
)


def validate_statefulset_annotations(sts: JSON) -> Outcome:
    """Deny malformed ``stszone.io/*`` annotations, listing each problem with an example."""
    meta = objects.mapping(sts, "metadata")
    try:
        parse_spec(objects.str_map(meta, "annotations", path="metadata"))
    except InvalidSpec as err:
        name = objects.string(meta, "name") or "(unnamed)"
        return review.denied(f"StatefulSet {name}: {err}", code=422, reason="Invalid")
    return review.allowed()


def validate_pod(pod: JSON, *, namespace: str, store: Store, defaults: Defaults) -> Outcome:
    """Deny a managed pod that does not carry what its mode requires."""
    plan = plan_pod(pod, namespace=namespace, store=store)
    if plan is None:
        return review.allowed()
    spec = objects.mapping(pod, "spec")
    name = objects.string(objects.mapping(pod, "metadata"), "name") or f"ordinal {plan.ordinal}"
    mode = plan.policy.spec.mode
    zone = plan.placement.zone
    if mode == "affinity":
        key = plan.policy.spec.topology_key
        if not affinity.pins(spec, key, zone):
            return review.denied(
                f"pod {name} reached validation without the required nodeAffinity {key} In "
                f"[{zone}] that stszone sets for ordinal {plan.ordinal}: {_WHY_MISSING}",
                reason="ZoneRequirementMissing",
            )
    elif mode == "node-ordinal":
        label = plan.policy.spec.node_label or ""
        if not affinity.pins(spec, label, str(plan.ordinal)):
            return review.denied(
                f"pod {name} reached validation without the required nodeAffinity {label} In "
                f"[{plan.ordinal}] of node-ordinal mode: {_WHY_MISSING}",
                reason="NodeRequirementMissing",
            )
    else:
        scheduler = objects.string(spec, "schedulerName", path="spec")
        recorded = objects.str_map(objects.mapping(pod, "metadata"), "annotations").get(ZONE)
        if scheduler in ("", DEFAULT_SCHEDULER) or recorded != zone:
            wanted = plan.policy.spec.scheduler_name or defaults.scheduler_name
            return review.denied(
                f"pod {name} reached validation with schedulerName "
                f"{scheduler or DEFAULT_SCHEDULER!r} and {ZONE}={recorded!r}; scheduler mode "
                f"needs schedulerName {wanted!r} and {ZONE}={zone!r}: {_WHY_MISSING}",
                reason="SchedulerRequirementMissing",
            )
    return review.allowed()
