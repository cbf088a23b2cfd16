"""kube-scheduler extender: the ``filter`` and ``prioritize`` verbs over the cluster view. Pure.

The wire (:mod:`webhook.wire.extender`) reads ``ExtenderArgs`` into the pod and its
:class:`Candidate` nodes and renders the answers in the shape kube-scheduler asked for.

Filter keeps the nodes where the pod can run with its bound volumes, in its zone (its
``stszone.io/zone`` annotation, else the rule), whose storage is healthy. A volume bound after
the annotation was written, in another zone, wins: the pod can only ever run where its data is,
so the filter passes the volume's nodes and every reason it gives says so (kube-scheduler sends
only nodes that passed its own volume filters; following the annotation would drop them all).
Whether a volume admits a node is read as the guard reads it (:mod:`webhook.model.pinning`).
Dropped nodes are unresolvable (``FailedAndUnresolvableNodes``, which preemption skips):
evicting pods neither moves a node's zone nor repairs its disks. Reasons name no node:
kube-scheduler counts identical reasons in its event ("0/6 nodes are available: 4 node(s) in
zone zone-b, ...").

Storage health: a node condition of the configured type with status True, and/or a node label.
With ``nodeCacheCapable: true`` conditions come from the view (the live view watches full Nodes,
and keeps the True condition types of each); a node the view does not hold yet cannot fail on a
condition (unknown counts as healthy; as broken it would stop all scheduling).

Prioritize scores 0..``MAX_SCORE`` (``MaxExtenderPriority``; kube-scheduler multiplies by the
weight and rescales): half for the zone of the pod's bound volume (else its placement zone),
half for healthy storage. A pod the filter passes untouched gets the same score on every node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from webhook.config import Defaults
from webhook.errors import BadObject, BadRequest, Denied
from webhook.model import objects
from webhook.model.annotations import (
    ZONE,
    InvalidAnnotations,
    parse_annotations,
    stszone_annotations,
)
from webhook.model.objects import JSON
from webhook.model.owners import ordinal_of, workload_owner
from webhook.model.store import Store
from webhook.rules.placement import place
from webhook.rules.plan import pod_claims, skipped
from webhook.rules.policy import resolve_policy

#: ``MaxExtenderPriority`` of kube-scheduler's extender API (``MinExtenderPriority`` is 0).
MAX_SCORE: Final = 10
_DEFAULTS: Final = Defaults()


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node the scheduler offers: from the request (full Node) or from the view (name)."""

    name: str
    labels: Mapping[str, str]
    true_conditions: frozenset[str]
    #: False when only the name came and the view does not hold the node.
    known: bool = True


@dataclass(frozen=True, slots=True)
class Filtered:
    """The filter's answer: the nodes that pass, why each other one fails, or an error."""

    passed: tuple[str, ...] = ()
    #: Node -> why it fails (unresolvable: no preemption makes it pass).
    failed: Mapping[str, str] = field(default_factory=dict)
    #: Why no node passes, for kube-scheduler to report on the pod ("" when none).
    error: str = ""


def storage_problem(node: Candidate, *, defaults: Defaults) -> str | None:
    """Why the node's storage is unhealthy, or None when nothing configured says so."""
    problems = []
    condition = defaults.storage_unhealthy_condition
    if condition and condition in node.true_conditions:
        problems.append(f"condition {condition} is True")
    if defaults.storage_unhealthy_label is not None:
        key, value = defaults.storage_unhealthy_label
        have = node.labels.get(key)
        if have is not None and (value is None or have == value):
            problems.append(f"label {key}={have}")
    return f"node(s) with unhealthy storage ({', '.join(problems)})" if problems else None


@dataclass(frozen=True, slots=True)
class Goal:
    """Where a pod must go: its zone on a topology key, and the zones of its bound volumes."""

    pod: str
    topology_key: str
    zone: str
    volume_zones: frozenset[str] = frozenset()
    #: The bound volumes that pin it: (name, the view's nodes it can attach to; None: any).
    volumes: tuple[tuple[str, frozenset[str] | None], ...] = ()
    #: The zone its annotation records when its volumes rule it out ("" otherwise): the
    #: volumes win, and the pod goes to any of :attr:`volume_zones`.
    overruled: str = ""

    @property
    def zones(self) -> frozenset[str]:
        """The zones whose nodes pass the filter."""
        return self.volume_zones if self.overruled else frozenset({self.zone})


def target(pod: JSON, *, store: Store, defaults: Defaults = _DEFAULTS) -> Goal | None:
    """The pod's zone (annotation, else the rule), or None for pods stszone leaves alone:
    skipped ones, those of a namespace it never intercepts or that is not opted in, and those
    of a kind turned off (with the extender in the default scheduler's profile, every pod
    comes by).

    Raises :class:`Denied` when the annotations are malformed, or when the zone must come from
    the rule and cannot (no ordinal, no zones known).
    """
    meta = objects.mapping(pod, "metadata")
    labels = objects.str_map(meta, "labels", path="metadata")
    namespace = objects.string(meta, "namespace")
    excluded = namespace in defaults.excluded_namespaces
    if skipped(labels) or excluded or store.namespace_enabled(namespace) is False:
        return None
    annotations = objects.str_map(meta, "annotations", path="metadata")
    name = objects.string(meta, "name") or "(unnamed)"
    claims = pod_claims(pod)
    zone = annotations.get(ZONE)
    controller = workload_owner(meta)
    group, owner = (controller[0], controller[1]) if controller is not None else ("", None)
    if group and not defaults.kruise:
        return None  # --no-kruise: the view never holds the set, so there is no rule to apply
    if owner is None:
        if not zone:
            return None
        try:
            declared = parse_annotations(stszone_annotations(annotations))
        except InvalidAnnotations as err:
            raise Denied(
                f"pod {namespace}/{name} has malformed stszone annotations: {err}"
            ) from err
    else:
        # No pod_claims: the templates they would stand in for are read only when no claims
        # are given, and place() below is given the pod's.
        policy = resolve_policy(
            namespace,
            owner,
            store=store,
            pod_annotations=annotations,
            group=group,
            retried_by="kube-scheduler retries the pod by itself",
        )
        declared = policy.declared
        if not zone and declared.mode == "node-ordinal":
            return None  # its own affinity pins it to a node, whose zone is not the rule's
        if not zone:
            ordinal = ordinal_of(meta, labels)
            if ordinal is None:
                raise Denied(f"pod {namespace}/{name} of {policy.kind} {owner} has no ordinal")
            zone = place(
                ordinal, namespace=namespace, policy=policy, store=store, claims=claims
            ).zone
            if not zone:
                return None  # its volume can attach nowhere: no zone to hold it to
    key = declared.topology_key
    volume_zones: frozenset[str] | None = None
    volumes: list[tuple[str, frozenset[str] | None]] = []
    for claim in claims:
        volume, zones = store.claim_zones(namespace, claim, key)
        if zones:
            volumes.append((volume, store.volume_nodes(volume, key)))
            volume_zones = zones if volume_zones is None else volume_zones & zones
    found = volume_zones or frozenset()
    overruled = zone if found and zone not in found else ""
    return Goal(name, key, zone, found, tuple(volumes), overruled)


def _zone_problem(node: Candidate, *, goal: Goal) -> str | None:
    if not node.known:
        return "node(s) not in stszone's node cache yet, zone unknown"
    have = node.labels.get(goal.topology_key)
    if goal.overruled:
        if have in goal.volume_zones:
            return None
        volumes = ", ".join(v for v, _ in goal.volumes)
        where = f"in zone {have}" if have is not None else f"without label {goal.topology_key}"
        return (
            f"node(s) {where}, stszone places {goal.pod} with its volume {volumes} in "
            f"{_zones(goal.volume_zones)} (the volume wins over {ZONE}={goal.overruled})"
        )
    if have is None:
        return (
            f"node(s) without label {goal.topology_key}, stszone places {goal.pod} in {goal.zone}"
        )
    if have != goal.zone:
        return f"node(s) in zone {have}, stszone places {goal.pod} in zone {goal.zone}"
    return None


def _zones(zones: frozenset[str]) -> str:
    return f"zone {next(iter(zones))}" if len(zones) == 1 else f"zones {', '.join(sorted(zones))}"


def _volume_problem(node: Candidate, *, goal: Goal, store: Store) -> str | None:
    """Why the pod's bound volumes cannot be used from ``node`` (None: they can)."""
    for volume, nodes in goal.volumes:
        if nodes is None or node.name in nodes or not node.known:
            continue  # not pinned; or a node the view lacks (the zone reason covers it)
        if node.name not in store.nodes:  # offered in full, not yet in the view: its labels
            info = store.volumes.get(volume)
            if info is None or info.pinning.admits(node.labels):
                continue
        text = f"node(s) volume {volume} of {goal.pod} cannot attach to"
        if goal.overruled:
            text += f" (the volume wins over {ZONE}={goal.overruled})"
        return text
    return None


def filter_nodes(
    pod: JSON, candidates: tuple[Candidate, ...], *, store: Store, defaults: Defaults
) -> Filtered:
    """Answer the ``filter`` verb: the nodes where the pod can run with its volumes, in its
    zone, whose storage is healthy."""
    try:
        goal = target(pod, store=store, defaults=defaults)
    except Denied as err:
        return Filtered(error=err.message)
    except BadObject as err:
        raise BadRequest(f"malformed ExtenderArgs.Pod: {err.message}") from None
    if goal is None:  # nothing to enforce: every node passes, storage included
        return Filtered(tuple(n.name for n in candidates))
    passed: list[str] = []
    failed: dict[str, str] = {}
    for node in candidates:
        why = (
            _volume_problem(node, goal=goal, store=store) or _zone_problem(node, goal=goal),
            storage_problem(node, defaults=defaults),
        )
        if any(why):
            failed[node.name] = "; ".join(r for r in why if r)
        else:
            passed.append(node.name)
    return Filtered(tuple(passed), failed)


def prioritize(
    pod: JSON, candidates: tuple[Candidate, ...], *, store: Store, defaults: Defaults
) -> list[tuple[str, int]]:
    """Answer the ``prioritize`` verb: (node, 0..10), preferring the volume's zone and healthy
    storage; the same score on every node for a pod stszone leaves alone."""
    try:
        goal = target(pod, store=store, defaults=defaults)
    except Denied:
        goal = None  # filter reports it; scoring just has no zone preference
    except BadObject as err:
        raise BadRequest(f"malformed ExtenderArgs.Pod: {err.message}") from None
    else:
        if goal is None:
            # kube-scheduler adds score * weight * 10 to each node's total, so a lower score
            # for unhealthy storage would steer a pod the filter passed untouched (every pod
            # of the cluster, with the extender in the default profile); one score for all
            # changes no choice.
            return [(node.name, MAX_SCORE) for node in candidates]
    key, preferred = "", None  # pragma: no mutate (the key is read only with a preference)
    if goal is not None:
        key, preferred = goal.topology_key, goal.volume_zones or goal.zones
    half = MAX_SCORE // 2
    scores: list[tuple[str, int]] = []
    for node in candidates:
        in_zone = preferred is None or node.labels.get(key) in preferred
        healthy = storage_problem(node, defaults=defaults) is None
        scores.append((node.name, half * in_zone + (MAX_SCORE - half) * healthy))
    return scores
