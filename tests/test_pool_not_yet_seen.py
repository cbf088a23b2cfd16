"""A broker pod whose KafkaNodePool has not reached a live view yet is refused for retry.

A StatefulSet pod whose set the synced view has not seen is refused (``StatefulSetNotYetSeen``)
rather than placed by guesses; a broker pod is recognised by the operator's labels
(``strimzi.io/cluster``, ``strimzi.io/pool-name``), and its pool can lag the same way. The
StrimziPodSet controller creates a refused pod again, so it gets the same answer -- but only
when the view shows that its Kafka cluster uses KafkaNodePools (another pool of that cluster is
there): a Kafka without node pools has its brokers in a "virtual" pool named ``kafka`` that
exists only in the operator's memory, and a cluster without the Strimzi CRDs has no pool at all;
neither is ever waited for.

The pods are the recorded ones (``tests/fixtures/strimzi``): ``my-cluster-broker-0`` as the
StrimziPodSet controller created it, under the operator's account.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests import builders as b
from tests import poolsim as sim
from webhook.model.extract import node_info
from webhook.model.nodepools import nodepool_info
from webhook.model.store import Store
from webhook.model.tables import TABLES
from webhook.wire import review

JSON = dict[str, Any]


def view(*pools: JSON, live: bool = True) -> Store:
    """A view that has listed every resource: nodes in zone-a, b, c and ``pools``."""
    store = Store(live=live)
    for table in TABLES:
        store.replace(table, [])
    for zone in sim.ZONES:
        store.put("nodes", node_info(b.node(f"n-{zone}", zone)))
    for pool in pools:
        store.put("nodepools", nodepool_info(pool))
    return store


def broker_review(*, cluster: str = "my-cluster", pool: str = "broker") -> JSON:
    """The recorded create of pod ``my-cluster-broker-0``, renamed to ``<cluster>-<pool>-0``."""
    body = copy.deepcopy(sim.recorded("023-all-Pod-CREATE-my-cluster-broker-0"))
    pod = body["request"]["object"]
    name = f"{cluster}-{pool}-0"
    pod["metadata"]["name"] = body["request"]["name"] = name
    pod["metadata"]["labels"].update(
        {
            "strimzi.io/cluster": cluster,
            "strimzi.io/pool-name": pool,
            "strimzi.io/pod-name": name,
            "strimzi.io/controller-name": f"{cluster}-{pool}",
        }
    )
    return body


def mutate(body: JSON, store: Store) -> review.Answer:
    return review.answer("mutate", review.from_dict(body), store=store, defaults=sim.DEFAULTS)


#: The cluster's other pool, which the view has seen.
CONTROLLER = sim.pool_object("controller", replicas=3, node_ids=[6, 7, 8])


def test_a_broker_whose_pool_the_view_has_not_seen_is_refused_for_retry() -> None:
    """Pool ``broker`` of my-cluster is not in the view, its pool ``controller`` is: the pod is
    refused, saying which pool and who creates the pod again."""
    answer = mutate(broker_review(), view(CONTROLLER))
    assert (answer.allowed, answer.reason) == (False, "StatefulSetNotYetSeen")
    assert answer.message == (
        "KafkaNodePool kafka/broker of Kafka cluster my-cluster has not reached stszone's view "
        "yet (its watch event is usually milliseconds behind its creation); retry in a moment "
        "(the StrimziPodSet controller of the Strimzi cluster operator creates pod "
        "my-cluster-broker-0 again)"
    )


def test_once_the_pool_is_seen_its_broker_is_placed() -> None:
    """The same pod, once the view holds pool ``broker``, is pinned to a zone."""
    broker = sim.pool_object("broker", replicas=6, node_ids=[0, 1, 2, 3, 4, 5])
    answer = mutate(broker_review(), view(CONTROLLER, broker))
    assert answer.allowed, answer.message
    assert answer.edited["metadata"]["annotations"]["stszone.io/zone"] == "zone-a"


@pytest.mark.parametrize(
    ("store", "body"),
    [
        pytest.param(view(), broker_review(pool="kafka"), id="Kafka without node pools"),
        pytest.param(view(), broker_review(), id="no KafkaNodePool CRD"),
        pytest.param(
            view(sim.pool_object("controller", replicas=3, cluster="other")),
            broker_review(pool="kafka"),
            id="only another cluster's pools",
        ),
        pytest.param(view(CONTROLLER, live=False), broker_review(), id="offline view"),
    ],
)
def test_a_broker_of_no_pool_the_view_could_see_is_let_through(store: Store, body: JSON) -> None:
    """No pool of its Kafka cluster is in the view -- its brokers are in the operator's
    virtual pool ``kafka``, or the cluster serves no KafkaNodePool at all -- or the view is a
    saved file, complete by definition: the pod is let through (nothing to place it by),
    never refused for a pool that will not come."""
    answer = mutate(body, store)
    assert answer.allowed, answer.message
    assert answer.patch == []
