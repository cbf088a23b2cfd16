"""What the live view decodes and how it swaps a list in: as the stdlib reads, all at once.

``codec.loads`` reads lists and watch events with orjson but must read every input exactly as
``json.loads`` does (orjson refuses some and reads integers beyond 64 bits as floats). A list
is folded into a staging table, invisible to readers until it is swapped in whole.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from webhook.model.records import ClaimInfo, PodInfo
from webhook.model.store import Store
from webhook.wire import codec


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a": 1, "b": [true, null, "x"]}',
        b'"\\ud800"',  # a lone surrogate escape: orjson refuses it
        b'"\xed\xa0\x80"',  # ... and its raw UTF-8 bytes
        b'{"replicas": 123456789012345678901234567890}',  # beyond 64 bits: orjson gives a float
        b"[-9223372036854775809]",  # just below int64: orjson gives a float
        b"[18446744073709551615, 9223372036854775807]",  # within orjson's range
        b'{"uid": "1234567890123456789012"}',  # 19+ digits in a string: still read right
        b"[1e400]",
        b'{"a": 1, "a": 2}',
        b"[1.5, -0, 0.1]",
    ],
)
def test_decoded_exactly_as_the_stdlib_reads_it(raw: bytes) -> None:
    """Same values, same types (an int stays an int), for every input the stdlib accepts."""
    expected, got = json.loads(raw), codec.loads(raw)
    assert repr(got) == repr(expected)
    assert type(got) is type(expected)


def test_nan_as_the_stdlib_reads_it() -> None:
    """``NaN`` is not JSON, but the stdlib reads it; so does the live view."""
    assert math.isnan(codec.loads(b"[NaN]")[0])


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b"\xff", UnicodeDecodeError),
        (b"[" * 5000 + b"]" * 5000, RecursionError),
        (b"{", ValueError),
    ],
)
def test_refused_as_the_stdlib_refuses_it(raw: bytes, error: type[Exception]) -> None:
    """What the stdlib refuses raises what it raised (a broken stream, for the reflector)."""
    with pytest.raises(error):
        json.loads(raw)
    with pytest.raises(error):
        codec.loads(raw)


def pods(*names: str, owner: str = "db") -> list[Any]:
    return [PodInfo("ns", name, owner, int(name.rpartition("-")[2]), "node-1") for name in names]


def test_a_staged_list_is_invisible_until_swapped() -> None:
    """Pages folded into the staging table change nothing readers see; the swap shows all."""
    store = Store()
    store.replace("pods", pods("db-0"))
    staged = store.staging("pods")
    staged.add(pods("db-1"))
    staged.add(pods("db-2", "db-1"))  # a key seen again: the last one wins
    assert set(store.pods) == {("ns", "db-0")}
    assert store.set_pods("ns", "db").ordinals == {0}
    store.swap(staged)
    assert set(store.pods) == {("ns", "db-1"), ("ns", "db-2")}
    assert store.set_pods("ns", "db").ordinals == {1, 2}
    assert "pods" in store.loaded


def test_staged_indexes_follow_replaced_records() -> None:
    """A record replaced within one list leaves no trace of its old self in the indexes."""
    store = Store()
    staged = store.staging("claims")
    staged.add([ClaimInfo("ns", "data-db-0", "pv-old")])
    staged.add([ClaimInfo("ns", "data-db-0", "pv-new"), ClaimInfo("ns", "data-db-1", "pv-1")])
    store.swap(staged)
    assert store.known_ordinals("ns", "db", templates=("data",)) == {0, 1}
    assert store.claims[("ns", "data-db-0")].volume == "pv-new"
