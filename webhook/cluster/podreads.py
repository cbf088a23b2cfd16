"""What the rebalance executor reads before and after each step, from the API server (never
from the plan): whether the set is whole, where a pod is, what a re-created pod looks like."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from webhook.cluster.api import Api, ApiError
from webhook.cluster.moves import Stop
from webhook.cluster.resources import STATEFULSET_POD_LABEL
from webhook.model import objects
from webhook.model import state as states
from webhook.model.annotations import ZONE
from webhook.model.owners import ordinal_of, statefulset_owner
from webhook.rules.rebalance import Step


def pod_path(step: Step, suffix: str = "") -> str:
    """The API path of the step's pod (and of a subresource of it)."""
    return f"/api/v1/namespaces/{step.namespace}/pods/{step.pod}{suffix}"


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
        sts = await self.get(
            f"/apis/apps/v1/namespaces/{step.namespace}/statefulsets/{step.statefulset}"
        )
        if sts is None:
            raise Stop(f"StatefulSet {step.namespace}/{step.statefulset} is gone")
        info = states.set_state(sts)
        if info.replicas != step.replicas:
            raise Stop(
                f"{step.namespace}/{step.statefulset} now has {info.replicas} replicas, not "
                f"{step.replicas} as planned; run rebalance again for a fresh plan"
            )
        if info.updating:
            return "a rolling update is under way"
        pods = await self.set_pods(step)
        ordinals = spec(sts).get("ordinals")
        start = int((ordinals.get("start") if isinstance(ordinals, dict) else 0) or 0)
        problems = [
            why
            for ordinal in range(start, start + info.replicas)
            if (why := states.unready(f"{step.statefulset}-{ordinal}", pods.get(ordinal)))
        ]
        if problems:
            return ", ".join(problems)
        for ordinal in step.company:  # the plan's promise: someone else keeps the zone held
            holder = await self.get(
                f"/api/v1/namespaces/{step.namespace}/pods/{step.statefulset}-{ordinal}"
            )
            node = spec(holder).get("nodeName") if holder is not None else None
            if node and await self.zone(str(node), step.topology_key) == step.source:
                return ""
        if step.company:
            raise Stop(
                f"moving {step.pod} would leave {step.source} without a pod: ordinal(s) "
                f"{', '.join(map(str, step.company))} are no longer there; run rebalance again"
            )
        return ""

    async def set_pods(self, step: Step) -> dict[int, states.PodState]:
        """The set's pods by ordinal, from one namespaced list of StatefulSet pods."""
        body = await self.api.call(
            "GET",
            f"/api/v1/namespaces/{step.namespace}/pods",
            params={"labelSelector": STATEFULSET_POD_LABEL},
        )
        pods: dict[int, states.PodState] = {}
        for item in body.get("items") or []:
            fields = meta(item)
            ordinal = ordinal_of(fields, objects.str_map(fields, "labels", path="metadata"))
            if statefulset_owner(fields) == step.statefulset and ordinal is not None:
                pods[ordinal] = states.pod_state(item)
        return pods

    async def seen(self, step: Step, pod: dict[str, Any] | None) -> str | None:
        """What the pod looks like now, or None once it has converged. Raises :class:`Stop`
        when it was re-created somewhere it will never leave."""
        if pod is None:
            wait = " (it waits for the old claims to go)" if step.claims else ""
            return f"no pod {step.pod} yet: the StatefulSet controller has not re-created it{wait}"
        fields = meta(pod)
        if fields.get("uid") == step.uid:
            return "the evicted pod is still there" + (
                " (terminating)" if fields.get("deletionTimestamp") else ""
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


def meta(obj: dict[str, Any]) -> dict[str, Any]:
    """``metadata`` of a raw object (``{}`` when missing)."""
    meta = obj.get("metadata")
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
