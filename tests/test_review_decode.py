"""The admission decode leaves out managedFields, and nothing else, against a full decode.

``webhook.wire.review.decode`` decodes a review against a shape (msgspec) that steps over the
objects' managedFields. The reference here is orjson's decode of the whole body, the decode
every review went through before: a body that fits must give the same dicts in the same key
order less managedFields, and one that does not must be read, or refused, exactly as the whole
decode reads or refuses it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests import builders as b
from webhook.errors import BadRequest
from webhook.wire import codec, review

ADMISSION = sorted((Path(__file__).parent / "fixtures" / "admission").glob("*.json"))


def without_managed_fields(data: Any) -> Any:
    """``data`` as the whole decode gives it, with the objects' managedFields taken out."""
    request = data.get("request") if isinstance(data, dict) else None
    for part in ("object", "oldObject"):
        obj = request.get(part) if isinstance(request, dict) else None
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if isinstance(meta, dict):
            meta.pop("managedFields", None)
    return data


def shape(data: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every path with its keys in order (dict equality alone ignores the order)."""
    if isinstance(data, dict):
        yield path, list(data)
        for key, value in data.items():
            yield from shape(value, f"{path}/{key}")
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from shape(value, f"{path}/{i}")
    else:
        yield path, (type(data), data)


def test_recorded_reviews_carry_managed_fields() -> None:
    """The comparison below is not vacuous: the API server's objects carry managedFields."""
    carrying = [p.name for p in ADMISSION if b'"managedFields"' in p.read_bytes()]
    assert len(carrying) >= len(ADMISSION) // 2, carrying


@pytest.mark.parametrize("path", ADMISSION, ids=lambda p: p.stem)
def test_a_recorded_review_decodes_as_a_whole_decode_less_managed_fields(path: Path) -> None:
    body = path.read_bytes()
    got = review.decode(body)
    want = without_managed_fields(orjson.loads(body))
    assert list(shape(got)) == list(shape(want))
    assert b'"managedFields"' not in orjson.dumps(got)


def test_an_update_steps_over_the_old_objects_managed_fields_too() -> None:
    old = b.statefulset(replicas=3)
    new = b.statefulset(replicas=2)
    for obj in (old, new):
        obj["metadata"]["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
    body = json.dumps(b.review(new, operation="UPDATE", old=old)).encode()
    got = review.decode(body)
    assert list(shape(got)) == list(shape(without_managed_fields(orjson.loads(body))))
    assert "managedFields" not in got["request"]["oldObject"]["metadata"]


def recorded(edit: str) -> bytes:
    """The first recorded pod review, with one edit that takes it off the shape."""
    text = (ADMISSION[0].parent / "003-Pod-CREATE.json").read_text()
    data = json.loads(text)
    obj = data["request"]["object"]
    if edit == "metadata a string":
        obj["metadata"] = "db-0"
    elif edit == "object a list":
        data["request"]["object"] = [obj]
    elif edit == "request a string":
        data["request"] = "x"
    elif edit == "review a list":
        data = [data]
    elif edit == "not ascii":
        obj["metadata"]["labels"]["note"] = "zone é"
    else:
        raise AssertionError(edit)
    return json.dumps(data, ensure_ascii=False).encode()


@pytest.mark.parametrize(
    "edit", ["metadata a string", "object a list", "request a string", "review a list", "not ascii"]
)
def test_a_body_off_the_shape_is_decoded_whole(edit: str) -> None:
    body = recorded(edit)
    assert review.decode(body) == orjson.loads(body)  # managedFields and all


def refusal(body: bytes) -> str:
    with pytest.raises(BadRequest) as caught:
        review.decode(body)
    return caught.value.message


def whole_refusal(body: bytes) -> str:
    with pytest.raises(BadRequest) as caught:
        codec.request_body(body, expected="an AdmissionReview")
    return caught.value.message


MANAGED = b'"managedFields":[{"manager":"kubectl","fieldsV1":'


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b'{"kind":"AdmissionReview","request":{"uid":"a', id="truncated"),
        pytest.param(
            b'{"request":{"object":{"metadata":{' + MANAGED + b'"\\ud800"}]}}}}',
            id="lone surrogate in managedFields",
        ),
        pytest.param(b'{"request":{"uid":"\\udc00"}}', id="lone surrogate where read"),
        pytest.param(
            b'{"request":{"object":{"metadata":{' + MANAGED + b"[" * 1100 + b"]" * 1100 + b"}]}}}}",
            id="nesting past the limit in managedFields",
        ),
        pytest.param(b'{"request":{"object":{"spec":{"replicas":NaN}}}}', id="NaN"),
        pytest.param(b'{"request":{"object":{"spec":{"replicas":1e400}}}}', id="beyond a float"),
        pytest.param(b'{"request":{}} {}', id="trailing data"),
        pytest.param(b"\xff\xfe{}", id="not UTF-8"),
    ],
)
def test_what_a_whole_decode_refuses_is_refused_with_its_message(body: bytes) -> None:
    assert refusal(body) == whole_refusal(body)


def test_what_the_shape_steps_over_is_not_judged() -> None:
    """The documented difference: in managedFields, numbers orjson refuses or reads as floats
    are stepped over (the API server never sends them: it decodes objects into Go ints)."""
    body = (
        b'{"request":{"object":{"metadata":{"name":"db-0",'
        + MANAGED
        + b"[1e400,12345678901234567890123]}]}}}}"
    )
    with pytest.raises(BadRequest):
        codec.request_body(body, expected="an AdmissionReview")
    assert review.decode(body) == {"request": {"object": {"metadata": {"name": "db-0"}}}}
