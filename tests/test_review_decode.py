"""The admission decode: the objects exactly as the API server sent them, the envelope typed.

``webhook.wire.review.parse`` decodes a review with msgspec: a typed envelope (a field off its
Go type is refused with a one-line 400 naming it) and the objects whole, every field in the
body's order, as ``json.loads`` reads them: the patch of a decision is computed against that
object, so nothing of it may be left out or changed. A body that is not JSON, or JSON the API
server never sends, is refused with a one-line message saying so, as
:func:`webhook.wire.codec.request_body` refuses it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from webhook.config import Settings
from webhook.errors import BadRequest
from webhook.model.store import Store
from webhook.wire import codec, review

ADMISSION = sorted((Path(__file__).parent / "fixtures" / "admission").glob("*.json"))


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


def test_recorded_reviews_carry_every_kind_of_field() -> None:
    """The comparison below is not vacuous: the API server's objects carry managedFields,
    and its pods their containers and their service account's projected token."""
    carrying = [p.name for p in ADMISSION if b'"managedFields"' in p.read_bytes()]
    assert len(carrying) >= len(ADMISSION) // 2, carrying
    pods = [p for p in ADMISSION if "-Pod-" in p.name]
    assert pods and all(b'"containers"' in p.read_bytes() for p in pods)
    assert all(b'"projected"' in p.read_bytes() for p in pods)


@pytest.mark.parametrize("path", ADMISSION, ids=lambda p: p.stem)
def test_a_recorded_reviews_objects_are_decoded_exactly_as_sent(path: Path) -> None:
    body = path.read_bytes()
    whole = json.loads(body)["request"]
    request = review.parse(body).request
    for got, sent in (
        (request.object, whole.get("object")),
        (request.old_object, whole.get("oldObject")),
    ):
        assert list(shape(got)) == list(shape(sent or {}))
    assert review.parse(body).uid == whole["uid"]


#: Each edit that takes the first recorded pod review's object off its shape, and where (in
#: the object) the value it puts there is.
OFF_SHAPE: dict[str, tuple[Any, ...]] = {
    "metadata a string": ("metadata",),
    "metadata a number beyond 64 bits": ("metadata",),
    "not ascii": ("metadata", "labels", "note"),
    "spec a string": ("spec",),
    "a volume a string": ("spec", "volumes", -1),
    "nodeName beyond 64 bits": ("spec", "nodeName"),
}
#: Each edit that takes its envelope off its types, and the field the refusal names.
OFF_ENVELOPE: dict[str, str] = {
    "object a list": "Expected `object | null`, got `array` - at `$.request.object`",
    "request a string": "Expected `object | null`, got `str` - at `$.request`",
    "review a list": "Expected `object`, got `array`",
    "userInfo a list": "Expected `object`, got `array` - at `$.request.userInfo`",
    "uid a number": "Expected `str`, got `int` - at `$.request.uid`",
    "resource group a boolean": "Expected `str`, got `bool` - at `$.request.resource.group`",
    "namespace null": "Expected `str`, got `null` - at `$.request.namespace`",
}


def recorded(edit: str) -> bytes:
    """The first recorded pod review, with one edit of :data:`OFF_SHAPE` or
    :data:`OFF_ENVELOPE`."""
    text = (ADMISSION[0].parent / "003-Pod-CREATE.json").read_text()
    data = json.loads(text)
    obj = data["request"]["object"]
    if edit == "metadata a string":
        obj["metadata"] = "db-0"
    elif edit == "metadata a number beyond 64 bits":
        obj["metadata"] = 2**70
    elif edit == "object a list":
        data["request"]["object"] = [obj]
    elif edit == "request a string":
        data["request"] = "x"
    elif edit == "review a list":
        data = [data]
    elif edit == "not ascii":
        obj["metadata"]["labels"]["note"] = "zone é"
    elif edit == "spec a string":
        obj["spec"] = "none"
    elif edit == "a volume a string":
        obj["spec"]["volumes"].append("data")
    elif edit == "userInfo a list":
        data["request"]["userInfo"] = [data["request"]["userInfo"]]
    elif edit == "nodeName beyond 64 bits":
        obj["spec"]["nodeName"] = -(2**64)
    elif edit == "uid a number":
        data["request"]["uid"] = 7
    elif edit == "resource group a boolean":
        data["request"]["resource"]["group"] = False
    elif edit == "namespace null":  # a Go string: the API server never sends null for it
        data["request"]["namespace"] = None
    else:
        raise AssertionError(edit)
    return json.dumps(data, ensure_ascii=False).encode()


def test_an_object_off_its_shape_is_decoded_as_sent_and_refused_by_the_rules() -> None:
    """What the rules read is checked by the rules: a spec that is a string is a denial naming
    it, not a 400 (the envelope is fine)."""
    body = recorded("spec a string")
    parsed = review.parse(body)
    assert parsed.request.object["spec"] == "none"
    answered = review.answer("mutate", parsed, store=Store(), defaults=Settings().defaults())
    assert not answered.allowed and answered.code == 400
    assert "spec must be an object" in answered.message


@pytest.mark.parametrize("edit", OFF_ENVELOPE)
def test_an_envelope_off_its_types_is_refused_naming_the_field(edit: str) -> None:
    with pytest.raises(BadRequest) as caught:
        review.parse(recorded(edit))
    assert caught.value.message == f"request body is not an AdmissionReview: {OFF_ENVELOPE[edit]}"


def test_a_review_as_a_str_decodes_as_its_utf8_bytes_do() -> None:
    body = recorded("not ascii")
    assert review.parse(body.decode()) == review.parse(body)


def refusal(body: bytes | str) -> str:
    with pytest.raises(BadRequest) as caught:
        review.parse(body)
    return caught.value.message


def whole_refusal(body: bytes | str) -> str:
    with pytest.raises(BadRequest) as caught:
        codec.request_body(body, expected="an AdmissionReview")
    return caught.value.message


MANAGED = b'"managedFields":[{"manager":"kubectl","fieldsV1":'


HEAD = b'{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u",'


def in_managed_fields(value: bytes) -> bytes:
    """A review whose object's managedFields hold ``value``."""
    return HEAD + b'"operation":"CREATE","object":{"metadata":{' + MANAGED + value + b"}]}}}}"


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b'{"kind":"AdmissionReview","request":{"uid":"a', id="truncated"),
        pytest.param(b"", id="empty"),
        pytest.param(in_managed_fields(b'"\\ud800"'), id="lone surrogate in managedFields"),
        pytest.param(b'{"request":{"uid":"\\udc00"}}', id="lone surrogate where read"),
        pytest.param(
            in_managed_fields(b'"\xed\xa0\x80"'), id="a surrogate's UTF-8 bytes in managedFields"
        ),
        pytest.param(in_managed_fields(b'"\xff"'), id="not UTF-8 in managedFields"),
        pytest.param(b'{"request":{"uid":"\xc3"}}', id="not UTF-8 where read"),
        pytest.param(in_managed_fields(b'"a\x01"'), id="a control character in managedFields"),
        pytest.param(
            in_managed_fields(b"[" * 1100 + b"]" * 1100),
            id="nesting past the limit in managedFields",
        ),
        pytest.param(b'{"request":{"object":{"spec":{"replicas":NaN}}}}', id="NaN"),
        pytest.param(in_managed_fields(b"-Infinity"), id="Infinity in managedFields"),
        pytest.param(b'{"request":{"object":{"spec":{"replicas":1e400}}}}', id="beyond a float"),
        pytest.param(b'{"request":{"uid":' + b"1" * 5000 + b"}}", id="an integer of 5000 digits"),
        pytest.param(b'{"request":{}} {}', id="trailing data"),
        pytest.param(in_managed_fields(b"[1,]"), id="a trailing comma in managedFields"),
        pytest.param(b"\xef\xbb\xbf{}", id="byte order mark"),
        pytest.param(b"\xff\xfe{}", id="not UTF-8"),
        pytest.param(
            json.dumps({"request": {"uid": "\ud800"}}, ensure_ascii=False),
            id="a str holding a lone surrogate",
        ),
    ],
)
def test_what_is_no_json_the_api_server_sends_is_refused_in_one_line(body: bytes | str) -> None:
    """Refused as the whole decode refuses it, saying it is not JSON and what to send."""
    for message in (refusal(body), whole_refusal(body)):
        assert message.startswith("request body is not valid JSON (")
        assert message.endswith("); send an AdmissionReview") and "\n" not in message
