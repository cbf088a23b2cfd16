"""List pages decoded to what the records read: the same records as a full decode, always.

:func:`webhook.cluster.pages.read_page` steps over every field no extractor reads. These tests
hold it to the full decode (the stdlib's ``json.loads``, which ``codec.loads`` reads exactly
like): on the recorded lists, on pages that do not fit a shape (they must be decoded whole), on
random damage; and they check, by spying on the extractors, that every field an extractor reads
is in its shape -- a new read in ``records.py`` without it fails here, not in production.
"""

from __future__ import annotations

import gc
import json
import typing
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakestate import API_FIXTURES
from webhook.cluster import pages
from webhook.cluster.resources import describe
from webhook.model.annotations import ZONE
from webhook.model.tables import EXTRACTORS, Table

#: Recorded lists (tests/fixtures/api/README.md) and the table each one fills.
LISTS: list[tuple[str, Table]] = [
    ("sts-pods-list.json", "pods"),
    ("pv-list.json", "volumes"),
    ("pvc-list.json", "claims"),
    ("nodes-metadata-list.json", "nodes"),
    ("nodes-list-limit2.json", "nodes"),
    ("statefulsets-list.json", "statefulsets"),
]


def _fixture(name: str) -> bytes:
    return (API_FIXTURES / name).read_bytes()


def _compact(name: str) -> bytes:
    """A recorded list as the API server sends it: compact (the files are indented)."""
    page = json.loads(_fixture(name))
    return json.dumps(page, separators=(",", ":"), ensure_ascii=False).encode()


def _record(table: Table, item: Any) -> object:
    """The record of one item, or what the extractor raised (the reflector skips those)."""
    try:
        return EXTRACTORS[table](item)
    except Exception as err:
        return f"{type(err).__name__}: {err}"


def _stdlib(body: bytes) -> tuple[list[Any], dict[str, Any]]:
    """The reference: the whole page decoded by the stdlib, read as the reflector reads it."""
    page = json.loads(body)
    if not isinstance(page, dict):
        raise ValueError("list response is not a JSON object")
    items, meta = page.get("items") or [], page.get("metadata") or {}
    if not isinstance(items, list) or not isinstance(meta, dict):
        raise ValueError("list response has no items list or no metadata")
    return items, meta


def _outcome(
    read: Callable[[bytes], tuple[list[Any], dict[str, Any]]], body: bytes, table: Table
) -> object:
    try:
        items, meta = read(body)
    except Exception as err:
        return type(err)
    records = [_record(table, item) for item in items]
    return (
        records,
        [describe(item) for item in items],
        meta.get("continue"),
        meta.get("resourceVersion"),
    )


def _same(body: bytes, table: Table) -> None:
    expected = _outcome(_stdlib, body, table)
    assert _outcome(lambda b: pages.read_page(b, table=table), body, table) == expected


@pytest.mark.parametrize(("name", "table"), LISTS)
def test_recorded_lists_give_the_records_of_a_full_decode(name: str, table: Table) -> None:
    """Every recorded list: the same records, the same continue token and resourceVersion."""
    body = _fixture(name)
    _same(body, table)
    items, _ = pages.read_page(body, table=table)
    assert items, "the fixture has items"


@pytest.mark.parametrize(("name", "table"), [lst for lst in LISTS if lst[1] in pages.SHAPES])
def test_recorded_lists_are_read_without_what_no_record_needs(name: str, table: Table) -> None:
    """The shaped tables really step over managedFields (the point of it all)."""
    items, meta = pages.read_page(_fixture(name), table=table)
    assert all("managedFields" not in item["metadata"] for item in items)
    assert "managedFields" in json.loads(_fixture(name))["items"][0]["metadata"]
    assert meta["resourceVersion"]


def _pod_page(edit: Callable[[dict[str, Any]], None]) -> bytes:
    page = json.loads(_fixture("sts-pods-list.json"))
    edit(page["items"][1])
    page["metadata"]["continue"] = "token"
    return json.dumps(page).encode()


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(item: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = item
        for key in parents:
            target = target[int(key)] if isinstance(target, list) else target[key]
        target[last] = value

    return edit


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(_set("spec.nodeName", None), id="null node name: read as no node"),
        pytest.param(_set("metadata.labels.app", 5), id="number label: the pod is skipped"),
        pytest.param(_set("metadata", "x"), id="metadata not an object: skipped"),
        pytest.param(_set("metadata.ownerReferences", {}), id="owners not a list: skipped"),
        pytest.param(_set("metadata.ownerReferences.0.controller", "true"), id="string bool"),
        pytest.param(_set("status.x", float("nan")), id="NaN where nothing is read"),
        pytest.param(_set("spec.x", 10**30), id="integer beyond 64 bits, not read"),
        pytest.param(_set("metadata.managedFields.0.manager", "\ud800"), id="lone surrogate"),
        pytest.param(_set("metadata.labels.zone", "zoné ☃"), id="non-ASCII label, read"),
        pytest.param(_set("spec.containers.0.name", "\u00e9"), id="non-ASCII, not read"),
        pytest.param(_set("metadata.name", ""), id="empty name: skipped"),
    ],
)
def test_a_page_that_does_not_fit_reads_as_a_full_decode(
    edit: Callable[[dict[str, Any]], None],
) -> None:
    """Odd values in read and unread fields: the records (and skips) of a full decode."""
    _same(_pod_page(edit), "pods")


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(
            _pod_page(_set("metadata.managedFields.0.manager", "@")).replace(b"@", b"\xff"),
            id="invalid UTF-8 where nothing is read",
        ),
        pytest.param(
            _pod_page(_set("metadata.managedFields.0.manager", "@")).replace(b'"@"', b"[" * 3000),
            id="broken JSON where nothing is read",
        ),
        pytest.param(
            _pod_page(_set("spec.nodeName", "@lab-node-6")).replace(b"@", b"\xed\xa0\x80"),
            id="a surrogate's UTF-8 bytes where it is read",  # msgspec < 0.23 raised on it
        ),
        pytest.param(b"[]", id="not an object"),
        pytest.param(b'{"items": null, "metadata": {"resourceVersion": "7"}}', id="null items"),
        pytest.param(b'{"items": {}, "metadata": {}}', id="items not a list"),
        pytest.param(b'{"items": [], "metadata": []}', id="metadata not an object"),
        pytest.param(b'{"items": []} trailing', id="trailing garbage"),
        pytest.param(b"\xef\xbb\xbf" + _fixture("sts-pods-list.json"), id="UTF-8 BOM"),
    ],
)
def test_what_the_stdlib_refuses_is_refused(body: bytes) -> None:
    """A page the full decode refuses raises what it raised; what it reads, reads the same."""
    _same(body, "pods")


# Damage a page at random: bytes and tokens JSON parsers disagree on, in read and unread places.
_TOKENS = [
    *(b'"', b"\\", b"\\u", b"\\ud800", b"\\udc00", b"\\/", b"0", b"01", b"-", b"1e400"),
    *(b"[", b"]", b"{", b"}", b",", b":", b"\t", b"\n", b"\x00", b"\x1f", b"\x7f", b"null"),
    *(b"NaN", b"Infinity", b"true", b"\xc3\xa9", b"\xed\xa0\x80", b"\xff", b"\xc3", b"\x80"),
    *(b"\xef\xbb\xbf", b"\xf4\x90\x80\x80", b"123456789012345678901234567890"),
]
_ANCHORS = [b'"manager":"', b'"nodeName":"', b'"app":"', b'"phase":', b'"name":', b'"items":[']


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    anchor=st.sampled_from(_ANCHORS),
    cut=st.booleans(),
    soup=st.lists(st.sampled_from(_TOKENS), min_size=1, max_size=6),
)
def test_random_damage_reads_as_a_full_decode(anchor: bytes, cut: bool, soup: list[bytes]) -> None:
    """Whatever is spliced in after a field name (or over one character): a full decode's result."""
    body = _compact("sts-pods-list.json")
    at = body.index(anchor) + len(anchor)
    _same(body[:at] + b"".join(soup) + body[at + int(cut) :], "pods")


# --- every field an extractor reads is in its shape ----------------------------------------


class _Spy(dict[str, Any]):
    """A dict that notes the dotted path of every key read from it (lists: ``[]``)."""

    def __init__(self, data: dict[str, Any], *, path: str, reads: set[str]) -> None:
        super().__init__(data)
        self._path, self._reads = path, reads

    def _wrap(self, key: str, value: Any) -> Any:
        return _spied(value, path=f"{self._path}.{key}".lstrip("."), reads=self._reads)

    def get(self, key: str, default: Any = None) -> Any:
        self._reads.add(f"{self._path}.{key}".lstrip("."))
        return self._wrap(key, super().get(key, default))

    def __getitem__(self, key: str) -> Any:
        self._reads.add(f"{self._path}.{key}".lstrip("."))
        return self._wrap(key, super().__getitem__(key))

    def __contains__(self, key: object) -> bool:
        self._reads.add(f"{self._path}.{key}".lstrip("."))
        return super().__contains__(key)

    def items(self) -> Any:
        self._reads.add(f"{self._path}.*")
        return [(k, self._wrap(k, v)) for k, v in super().items()]

    def values(self) -> Any:
        self._reads.add(f"{self._path}.*")
        return [self._wrap(k, v) for k, v in super().items()]

    def __iter__(self) -> Iterator[str]:
        self._reads.add(f"{self._path}.*")
        return super().__iter__()


def _spied(value: Any, *, path: str, reads: set[str]) -> Any:
    if isinstance(value, dict):
        return _Spy(value, path=path, reads=reads)
    if isinstance(value, list):
        return [_spied(v, path=f"{path}[]", reads=reads) for v in value]
    return value


def _declared(shape: Any, path: str) -> bool:
    """Whether the dotted ``path`` is in ``shape`` (``*``: every key of a declared map; a key
    may hold dots itself, as annotation keys do)."""
    parts = path.split(".")
    while parts:
        while typing.get_origin(shape) is list:
            shape = typing.get_args(shape)[0]
        if typing.get_origin(shape) is dict:
            return True  # a map[string]string is declared whole
        if not typing.is_typeddict(shape):
            return False
        hints = typing.get_type_hints(shape)
        for n in range(len(parts), 0, -1):  # the longest key first
            key = ".".join(parts[:n]).removesuffix("[]")
            if key in hints:
                shape, parts = hints[key], parts[n:]
                break
        else:
            return False
    return True


@pytest.mark.parametrize(("name", "table"), [lst for lst in LISTS if lst[1] in pages.SHAPES])
def test_every_field_the_records_read_is_in_the_shape(name: str, table: Table) -> None:
    """Spy on the extractor (and the skipped-object log) over full recorded objects."""
    reads: set[str] = set()
    for item in json.loads(_fixture(name))["items"]:
        spied = _spied(item, path="", reads=reads)
        EXTRACTORS[table](spied)
        describe(spied)
    assert reads, "the spy saw reads"
    # A volume's pinning is shared by the way its affinity is written, keyed by all of it: an
    # undeclared field there only makes another key, and its parse reads by name.
    keyed = "spec.nodeAffinity.required"
    reads = {p for p in reads if not (p.startswith(keyed) and p.endswith(".*"))}
    missing = sorted(path for path in reads if not _declared(pages.SHAPES[table], path))
    assert missing == []


def test_the_spy_sees_a_read_the_shape_lacks() -> None:
    """The check above can fail: a read of a field no shape declares is reported."""
    assert not _declared(pages.SHAPES["pods"], "spec.schedulerName")
    assert not _declared(pages.SHAPES["pods"], "metadata.*")
    assert _declared(pages.SHAPES["pods"], "metadata.labels.*")
    assert _declared(pages.SHAPES["volumes"], "spec.nodeAffinity.required.nodeSelectorTerms[]")
    assert _declared(pages.SHAPES["claims"], f"metadata.annotations.{ZONE}")
    assert not _declared(pages.SHAPES["claims"], "metadata.annotations.pv.kubernetes.io/bound-by")


@pytest.mark.parametrize(("name", "table"), LISTS)
def test_records_of_recorded_lists_are_out_of_the_cycle_collectors_sight(
    name: str, table: Table
) -> None:
    """A record is never tracked by the cycle collector: a full collection while 300k of them
    load would otherwise walk them all (a stop of the loop of hundreds of milliseconds)."""
    items, _ = pages.read_page(_fixture(name), table=table)
    records = [EXTRACTORS[table](item) for item in items]
    assert records
    gc.collect()  # what the collector would untrack by itself (tuples of strings) is untracked
    assert [r for r in records if gc.is_tracked(r)] == []
