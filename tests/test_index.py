"""The Store's secondary indexes against a plain model: group -> {primary key: record}.

A group of one record is held bare (no dict of one), so every path between one and several
members -- a second record joining, the first leaving, a record replaced under its own key --
is exercised here by random sequences of adds and removes.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from webhook.model.index import Index
from webhook.model.records import PodInfo, VolumeInfo
from webhook.model.setpods import SetPods
from webhook.model.store import Store

CLAIMS = [("ns", "data-db-0"), ("ns", "data-db-1"), ("other", "data-db-0")]


def _volume(name: str, claim: int, uid: str) -> VolumeInfo:
    return VolumeInfo(name=name, claim=CLAIMS[claim], claim_uid=uid)


_volumes = st.builds(
    _volume,
    name=st.sampled_from(["pv-a", "pv-b", "pv-c"]),
    claim=st.integers(0, len(CLAIMS) - 1),
    uid=st.sampled_from(["", "u1", "u2"]),
)


@given(steps=st.lists(st.tuples(st.booleans(), _volumes), max_size=30))
def test_an_index_groups_as_a_dict_of_dicts_would(steps: list[tuple[bool, VolumeInfo]]) -> None:
    """After any adds and removes (as the Store makes them), every group and summary matches."""
    index: Index[VolumeInfo, frozenset[str]] = Index(
        lambda v: v.claim, summarise=lambda vs: frozenset(f"{v.name}/{v.claim_uid}" for v in vs)
    )
    table: dict[str, VolumeInfo] = {}
    for add, volume in steps:
        old = table.get(volume.name)
        if old is not None:  # the Store removes the record a key held before it adds or deletes
            index.remove(old)
            del table[volume.name]
        if add:
            index.add(volume, key=volume.name)
            table[volume.name] = volume
        for claim in CLAIMS:
            expected = {v.name: v for v in table.values() if v.claim == claim}
            assert dict(index.get(claim)) == expected
            assert index.summary(claim) == frozenset(
                f"{v.name}/{v.claim_uid}" for v in expected.values()
            )


def test_a_record_replaced_under_its_own_key_stays_alone() -> None:
    """Re-adding a group's only record (a MODIFIED event) replaces it, never pairs it."""
    index: Index[VolumeInfo, None] = Index(lambda v: v.claim)
    index.add(_volume("pv-a", 0, "u1"), key="pv-a")
    index.add(_volume("pv-a", 0, "u2"), key="pv-a")
    assert dict(index.get(CLAIMS[0])) == {"pv-a": _volume("pv-a", 0, "u2")}
    index.remove(_volume("pv-b", 0, ""))  # another key of the group: nothing to remove
    assert list(index.get(CLAIMS[0])) == ["pv-a"]


_pods = st.builds(
    PodInfo,
    namespace=st.just("ns"),
    name=st.sampled_from(["db-0", "db-1", "db-2", "web-0", "web-1"]),
    owner=st.sampled_from([None, "db", "web"]),
    ordinal=st.sampled_from([None, 0, 1, 2]),
    node=st.sampled_from(["", "n1"]),
    going=st.sampled_from(["", "Terminating"]),
)
#: One step of the view: put a pod, delete one by name, or re-list (a fresh list folded in
#: chunks, duplicates included, as the reflector folds pages).
_steps = st.one_of(
    st.tuples(st.just("put"), _pods),
    st.tuples(st.just("delete"), _pods),
    st.tuples(st.just("list"), st.lists(st.lists(_pods, max_size=4), max_size=3)),
)


@given(steps=st.lists(_steps, max_size=25))
def test_the_stores_set_summaries_follow_every_change_of_its_pods(
    steps: list[tuple[str, object]],
) -> None:
    """A set's pods by ordinal, as the Store keeps them, equal a summary built afresh from the
    pods table after any puts, deletes (an owner changed under one key included) and re-lists."""
    store = Store(zones=("a", "b"))
    for verb, arg in steps:
        if verb == "put":
            assert isinstance(arg, PodInfo)
            store.put("pods", arg)
        elif verb == "delete":
            assert isinstance(arg, PodInfo)
            store.delete("pods", arg.key)
        else:
            assert isinstance(arg, list)
            staged = store.staging("pods")
            for chunk in arg:
                staged.add(chunk)
            store.swap(staged)
        for owner in ("db", "web"):
            fresh = SetPods.of(p for p in store.pods.values() if p.owner == owner)
            assert store.set_pods("ns", owner) == fresh
            assert store.known_ordinals("ns", owner) == fresh.ordinals
