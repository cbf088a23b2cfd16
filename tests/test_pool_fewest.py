"""The pool's fewest asked for one broker at a time: the answer for each broker is the one
:meth:`Balance.place` gives when that broker alone is created anew, whether the Balance is
asked once per broker (as ``/mutate`` asks it) or shared by every broker of the pool (as the
audit's node removal asks it)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests import poolsim as sim
from webhook.model.extract import claim_info
from webhook.model.nodepools import nodepool_info, poolpod_info
from webhook.rules.homes import pool_slots
from webhook.rules.poolplan import Balance
from webhook.rules.poolzones import choose, id_claims, pool_balance, pool_policy

ZONES = st.lists(st.sampled_from("abcde"), min_size=1, max_size=5)
IDS = st.lists(st.integers(0, 40), max_size=25)
#: A counted ID's zone: listed or not ("z" is never listed), or unknown (None).
KNOWN = st.dictionaries(st.integers(0, 40), st.sampled_from(["a", "b", "c", "z", None]))


@given(zones=ZONES, known=KNOWN, ids=IDS, asked=st.integers(0, 42))
def test_one_broker_is_placed_as_placing_it_with_every_other_would(
    zones: list[str], known: dict[int, str | None], ids: list[int], asked: int
) -> None:
    """Any zone list (repeats too), counted IDs of listed, unlisted and unknown zones, IDs
    to place, and any broker asked about: one the pool counts, one it places, or another."""
    balance = Balance(tuple(zones), known, ids)
    assert balance.fewest(asked) == balance.place({asked: None})[asked]


#: A broker of the generated pools: (has a pod, pod Terminating, pod on a node that is gone,
#: its claim's recorded zone or None for no claim).
BROKER = st.tuples(
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.sampled_from([None, None, "zone-a", "zone-b", "zone-c"]),
)


def _pool_view(brokers: dict[int, tuple[bool, bool, bool, str | None]], extra: int) -> Any:
    view = sim.store()
    node_ids = sorted(brokers)
    pool = sim.pool_object("pool", replicas=len(node_ids) + extra, node_ids=node_ids)
    view.put("nodepools", nodepool_info(pool))
    for node_id, (has_pod, ending, gone, data) in brokers.items():
        if data is not None:
            claim = sim.claim_object("my-cluster", "pool", node_id)
            claim["metadata"].setdefault("annotations", {})["stszone.io/zone"] = data
            view.put("claims", claim_info(claim))
        if has_pod:
            pod = sim.pod_object("my-cluster", "pool", node_id)
            node = f"n-{sim.ZONES[node_id % 3]}-{node_id % 2}"
            pod["spec"]["nodeName"] = "n-gone" if gone else node
            if ending:
                pod["metadata"]["deletionTimestamp"] = "2026-12-01T10:00:00Z"
            view.put("poolpods", poolpod_info(pod))
    return view


@settings(max_examples=150, deadline=None)
@given(brokers=st.dictionaries(st.integers(0, 30), BROKER, max_size=25), extra=st.integers(0, 4))
def test_node_removal_recreates_each_broker_where_mutate_would(
    brokers: dict[int, tuple[bool, bool, bool, str | None]], extra: int
) -> None:
    """Random pools: brokers with and without a pod (running, Terminating, or on a node that
    is gone), with and without data of a zone, and IDs the operator is about to add. Each
    broker's zone in the removal plan is the zone /mutate's call gives its pod: its data's,
    else the pool's fewest worked out afresh for it alone."""
    view = _pool_view(brokers, extra)
    policy = pool_policy("kafka", "pool", store=view)
    assert policy is not None
    plan = pool_slots(policy.pool, store=view)
    assert len(plan.slots) == len(brokers)
    for node_id, slot in zip(sorted(brokers), plan.slots, strict=True):
        pod = view.poolpods.get(("kafka", policy.broker(node_id)))
        claims = id_claims("kafka", node_id, policy=policy, store=view)
        mounted = list(pod.claims) if pod is not None else claims
        choice = choose("kafka", node_id, policy=policy, store=view, claims=mounted)
        if choice.why == "data":
            expected = choice.zone
        else:
            expected = pool_balance("kafka", policy, store=view).place({node_id: None})[node_id]
        assert (slot.recreated, slot.fewest) == (expected, choice.why == "fewest"), node_id
