"""The Store's secondary indexes against a plain model: group -> {primary key: record}.

A group of one record is held bare (no dict of one), so every path between one and several
members -- a second record joining, the first leaving, a record replaced under its own key --
is exercised here by random sequences of adds and removes.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from webhook.model.index import Index
from webhook.model.records import VolumeInfo

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
