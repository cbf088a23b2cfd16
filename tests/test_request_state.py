"""A request changes nothing but its answer: the view is only read on the admission path.

Every table, index and counter of the Store is the same after a batch of requests as before
it, dry runs and real ones, mutations, validations, scale-downs and denials alike; and the same
request answered twice, in any order with others, is answered the same way.
"""

from __future__ import annotations

import copy
from typing import Any

from tests import builders as b
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.model.index import Index
from webhook.model.labels import NodeLabels
from webhook.model.reach import Reaches
from webhook.model.store import Store
from webhook.rules.admission import Endpoint
from webhook.wire import review

ZONES = {"stszone.io/zones": "zone-a,zone-b,zone-c"}


def state(store: Store) -> dict[str, Any]:
    """Everything the Store holds, as plain values (its indexes by their groups)."""
    held: dict[str, Any] = {}
    for name, value in vars(store).items():
        if isinstance(value, (Index, NodeLabels, Reaches)):
            value = {k: v for k, v in vars(value).items() if not callable(v)}
        elif name == "_indexes":
            continue  # table -> its indexes: each index is compared as an attribute above
        held[name] = copy.deepcopy(value)
    return held


def cluster() -> Store:
    """The recorded cluster: db's ordinals, claims bound to zoned volumes, three zones."""
    return store_from_objects(b.recorded_lists())


def requests() -> list[tuple[Endpoint, dict[str, Any]]]:
    """Reviews of every kind the rules read, each as a real and as a dry-run request."""
    bodies: list[tuple[Endpoint, dict[str, Any]]] = [
        ("mutate", b.fixture_review("003-Pod-CREATE")),
        ("validate", b.fixture_review("004-Pod-CREATE")),
        ("mutate", b.fixture_review("001-PersistentVolumeClaim-CREATE")),
        ("validate", b.fixture_review("013-Scale-UPDATE")),
        ("validate", b.fixture_review("023-StatefulSet-UPDATE")),
        ("mutate", b.review(b.statefulset("fresh"))),
        ("validate", b.review(b.statefulset("fresh", annotations=ZONES))),
        ("mutate", b.review(b.sts_pod("db", 7, node="no-such-node"))),
        ("validate", b.review(b.scale("db", replicas=1), operation="UPDATE", old=b.scale("db"))),
    ]
    dry = [(endpoint, copy.deepcopy(body)) for endpoint, body in bodies]
    for _, body in dry:
        body["request"]["dryRun"] = True
    return bodies + dry


def test_answering_writes_nothing_to_the_view() -> None:
    store = cluster()
    before = state(store)
    answers = []
    for endpoint, body in requests():
        answers.append(
            review.answer(endpoint, review.from_dict(body), store=store, defaults=Defaults())
        )
        assert state(store) == before, f"{endpoint} of {body['request']['kind']} changed the view"
    assert any(a.patch for a in answers) and any(not a.allowed for a in answers)


def test_an_answer_depends_on_the_request_and_the_view_alone() -> None:
    """The same requests in reverse order, on a fresh copy of the view, get the same answers."""
    forward = [
        review.response(parsed, review.answer(e, parsed, store=cluster(), defaults=Defaults()))
        for e, parsed in ((e, review.from_dict(body)) for e, body in requests())
    ]
    store = cluster()
    backward = [
        review.response(parsed, review.answer(e, parsed, store=store, defaults=Defaults()))
        for e, parsed in reversed([(e, review.from_dict(body)) for e, body in requests()])
    ]
    assert [r["response"] | {"uid": ""} for r in forward] == [
        r["response"] | {"uid": ""} for r in reversed(backward)
    ]
