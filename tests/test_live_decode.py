"""What the live view decodes and how it swaps a list in: as the stdlib reads, all at once.

``codec.loads`` reads lists and watch events with msgspec but must read every input exactly as
``json.loads`` does: what msgspec accepts it must read as the stdlib does, and what it refuses
(some of which the stdlib reads) must reach the stdlib. A list is folded into a staging table,
invisible to readers until it is swapped in whole.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.model.records import ClaimInfo, PodInfo
from webhook.model.store import Store
from webhook.wire import codec


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a": 1, "b": [true, null, "x"]}',
        b'"\\ud800"',  # a lone surrogate escape: msgspec refuses it
        b'{"a": ["\\udc00"]}',  # ... wherever it is
        b'"\xed\xa0\x80"',  # ... and its raw UTF-8 bytes
        b'{"replicas": 123456789012345678901234567890}',  # beyond 64 bits: an int
        b"[-9223372036854775809, 18446744073709551616]",  # just beyond int64 and uint64
        b"[18446744073709551615, 9223372036854775807]",
        b"[" + b"9" * 4300 + b"]",  # the most digits the interpreter reads
        b'{"uid": "1234567890123456789012"}',
        b"[1e400, -1e400]",  # beyond a float: msgspec refuses, the stdlib reads infinities
        b"[Infinity, -Infinity]",
        b'{"a": 1, "b": 2, "a": 3}',  # the last one wins, in the first one's place
        b"[1.5, -0, -0.0, 0.1, 1E2, 1e-400, 5e-324, 123456789012345678901234567890.5]",
        b'\xef\xbb\xbf{"a": 1}',  # a byte order mark: msgspec refuses it
        '{"a": "\u00e9"}'.encode("utf-16"),  # the stdlib reads UTF-16 and UTF-32
        '{"a": "\u00e9"}'.encode("utf-32-le"),
        b' \t\r\n{"a": "\\u2028\xe2\x80\xa8\\/"} \n',
    ],
)
def test_decoded_exactly_as_the_stdlib_reads_it(raw: bytes) -> None:
    """Same values, same types (an int stays an int), for every input the stdlib accepts."""
    expected, got = json.loads(raw), codec.loads(raw)
    assert repr(got) == repr(expected)
    assert type(got) is type(expected)


#: Pieces of JSON text, and of text that is almost JSON, for documents of any shape.
PIECES = st.sampled_from(
    [
        *'{}[],:"\\ \t\n\r\x0b\x0c',
        *("true", "false", "null", "NaN", "Infinity", "-", "+", ".", "e", "a"),
        *("0", "1", "-0", "1e400", "12345678901234567890", "1.5e-3"),
        *("\\u", "\\ud800", "\\udc00", "\\ud83d\\ude00", "\\n", "\\/"),
        *("\x00", "\x7f", "\u00e9", "\u2028", "\ufeff"),
    ]
)
NUMBERS = st.from_regex(r"\A-?(0|[1-9][0-9]{0,30})(\.[0-9]{1,30})?([eE][-+]?[0-9]{1,3})?\Z")
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=20,
)


def decoded(raw: bytes) -> tuple[str, Any]:
    """``json.loads``'s value with its types (``repr`` tells 1 from 1.0), or what it raised."""
    try:
        return "read", repr(json.loads(raw))
    except (ValueError, RecursionError) as err:
        return "refused", type(err)


def codec_decoded(raw: bytes) -> tuple[str, Any]:
    try:
        return "read", repr(codec.loads(raw))
    except (ValueError, RecursionError) as err:
        return "refused", type(err)


@given(
    raw=st.one_of(
        st.lists(PIECES, max_size=30).map(lambda p: "".join(p).encode("utf-8", "surrogatepass")),
        NUMBERS.map(str.encode),
        st.binary(max_size=40),
        VALUES.map(lambda v: json.dumps(v).encode()),
        VALUES.map(lambda v: json.dumps(v, ensure_ascii=False).encode("utf-8", "surrogatepass")),
    )
)
def test_any_bytes_are_read_or_refused_as_the_stdlib_does(raw: bytes) -> None:
    """JSON of every kind, almost-JSON and noise: the same value or the same refusal."""
    assert codec_decoded(raw) == decoded(raw)


def test_nan_as_the_stdlib_reads_it() -> None:
    """``NaN`` is not JSON, but the stdlib reads it; so does the live view."""
    assert math.isnan(codec.loads(b"[NaN]")[0])


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b"\xff", UnicodeDecodeError),
        (b"[" * 5000 + b"]" * 5000, RecursionError),
        (b"{", ValueError),
        (b"[" + b"9" * 4301 + b"]", ValueError),  # past the interpreter's digits
        (b"\x0c{}", ValueError),  # a form feed is no JSON whitespace
        (b'{"a": 1,}', ValueError),
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
