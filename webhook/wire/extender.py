"""kube-scheduler extender wire format: ``ExtenderArgs`` in, filter and prioritize answers out.

``k8s.io/kube-scheduler/extender/v1``'s Go structs carry no json tags, so the field names are the
capitalised Go names (``Pod``, ``Nodes``, ``NodeNames``, ``FailedNodes``,
``FailedAndUnresolvableNodes``, ``Error``, ``Host``, ``Score``); the embedded Pod and NodeList
keep their lower-case API names. ``nodeCacheCapable: false`` sends full ``Nodes``, ``true`` only
``NodeNames``: a name is looked up in the cluster view for its labels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypedDict

from webhook.errors import BadObject, BadRequest
from webhook.model import objects
from webhook.model.objects import JSON
from webhook.model.store import Store
from webhook.rules.extender import Candidate, Filtered
from webhook.wire import codec

Verb = Literal["filter", "prioritize"]


class FilterResultWire(TypedDict):
    """``ExtenderFilterResult``; exactly one of ``Nodes`` / ``NodeNames`` is set."""

    Nodes: JSON | None
    NodeNames: list[str] | None
    FailedNodes: dict[str, str]
    FailedAndUnresolvableNodes: dict[str, str]
    Error: str


class HostPriorityWire(TypedDict):
    """One ``HostPriority`` of the ``HostPriorityList`` prioritize answers."""

    Host: str
    Score: int


@dataclass(frozen=True, slots=True)
class Args:
    """A parsed ``ExtenderArgs``."""

    pod: JSON
    candidates: tuple[Candidate, ...]
    #: nodeCacheCapable: false: the request's NodeList, whose items are echoed back.
    node_list: JSON | None


def _candidate(node: JSON) -> Candidate:
    meta = objects.mapping(node, "metadata")
    name = objects.string(meta, "name", path="metadata")
    if not name:
        raise BadObject("a node in Nodes.items has no metadata.name")
    conditions = objects.dicts(objects.mapping(node, "status"), "conditions", path="status")
    true = frozenset(str(c.get("type")) for c in conditions if c.get("status") == "True")
    labels = objects.str_map(meta, "labels", path="metadata")
    return Candidate(name=name, labels=labels, true_conditions=true)


def parse_args(body: bytes | str, *, store: Store) -> Args:
    """Parse an ``ExtenderArgs`` body; raise :class:`BadRequest` saying what is wrong."""
    data = codec.request_body(body, expected="kube-scheduler's ExtenderArgs")
    if not isinstance(data, dict):
        raise BadRequest("request body must be a JSON object (kube-scheduler's ExtenderArgs)")
    lower = sorted(k for k in ("pod", "nodes", "nodenames") if k in data)
    if lower and "Pod" not in data:
        # Go decodes case-insensitively, but kube-scheduler sends the Go names; say so.
        raise BadRequest(
            "ExtenderArgs field names are capitalised as kube-scheduler sends them (Pod, Nodes, "
            f"NodeNames), got {', '.join(lower)}"
        )
    pod, nodes, names = data.get("Pod"), data.get("Nodes"), data.get("NodeNames")
    if not isinstance(pod, dict):
        raise BadRequest("ExtenderArgs.Pod is missing or not an object")
    if (nodes is None) == (names is None):
        raise BadRequest(
            "ExtenderArgs needs exactly one of Nodes (nodeCacheCapable: false) or NodeNames "
            "(nodeCacheCapable: true)"
        )
    try:
        if names is not None:
            if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
                raise BadRequest("ExtenderArgs.NodeNames must be a list of node names")
            return Args(
                pod=pod, candidates=tuple(_known(n, store=store) for n in names), node_list=None
            )
        if not isinstance(nodes, dict):
            raise BadRequest("ExtenderArgs.Nodes must be a NodeList object")
        items = objects.dicts(nodes, "items", path="Nodes")
        return Args(pod=pod, candidates=tuple(map(_candidate, items)), node_list=nodes)
    except BadObject as err:
        raise BadRequest(f"malformed ExtenderArgs: {err.message}") from None


def _known(name: str, *, store: Store) -> Candidate:
    info = store.nodes.get(name)
    if info is None:
        return Candidate(name=name, labels={}, true_conditions=frozenset(), known=False)
    return Candidate(name=name, labels=info.labels, true_conditions=info.true_conditions)


def filter_result(args: Args, filtered: Filtered) -> FilterResultWire:
    """The ``ExtenderFilterResult`` of ``filtered``, in the shape asked: with ``Nodes`` asked,
    the request's Node objects that pass, unchanged (kube-scheduler schedules onto them);
    with ``NodeNames``, their names. Every failed node is unresolvable: preemption skips it."""
    nodes: JSON | None = None
    if args.node_list is not None:
        passing = set(filtered.passed)
        items = objects.dicts(args.node_list, "items")
        nodes = {**args.node_list, "items": [i for i in items if i["metadata"]["name"] in passing]}
    return {
        "Nodes": nodes,
        "NodeNames": list(filtered.passed) if nodes is None else None,
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": dict(filtered.failed),
        "Error": filtered.error,
    }


def refusal(message: str) -> bytes:
    """The ``ExtenderFilterResult`` refusing a request in ``Error``, which kube-scheduler
    reports on the pod (it reads no node of an answer that has one)."""
    return dumps(
        {
            "Nodes": None,
            "NodeNames": None,
            "FailedNodes": {},
            "FailedAndUnresolvableNodes": {},
            "Error": message,
        }
    )


def host_priorities(scores: list[tuple[str, int]]) -> list[HostPriorityWire]:
    """The ``HostPriorityList`` of (node, score) pairs."""
    return [{"Host": host, "Score": score} for host, score in scores]


def dumps(body: FilterResultWire | list[HostPriorityWire]) -> bytes:
    """Compact JSON bytes of an answer."""
    return codec.dumps(body)
