"""Two replicas of stszone whose live views differ only in how far their watches have got.

Each view is a live :class:`Store` fed the same watch events, through the extractors the
reflectors use; a lagging replica has seen all but the last ``k`` of them. A request goes to
``/mutate`` on one replica and, with its JSON Patch applied as the API server applies it, to
``/validate`` on another.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any

import jsonpatch

from tests import builders as b
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Defaults
from webhook.model.records import PodInfo
from webhook.model.store import Store
from webhook.model.tables import EXTRACTORS, TABLES, table_of
from webhook.wire import review
from webhook.wire.review import Answer

JSON = dict[str, Any]
Event = tuple[str, JSON]
DEFAULTS = Defaults()


def view(base: Iterable[JSON], events: Sequence[Event]) -> Store:
    """A synced live view of ``base`` (its lists) that has applied ``events`` in order."""
    listed = store_from_objects(list(base), namespaces_listed=True)
    store = Store(live=True)
    for table in TABLES:
        store.replace(table, listed.table(table).values())
    for kind, obj in events:
        into = table_of(obj)
        assert into is not None, obj.get("kind")
        record = EXTRACTORS[into](obj)
        if isinstance(record, PodInfo) and record.owner is None:
            continue
        if kind == "DELETED":
            store.delete(into, record.key)
        else:
            store.put(into, record)
    return store


def send(endpoint: str, body: JSON, store: Store) -> Answer:
    """One replica's answer to one review."""
    request = review.from_dict(body)
    return review.answer(
        "mutate" if endpoint == "mutate" else "validate", request, store=store, defaults=DEFAULTS
    )


def admitted(body: JSON, *, mutating: Store, validating: Store) -> tuple[Answer, Answer | None]:
    """``/mutate`` on one replica, then ``/validate`` of the patched object on another."""
    mutated = send("mutate", body, mutating)
    if not mutated.allowed:
        return mutated, None
    patched = copy.deepcopy(body)
    request = patched["request"]
    if mutated.patch:
        request["object"] = jsonpatch.apply_patch(request["object"], mutated.patch)
    return mutated, send("validate", patched, validating)


def namespace(name: str = "ns") -> JSON:
    """An opted-in Namespace."""
    return {
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": {"name": name, "labels": {"stszone.io/enabled": "true"}},
    }


def three_zones() -> list[JSON]:
    """Namespace ns, opted in, and one node in each of zones a, b, c."""
    return [namespace(), *(b.node(f"n{z}", z) for z in ("a", "b", "c"))]
