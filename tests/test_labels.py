"""The view's nodes by label, kept as nodes come, change and go, equal a scan of the nodes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.model.records import NodeInfo
from webhook.model.store import Store

names = st.sampled_from([f"n{i}" for i in range(6)])
labels = st.dictionaries(
    st.sampled_from(["topology.kubernetes.io/zone", "kubernetes.io/hostname", "disk"]),
    st.sampled_from(["a", "b", "c"]),
    max_size=3,
)
#: A change of the nodes table: put a node with these labels, delete it, or replace the table.
changes = st.lists(
    st.tuples(st.sampled_from(["put", "delete", "list"]), names, labels), max_size=25
)


def scanned(store: Store, key: str) -> dict[str, tuple[str, ...]]:
    """Value -> nodes, from a scan of every node (the reference)."""
    found: dict[str, list[str]] = {}
    for node in store.nodes.values():
        if key in node.labels:
            found.setdefault(node.labels[key], []).append(node.name)
    return {value: tuple(sorted(nodes)) for value, nodes in found.items()}


@settings(max_examples=300)
@given(steps=changes)
def test_the_label_index_follows_every_change(steps: list[tuple[str, str, dict[str, str]]]) -> None:
    store = Store()
    for action, name, node_labels in steps:
        if action == "put":
            store.put("nodes", NodeInfo(name=name, labels=node_labels))
        elif action == "delete":
            store.delete("nodes", name)
        else:  # a re-list: the table is replaced as a whole
            others = [n for n in store.nodes.values() if n.name != name]
            store.replace("nodes", [*others, NodeInfo(name=name, labels=node_labels)])
        for key in ("topology.kubernetes.io/zone", "kubernetes.io/hostname", "disk"):
            want = scanned(store, key)
            assert store.discovered_zones(key) == tuple(sorted(want))
            for value in ("a", "b", "c"):
                assert store.nodes_with_label(key, value) == want.get(value, ())
