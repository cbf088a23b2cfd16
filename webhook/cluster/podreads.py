"""What the rebalance executor reads before and after each step, from the API server (never
from the plan): whether the set is whole, where a pod is, what a re-created pod looks like.

One path for both kinds of set: an ``apps/v1`` StatefulSet and an OpenKruise Advanced
StatefulSet (``apps.kruise.io``) are read at their own API path, their members are their live
ordinals (:class:`~webhook.model.kruise.Live`: an ``apps/v1`` set reserves none), and a pod
counts for a set only when its controller owner names the set's group, kind and name (and uid,
when the plan knows it): an ``apps/v1`` set of the same name is never taken for it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from webhook.cluster.api import Api, ApiError
from webhook.cluster.moves import Stop
from webhook.cluster.resources import STATEFULSET_POD_LABEL
from webhook.model import objects
from webhook.model import state as states
from webhook.model.annotations import ZONE
from webhook.model.kruise import Live
from webhook.model.owners import ordinal_of, owned_by, workload_owner
from webhook.model.records import StatefulSetInfo
from webhook.model.setkinds import KINDS
from webhook.model.tables import set_info
from webhook.rules.rebalance_plan import Step


def pod_path(step: Step, suffix: str = "") -> str:
    """The API path of the step's pod (and of a subresource of it)."""
    return f"/api/v1/namespaces/{step.namespace}/pods/{step.pod}{suffix}"


def set_path(step: Step) -> str:
    """The API path of the step's set: ``apps/v1``, or the Advanced StatefulSet's version
    stszone reads (the one with ``reserveOrdinals``)."""
    version = KINDS[step.group].api_version
    return f"/apis/{version}/namespaces/{step.namespace}/statefulsets/{step.statefulset}"


def unavailable(state: states.SetState, *, replicas: int) -> str:
    """How far the set's status is from counting every replica available ("" when it does, or
    has no ``minReadySeconds``: available is Ready then). Ready is not yet available: the
    controller's rollouts wait out minReadySeconds, and a disruption budget counts Ready pods
    only, so nothing else would wait."""
    if state.available is None or state.available >= replicas:
        return ""
    return f"{state.available}/{replicas} replicas available (minReadySeconds {state.min_ready})"


def member(step: Step, pod: dict[str, Any] | None) -> bool:
    """Whether ``pod`` is controlled by the step's set (group, kind, name; uid when known)."""
    owner = workload_owner(meta(pod)) if pod is not None else None
    return owned_by(owner, group=step.group, name=step.statefulset, uid=step.set_uid)


def changed(step: Step, info: StatefulSetInfo) -> str:
    """How the set's members differ from the plan's ("" when they do not)."""
    where = f"{step.kind} {step.namespace}/{step.statefulset}"
    if step.set_uid and info.uid and info.uid != step.set_uid:
        return f"{where} was deleted and created again (uid {info.uid})"
    if info.replicas != step.replicas:
        return f"{where} now has {info.replicas} replicas, not {step.replicas} as planned"
    if info.start != step.spec_start:
        return f"{where} now starts at ordinal {info.start}, not {step.spec_start} as planned"
    if info.reserved != step.reserved:
        return f"the reserveOrdinals of {where} changed since the plan (its members' ranks move)"
    return ""


@dataclass(slots=True)
class Reads:
    """Targeted GETs through ``api``; node zones are read once each (they do not change)."""

    api: Api
    _zones: dict[tuple[str, str], str | None] = field(default_factory=dict)

    async def get(self, path: str) -> dict[str, Any] | None:
        """The object at ``path``; None on 404; :class:`Stop` on any other failure."""
        try:
            return await self.api.call("GET", path)
        except ApiError as err:
            if err.status == 404:
                return None
            raise Stop(f"GET {path} failed: {err}") from err

    async def zone(self, node: str, key: str) -> str | None:
        """The ``key`` label of ``node`` (None: no node, or no label)."""
        if not node:
            return None
        if (node, key) not in self._zones:
            found = await self.get(f"/api/v1/nodes/{node}")
            labels = meta(found).get("labels") if found is not None else None
            zone = labels.get(key) if isinstance(labels, dict) else None
            self._zones[(node, key)] = zone if isinstance(zone, str) else None
        return self._zones[(node, key)]

    async def whole(self, step: Step) -> str:
        """What keeps the set from being whole ("" when nothing does)."""
        sts = await self.get(set_path(step))
        if sts is None:
            raise Stop(f"{step.kind} {step.namespace}/{step.statefulset} is gone")
        info = set_info(sts, step.group)
        if differs := changed(step, info):
            raise Stop(f"{differs}; run rebalance again for a fresh plan")
        state = states.set_state(sts)
        if state.stale:
            return state.stale  # the checks below would read a status of an older spec
        if state.updating:
            return "a rolling update is " + ("paused part-way" if state.paused else "under way")
        pods = await self.set_pods(step)
        members = Live(replicas=info.replicas, start=step.start, reserved=info.reserved)
        problems = [
            why
            for ordinal in members
            if (why := states.unready(f"{step.statefulset}-{ordinal}", pods.get(ordinal)))
        ]
        if problems:
            return ", ".join(problems)
        if short := unavailable(state, replicas=info.replicas):
            return short
        for ordinal in step.company:  # the plan's promise: someone else keeps the zone held
            holder = await self.get(
                f"/api/v1/namespaces/{step.namespace}/pods/{step.statefulset}-{ordinal}"
            )
            node = spec(holder).get("nodeName") if member(step, holder) else None
            if node and await self.zone(str(node), step.topology_key) == step.source:
                return ""
        if step.company:
            raise Stop(
                f"moving {step.pod} would leave {step.source} without a pod: ordinal(s) "
                f"{', '.join(map(str, step.company))} are no longer there; run rebalance again"
            )
        return ""

    async def settling(self, step: Step) -> str:
        """What keeps the set from counting every replica available ("" once it does): a moved
        pod is Ready before it is available (:func:`unavailable`)."""
        sts = await self.get(set_path(step))
        if sts is None:
            raise Stop(f"{step.kind} {step.namespace}/{step.statefulset} is gone")
        return unavailable(states.set_state(sts), replicas=set_info(sts, step.group).replicas)

    async def set_pods(self, step: Step) -> dict[int, states.PodState]:
        """The set's pods by ordinal, from one namespaced list of StatefulSet pods (both
        controllers label their pods ``statefulset.kubernetes.io/pod-name``)."""
        body = await self.api.call(
            "GET",
            f"/api/v1/namespaces/{step.namespace}/pods",
            params={"labelSelector": STATEFULSET_POD_LABEL},
        )
        pods: dict[int, states.PodState] = {}
        for item in body.get("items") or []:
            fields = meta(item)
            ordinal = ordinal_of(fields, objects.str_map(fields, "labels", path="metadata"))
            if member(step, item) and ordinal is not None:
                pods[ordinal] = states.pod_state(item)
        return pods

    async def dropped(self, step: Step) -> str:
        """Why the set will never bring the step's pod back: deleted, or changed so that the
        ordinal is no longer a member ("" while it still is one)."""
        sts = await self.get(set_path(step))
        if sts is None:
            return f"{step.kind} {step.namespace}/{step.statefulset} was deleted"
        info = set_info(sts, step.group)
        differs = changed(step, info)
        start = step.start + info.start - step.spec_start
        members = Live(replicas=info.replicas, start=start, reserved=info.reserved)
        if step.set_uid and info.uid and info.uid != step.set_uid:
            return differs
        return differs if step.ordinal not in members else ""

    async def seen(self, step: Step, pod: dict[str, Any] | None) -> str | None:
        """What the pod looks like now, or None once it has converged. Raises :class:`Stop`
        when it was re-created somewhere it will never leave."""
        if pod is None:
            if why := await self.dropped(step):
                raise Stop(
                    f"{why} while {step.pod} was away, so nothing re-creates it; run rebalance "
                    "again for a fresh plan"
                )
            wait = " (it waits for the old claims to go)" if step.claims else ""
            return f"no pod {step.pod} yet: the StatefulSet controller has not re-created it{wait}"
        fields = meta(pod)
        if fields.get("uid") == step.uid:
            return "the evicted pod is still there" + (
                " (terminating)" if fields.get("deletionTimestamp") else ""
            )
        if not member(step, pod):
            raise Stop(
                f"the new {step.pod} is not controlled by {step.kind} {step.namespace}/"
                f"{step.statefulset} (its owner: {_owner(pod)}); run rebalance again"
            )
        placed = (fields.get("annotations") or {}).get(ZONE)
        if placed and placed != step.target:
            # The webhook pinned it elsewhere (a volume still claiming it?): it will never move.
            raise Stop(
                f"stszone placed the new {step.pod} in {placed}, not {step.target} (see its "
                f"admission warning: a volume still bound or pre-bound to its claim?)"
            )
        node = str(spec(pod).get("nodeName") or "")
        if not node:
            return f"the new pod is Pending: {_scheduling(pod) or 'not scheduled yet'}"
        zone = await self.zone(node, step.topology_key)
        if zone != step.target:
            raise Stop(
                f"{step.pod} was re-created on {node} in {zone or 'a node with no zone label'}, "
                f"not {step.target}: stszone did not place it (is its webhook registered for "
                f"namespace {step.namespace}, and the namespace labelled stszone.io/enabled=true?)"
            )
        if not states.pod_state(pod).ready:
            return f"the new pod runs on {node} in {zone} but is not Ready"
        return None


def _owner(pod: dict[str, Any]) -> str:
    found = workload_owner(meta(pod))
    if found is None:
        return "none"
    group, name, uid = found
    return f"{group or 'apps'} StatefulSet {name}" + (f" (uid {uid})" if uid else "")


def meta(obj: dict[str, Any] | None) -> dict[str, Any]:
    """``metadata`` of a raw object (``{}`` when missing or no object)."""
    meta = obj.get("metadata") if obj is not None else None
    return meta if isinstance(meta, dict) else {}


def spec(obj: dict[str, Any] | None) -> dict[str, Any]:
    """``spec`` of a raw object (``{}`` when missing or no object)."""
    spec = obj.get("spec") if obj is not None else None
    return spec if isinstance(spec, dict) else {}


def _scheduling(pod: dict[str, Any]) -> str:
    """The scheduler's reason a pod is Pending (its PodScheduled condition), if any."""
    status = pod.get("status")
    for condition in (status.get("conditions") if isinstance(status, dict) else None) or []:
        if isinstance(condition, dict) and condition.get("type") == "PodScheduled":
            return str(condition.get("message") or condition.get("reason") or "")
    return ""
