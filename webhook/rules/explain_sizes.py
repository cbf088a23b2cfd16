"""What the scale-down guard would answer to each smaller size of a set, for ``stszone explain``.
Pure.

Each size is judged by the functions the webhook runs for that kind
(:func:`webhook.rules.scaling.judge` for an ``apps/v1`` StatefulSet,
:func:`webhook.rules.kruise.judge_live` for an Advanced StatefulSet's live ordinals), so the
answer shown is the one a ``kubectl scale`` to that size would get. A namespace stszone never
hears from, and a set labelled to be skipped, get the API server's answer: allowed, not judged.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Final

from webhook.model.annotations import SKIP
from webhook.model.records import StatefulSetInfo
from webhook.model.store import Store
from webhook.rules import kruise, scaling
from webhook.rules.policy import SCALES_RETRIED_BY, Policy

#: Smaller sizes judged one by one, nearest first (each is one guard answer).
SIZES: Final = 64


@dataclass(frozen=True, slots=True)
class SizeAnswer:
    """The guard's answer to a scale-down to ``replicas``."""

    replicas: int
    allowed: bool
    reason: str
    message: str
    warnings: tuple[str, ...]


def ranges(sts: StatefulSetInfo, replicas: int) -> tuple[range, range]:
    """The members of an ``apps/v1`` set before and after a scale to ``replicas`` (the highest
    go first)."""
    return range(sts.start, sts.start + sts.replicas), range(sts.start, sts.start + replicas)


def namespace_refusal(store: Store, namespace: str, *, excluded: Collection[str]) -> str:
    """Why stszone places nothing in ``namespace`` ("" when it does)."""
    if namespace in excluded:
        return f"namespace {namespace} is never intercepted (kube-system, stszone's own)"
    if store.namespace_enabled(namespace) is False:
        return f"namespace {namespace} is not opted in (label stszone.io/enabled=true)"
    return ""


def sizes(
    sts: StatefulSetInfo, policy: Policy, store: Store, *, excluded: Collection[str]
) -> tuple[SizeAnswer, ...]:
    """The answer for each smaller size, nearest first (:data:`SIZES` of them at most)."""
    smaller = range(sts.replicas - 1, max(sts.replicas - 1 - SIZES, -1), -1)
    refused = namespace_refusal(store, sts.namespace, excluded=excluded)
    return tuple(_answer(sts, policy, store, n, refused=refused) for n in smaller)


def _answer(
    sts: StatefulSetInfo, policy: Policy, store: Store, replicas: int, *, refused: str = ""
) -> SizeAnswer:
    answer = _judged(sts, policy, store, replicas, refused=refused)
    if refused or sts.skipped or not replicas:
        return answer
    said: tuple[str, ...] = ()
    if policy.malformed:  # as the guard answers a Scale the defaults judged (not one to zero)
        kind = policy.kind
        said = (scaling.malformed_warning(sts.name, policy.malformed, by="scale", kind=kind),)
    # And what a Scale (or an UPDATE) to that count is told of it.
    said += scaling.count_warnings(sts, replicas, store=store)
    return replace(answer, warnings=(*answer.warnings, *said))


def _judged(
    sts: StatefulSetInfo, policy: Policy, store: Store, replicas: int, *, refused: str = ""
) -> SizeAnswer:
    if refused:  # the namespaceSelector never sends its requests to stszone
        return SizeAnswer(replicas, True, "", "", (f"not judged: {refused}",))
    if sts.skipped:  # its writes (the objectSelector) and its /scale are never judged
        unjudged = f"not judged: the {policy.kind} is labelled {SKIP}=true"
        return SizeAnswer(replicas, True, "", "", (unjudged,))
    if policy.live is not None:  # an Advanced StatefulSet: its live sets before and after
        before = policy.live
        after = before.resized(replicas)
        decided = kruise.judge_live(
            sts.name,
            before=before,
            after=after,
            namespace=sts.namespace,
            old_policy=policy,
            new_policy=policy._replace(live=after),
            store=store,
            retried_by=SCALES_RETRIED_BY,
            sts=sts,
        )
        return SizeAnswer(
            replicas, decided.allowed, decided.reason, decided.message, tuple(decided.warnings)
        )
    old, new = ranges(sts, replicas)
    outcome = scaling.judge(
        sts.name,
        old=old,
        new=new,
        namespace=sts.namespace,
        policy=policy,
        store=store,
        allow_zone_loss=policy.declared.allow_zone_loss,
        retried_by=SCALES_RETRIED_BY,
        sts=sts,
    )
    return SizeAnswer(
        replicas, outcome.allowed, outcome.reason, outcome.message, tuple(outcome.warnings)
    )
