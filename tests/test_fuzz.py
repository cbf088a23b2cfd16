"""Fuzzing the running app over TLS: whatever arrives, the answer is a 4xx or a sound review.

The real app (``tests.served``: ``make_app`` on ``Server`` + the hardened TLS context, the
recorded cluster of ``fixtures/api`` as its view) runs in a thread with its own event loop; hypothesis drives a
plain keep-alive HTTPS client against ``/mutate`` and ``/validate`` with:

* random JSON documents, and random bytes;
* every recorded AdmissionReview with fields deleted, retyped, oversized (long strings, long
  lists), replaced by unicode (lone surrogates, controls, astral characters) or by deeply
  nested values, several at once.

Every answer must be: never a 5xx; either a 4xx with a one-line plain-text message, or an
HTTP 200 AdmissionReview echoing the request's apiVersion and uid, with a Status message when
denied, and a base64 JSON Patch that applies cleanly to the object it was computed for.

CI runs the profile's examples (``HYPOTHESIS_PROFILE=ci``); ``STSZONE_FUZZ_EXAMPLES=N`` sets
the count per test for a long campaign (``STSZONE_FUZZ_EXAMPLES=40000 python -m pytest
tests/test_fuzz.py``).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import http.client
import json
import os
import ssl
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.hang import HANG_GUARD
from tests.served import InThread
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import MAX_BODY, Settings
from webhook.install.certfiles import DevCerts
from webhook.server.runtime import Runtime
from webhook.server.tls import CertReloader
from webhook.wire import codec

FIXTURES = Path(__file__).parent / "fixtures"
REVIEWS = sorted((FIXTURES / "admission").glob("*.json"))
CLUSTER = ("nodes-metadata-list", "pv-list", "pvc-list", "statefulsets-list", "sts-pods-list")
_examples = os.environ.get("STSZONE_FUZZ_EXAMPLES")
EXAMPLES = int(_examples) if _examples else settings().max_examples
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
JSONValue = Any


class App:
    """A keep-alive HTTPS client of the app served in a thread (``tests.served.InThread``)."""

    def __init__(self, served: InThread, client: ssl.SSLContext) -> None:
        self.port = served.port
        self.requests = 0
        self._client = client
        self._conn: http.client.HTTPSConnection | None = None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()

    def post(
        self, path: str, body: bytes, content_type: str = "application/json"
    ) -> tuple[int, str, bytes]:
        """(status, content type, body) over the kept-alive connection (re-opened if closed)."""
        for attempt in range(2):
            if self._conn is None:
                self._conn = http.client.HTTPSConnection(
                    "127.0.0.1", self.port, context=self._client, timeout=HANG_GUARD
                )
            try:
                self._conn.request("POST", path, body=body, headers={"Content-Type": content_type})
                response = self._conn.getresponse()
                payload = response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self._conn.close()
                self._conn = None
                if attempt:
                    raise
                continue
            if response.getheader("Connection", "").lower() == "close":
                self._conn.close()
                self._conn = None
            self.requests += 1
            return response.status, response.getheader("Content-Type", ""), payload
        raise AssertionError("unreachable")


@pytest.fixture(scope="module")
def app(dev_certs: DevCerts, client_ssl: ssl.SSLContext) -> Iterator[App]:
    """The real app, the recorded cluster of ``fixtures/api`` as its view."""
    lists = [json.loads((FIXTURES / "api" / f"{n}.json").read_text()) for n in CLUSTER]
    config = Settings(host="127.0.0.1", port=0)
    runtime = Runtime(store=store_from_objects(lists), defaults=config.defaults(), settings=config)
    tls = CertReloader(dev_certs.cert, dev_certs.key)
    with InThread(runtime, tls=tls, client=client_ssl) as served:
        client = App(served, client_ssl)
        try:
            yield client
        finally:
            client.close()


@contextlib.contextmanager
def deep_recursion(limit: int = 50_000) -> Iterator[None]:
    saved = sys.getrecursionlimit()
    sys.setrecursionlimit(max(saved, limit))
    try:
        yield
    finally:
        sys.setrecursionlimit(saved)


def _request_of(body: bytes) -> tuple[object, object, JSONValue] | None:
    """(apiVersion, uid, object) when the body is an envelope we must answer, else None."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("request"), dict):
        return None
    request = data["request"]
    return data.get("apiVersion"), request.get("uid"), request.get("object")


def check(app: App, path: str, body: bytes, content_type: str = "application/json") -> int:
    """Send one body and assert the contract on the answer; returns the HTTP status."""
    status, kind, payload = app.post(path, body, content_type)
    assert status < 500, (status, payload[:500])
    if status != 200:
        assert 400 <= status < 500 and kind.startswith("text/plain"), (status, kind)
        message = payload.decode()
        assert message.strip() and message.count("\n") == 1, message
        return status
    assert kind == "application/json"
    answer = json.loads(payload)
    sent = _request_of(body)
    assert sent is not None, "a 200 for a body that is no AdmissionReview"
    api_version, uid, obj = sent
    assert answer["apiVersion"] == api_version and answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert response["uid"] == uid and isinstance(response["allowed"], bool)
    if not response["allowed"]:
        status_wire = response["status"]
        assert isinstance(status_wire["code"], int) and status_wire["message"].strip()
        assert "patch" not in response
    if "patch" in response:
        assert response["patchType"] == "JSONPatch"
        try:
            ops = json.loads(base64.b64decode(response["patch"], validate=True))
        except (binascii.Error, ValueError) as err:
            raise AssertionError(f"patch is not base64 JSON: {err}") from None
        assert isinstance(ops, list) and ops
        with deep_recursion():  # fuzzed objects nest thousands deep; copying them recurses
            patched = jsonpatch.apply_patch(obj, ops, in_place=False)  # raises unless it applies
            assert patched != obj
    for warning in response.get("warnings", []):
        assert isinstance(warning, str) and warning
    return status


# --- strategies ---------------------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=20), inner, max_size=5)
    ),
    max_leaves=30,
)
unicode_text = st.text(
    alphabet=st.characters(codec=None, exclude_categories=()), min_size=1, max_size=50
) | st.sampled_from(["\ud800", "\udfff", "\x00\n\r\t", "\u2028\u2029", "\U0001f600" * 40, "é" * 9])


@st.composite
def deeply_nested(draw: st.DrawFn) -> JSONValue:
    depth = draw(st.integers(min_value=20, max_value=3000))
    leaf: JSONValue = draw(scalars)
    container = draw(st.sampled_from(["list", "dict"]))
    for _ in range(depth):
        leaf = [leaf] if container == "list" else {"k": leaf}
    return leaf


oversized = st.one_of(
    st.integers(min_value=10_000, max_value=300_000).map(lambda n: "x" * n),
    st.integers(min_value=1_000, max_value=20_000).map(lambda n: [{"name": "v"} for _ in range(n)]),
    st.integers(min_value=100, max_value=5_000).map(lambda n: {f"k{i}": "v" for i in range(n)}),
)
replacements = st.one_of(json_values, unicode_text, deeply_nested(), oversized)


def _paths(doc: JSONValue, *, depth: int = 24) -> list[tuple[Any, ...]]:
    """Every path into ``doc`` down to ``depth`` (a damaged document may nest thousands deep)."""
    found: list[tuple[Any, ...]] = []
    todo: list[tuple[tuple[Any, ...], JSONValue]] = [((), doc)]
    while todo:
        prefix, value = todo.pop()
        found.append(prefix)
        if len(prefix) >= depth:
            continue
        if isinstance(value, dict):
            todo += [((*prefix, key), item) for key, item in value.items()]
        elif isinstance(value, list):
            todo += [((*prefix, index), item) for index, item in enumerate(value[:50])]
    return found


def _set(doc: JSONValue, path: tuple[Any, ...], new: JSONValue, *, delete: bool) -> JSONValue:
    if not path:
        return new
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return doc


@st.composite
def damaged_reviews(draw: st.DrawFn) -> tuple[str, bytes]:
    """A recorded review with 1-4 fields deleted or replaced, sent to its own endpoint."""
    source = draw(st.sampled_from(REVIEWS))
    doc = json.loads(source.read_text())
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths[1:] if len(paths) > 1 else paths))
        if draw(st.booleans()) and path:
            doc = _set(doc, path, None, delete=True)
        else:
            doc = _set(doc, path, draw(replacements), delete=False)
        if not isinstance(doc, dict | list):
            break
    endpoint = "/mutate" if int(source.name[:3]) % 2 else "/validate"
    endpoint = draw(st.sampled_from([endpoint, "/mutate", "/validate"]))
    try:
        body = json.dumps(doc).encode()
    except RecursionError:  # too deep for json.dumps: send a hand-made deep document instead
        body = b"[" * 5000 + b"]" * 5000
    assume(len(body) <= MAX_BODY)  # over the cap is a 413 (test_wire); here the engine is fuzzed
    return endpoint, body


# --- the tests ----------------------------------------------------------------------------


@FUZZ
@given(doc=json_values, path=st.sampled_from(["/mutate", "/validate"]))
def test_random_json(app: App, doc: JSONValue, path: str) -> None:
    """Any JSON document at all: a 4xx with a message, or (rarely) a sound review."""
    check(app, path, json.dumps(doc).encode())


@FUZZ
@given(
    body=st.binary(max_size=2000),
    path=st.sampled_from(["/mutate", "/validate", "/extender/filter"]),
    content_type=st.sampled_from(["application/json", "text/plain", "application/json; x=1"]),
)
def test_random_bytes(app: App, body: bytes, path: str, content_type: str) -> None:
    """Arbitrary bytes, with or without the JSON content type."""
    status, _, payload = app.post(path, body, content_type)
    assert status < 500, payload[:300]
    if path != "/extender/filter":
        check(app, path, body, content_type)


@FUZZ
@given(case=damaged_reviews())
def test_damaged_recorded_reviews(app: App, case: tuple[str, bytes]) -> None:
    """Recorded reviews with fields deleted, retyped, oversized, unicode or deeply nested."""
    path, body = case
    check(app, path, body)


@pytest.mark.parametrize("review", REVIEWS, ids=lambda p: p.stem)
def test_every_recorded_review_is_sound(app: App, review: Path) -> None:
    """The recorded reviews themselves, each to both endpoints."""
    for path in ("/mutate", "/validate"):
        assert check(app, path, review.read_bytes()) == 200


def test_lone_surrogates_are_a_clear_400(app: App) -> None:
    """A lone surrogate in the uid or a label (a JSON escape that is not UTF-8) is refused with
    a 400 that says why: the answer echoes the uid, which UTF-8 cannot carry, and the API server
    never sends one."""
    review = json.loads((FIXTURES / "admission" / "003-Pod-CREATE.json").read_text())
    review["request"]["uid"] = "uid-\ud800"
    review["request"]["object"]["metadata"]["labels"]["apps.kubernetes.io/pod-index"] = "x\udfff"
    body = json.dumps(review).encode()
    for path in ("/mutate", "/validate"):
        assert check(app, path, body) == 400
        status, _, payload = app.post(path, body)
        assert status == 400 and b"not valid JSON" in payload


class Name(str):
    """A ``str`` subclass, which msgspec does not write."""


@pytest.mark.parametrize(
    ("value", "written"),
    [
        pytest.param({"uid": "uid-\ud800"}, b'{"uid":"uid-\\ud800"}', id="a lone surrogate"),
        pytest.param({"name": Name("db-0")}, b'{"name":"db-0"}', id="a str subclass"),
        pytest.param(
            [2**64, -(2**63) - 1],
            b"[18446744073709551616,-9223372036854775809]",
            id="beyond 64 bits",
        ),
        pytest.param({"zone": "é\u2028\x00"}, '{"zone":"é\u2028\\u0000"}'.encode(), id="not ascii"),
    ],
)
def test_whatever_reaches_an_answer_is_written_as_valid_json(value: Any, written: bytes) -> None:
    """Should an odd value reach an answer, it is written as JSON the stdlib reads back,
    never a 500."""
    assert codec.dumps(value) == written
    assert json.loads(written) == value
