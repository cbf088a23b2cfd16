"""The admission decode leaves out only what no rule reads, against a full decode.

``webhook.wire.review.parse`` decodes a review against a shape (msgspec, ``webhook.wire.lean``):
a typed envelope, and objects that step over their managedFields, a pod's containers and the
other fields no rule reads. The reference here is the stdlib's decode of the whole body,
``json.loads``:

* the envelope's fields are the whole decode's; the objects are the whole decode's dicts, in
  the same key order, with keys left out and nothing else changed; where an object leaves the
  shape (a string where an object belongs), the value is the whole decode's, and its answer too;
* what it leaves out, no rule reads: with every left-out field of the whole objects replaced by
  a value no rule could read, every answer of ``/mutate`` and ``/validate`` (and of both
  chained) is the same, and the same as the lean decode's, over the recorded reviews and built
  ones that reach every mode and constraint the rules read;
* an envelope off its types is refused with a one-line 400 naming the field; a body that is not
  JSON, or JSON that the API server never sends, is refused with a one-line message saying so,
  as :func:`webhook.wire.codec.request_body` refuses it decoded whole.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import builders as b
from webhook.cluster.clusterfile import store_from_objects
from webhook.config import Settings
from webhook.errors import BadRequest
from webhook.model.annotations import MODE, NODE_LABEL, STORAGE_CLASS_TEMPLATE, ZONE, ZONES
from webhook.model.store import Store
from webhook.rules import admission
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


def assert_left_out_only(got: Any, whole: Any, path: str = "") -> None:
    """``got`` is ``whole`` with some keys of its objects left out: same order, same values."""
    if isinstance(whole, dict):
        assert isinstance(got, dict), path
        keys = list(got)
        assert keys == [k for k in whole if k in got], f"{path}: {keys} not in {list(whole)}"
        for key in keys:
            assert_left_out_only(got[key], whole[key], f"{path}/{key}")
    elif isinstance(whole, list):
        assert isinstance(got, list) and len(got) == len(whole), path
        for i, (mine, theirs) in enumerate(zip(got, whole, strict=True)):
            assert_left_out_only(mine, theirs, f"{path}/{i}")
    else:
        assert type(got) is type(whole) and got == whole, path


class ReadPoison(AssertionError):
    """A rule used a value the lean decode leaves out."""


class Poison:
    """Stands for a left-out value: anything but holding it fails (no rule may read it)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __deepcopy__(self, memo: dict[int, Any]) -> Poison:
        return self  # copying is not reading (stszone review's chain patches a copy)

    def __getattr__(self, name: str) -> Any:
        raise ReadPoison(f"a rule read {self.path} ({name}), which the lean decode leaves out")

    def __iter__(self) -> Iterator[Any]:
        raise ReadPoison(f"a rule iterated {self.path}, which the lean decode leaves out")

    def __bool__(self) -> bool:
        raise ReadPoison(f"a rule tested {self.path}, which the lean decode leaves out")

    def __eq__(self, other: object) -> bool:
        raise ReadPoison(f"a rule compared {self.path}, which the lean decode leaves out")

    __hash__ = object.__hash__


def poisoned(whole: Any, lean: Any, path: str = "") -> tuple[Any, int]:
    """``whole`` with every value ``lean`` leaves out replaced by a :class:`Poison`, and how
    many were replaced."""
    if isinstance(whole, dict) and isinstance(lean, dict):
        out, count = {}, 0
        for key, value in whole.items():
            if key in lean:
                out[key], n = poisoned(value, lean[key], f"{path}/{key}")
                count += n
            else:
                out[key], count = Poison(f"{path}/{key}"), count + 1
        return out, count
    if isinstance(whole, list) and isinstance(lean, list):
        items = [
            poisoned(w, g, f"{path}/{i}") for i, (w, g) in enumerate(zip(whole, lean, strict=True))
        ]
        return [item for item, _ in items], sum(n for _, n in items)
    return whole, 0


def test_recorded_reviews_carry_what_is_left_out() -> None:
    """The comparisons below are not vacuous: the API server's objects carry managedFields,
    and its pods their containers and their service account's projected token."""
    carrying = [p.name for p in ADMISSION if b'"managedFields"' in p.read_bytes()]
    assert len(carrying) >= len(ADMISSION) // 2, carrying
    pods = [p for p in ADMISSION if "-Pod-" in p.name]
    assert pods and all(b'"containers"' in p.read_bytes() for p in pods)
    assert all(b'"projected"' in p.read_bytes() for p in pods)


def envelope(request: review.Request) -> tuple[Any, ...]:
    """What a Request holds besides the objects."""
    return tuple(v for k, v in request._asdict().items() if k not in ("object", "old_object"))


def whole_request(body: bytes) -> review.Request:
    """The request of ``body`` with its objects decoded whole (``json.loads``)."""
    request = json.loads(body)["request"]
    return review.parse(body)._replace(
        object=request.get("object") or {}, old_object=request.get("oldObject") or {}
    )


@pytest.mark.parametrize("path", ADMISSION, ids=lambda p: p.stem)
def test_a_recorded_review_decodes_as_a_whole_decode_with_keys_left_out(path: Path) -> None:
    body = path.read_bytes()
    got = review.parse(body)
    whole = json.loads(body)
    request = whole["request"]
    assert envelope(got) == (
        whole["apiVersion"],
        request["uid"],
        request["kind"]["kind"],
        request["kind"]["group"],
        request["resource"]["resource"],
        request.get("subResource", ""),
        request["operation"],
        request.get("namespace", ""),
        request.get("name", ""),
        request.get("dryRun") is True,
        request["resource"]["group"],
        request["userInfo"]["username"],
    )
    assert_left_out_only(got.object, request["object"])
    assert_left_out_only(got.old_object, request.get("oldObject") or {})
    assert '"managedFields"' not in json.dumps([got.object, got.old_object])
    if got.kind == "Pod":
        assert "containers" not in got.object["spec"]
        assert [v.get("persistentVolumeClaim") for v in got.object["spec"]["volumes"]] == [
            v.get("persistentVolumeClaim") for v in request["object"]["spec"]["volumes"]
        ]


def test_an_update_steps_over_the_old_objects_managed_fields_too() -> None:
    old = b.statefulset(replicas=3)
    new = b.statefulset(replicas=2)
    for obj in (old, new):
        obj["metadata"]["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
    body = json.dumps(b.review(new, operation="UPDATE", old=old)).encode()
    got = review.parse(body)
    assert_left_out_only(got.old_object, json.loads(body)["request"]["oldObject"])
    assert "managedFields" not in got.old_object["metadata"]
    # A StatefulSet's spec is kept whole, its pod template (containers and all) included.
    assert got.old_object["spec"] == old["spec"]


NODES = [b.node(f"n-{z}", f"zone-{z}", labels={"broker": str(i)}) for i, z in enumerate("abc")]
AFFINITY_B = b.zone_affinity([("topology.kubernetes.io/zone", "In", ["zone-b"])])


def built_reviews() -> list[tuple[str, bytes]]:
    """Reviews that reach what the rules read: every mode, nodeSelector, required affinity,
    spec.nodeName, schedulerName, claims, StatefulSet templates, scales, and pods as the
    mutation left them (the validating webhook's input)."""
    pods = [
        b.sts_pod("db", 1),
        b.sts_pod("db", 2, node_selector={"topology.kubernetes.io/zone": "zone-a"}),
        b.sts_pod("db", 1, affinity=AFFINITY_B),
        b.sts_pod("db", 0, affinity=AFFINITY_B),
        b.sts_pod("db", 0, node="n-b"),
        b.sts_pod("db", 5, claims=("data", "logs")),
        b.sts_pod("sched", 1, scheduler="default-scheduler"),
        b.sts_pod("sched", 2, scheduler="other-scheduler"),
        b.sts_pod("broker", 1),
        b.sts_pod("broker", 7),
        b.sts_pod("unknown", 4, annotations={ZONES: "zone-c,zone-a"}),
        b.plain_pod(),
    ]
    mutated = []
    for pod in pods[:10]:
        done = copy.deepcopy(pod)
        done["metadata"].setdefault("annotations", {})[ZONE] = "zone-b"
        done["spec"]["affinity"] = AFFINITY_B
        mutated.append(done)
    sets = [
        b.statefulset("new", node_selector={"topology.kubernetes.io/zone": "zone-c"}),
        b.statefulset("new", affinity=AFFINITY_B, annotations={MODE: "affinity"}),
    ]
    reviews = [b.review(obj) for obj in [*pods, *mutated, *sets]]
    reviews.append(
        b.review(
            b.statefulset("db", start=2, annotations={ZONES: "zone-b,zone-a"}),
            operation="UPDATE",
            old=b.statefulset("db", start=2, annotations={ZONES: "zone-a,zone-b,zone-c"}),
        )
    )
    classed = b.pvc("data-classy-1")
    classed["spec"]["storageClassName"] = "standard"
    reviews += [
        b.review(b.pvc("data-db-9")),
        b.review(classed),
        b.review(b.pvc("data-classy-2", volume="pv-5")),
    ]
    for new in (9, 1, 0):
        reviews.append(b.recorded_scale("db", namespace="ns", old=3, new=new))
    return [(f"built-{i}", json.dumps(r).encode()) for i, r in enumerate(reviews)]


def store() -> Store:
    """The recorded cluster, and the sets the built reviews name."""
    return store_from_objects(
        [
            *b.recorded_lists(),
            *NODES,
            b.statefulset("db", annotations={ZONES: "zone-a,zone-b,zone-c"}),
            b.statefulset("sched", annotations={MODE: "scheduler"}),
            b.statefulset("broker", annotations={MODE: "node-ordinal", NODE_LABEL: "broker"}),
            b.statefulset("classy", annotations={STORAGE_CLASS_TEMPLATE: "ssd-{zone}"}),
            b.pvc("data-db-5", volume="pv-5"),
            b.pv("pv-5", "zone-c"),
        ]
    )


CORPUS = [(p.stem, p.read_bytes()) for p in ADMISSION] + built_reviews()


def answers(request: review.Request, view: Store) -> list[Any]:
    defaults = Settings().defaults()
    return [
        review.response(request, decide(request, store=view, defaults=defaults))
        for decide in (admission.mutate, admission.validate, admission.chain)
    ]


@pytest.mark.parametrize(("name", "body"), CORPUS, ids=[name for name, _ in CORPUS])
def test_no_rule_reads_what_the_lean_decode_leaves_out(name: str, body: bytes) -> None:
    view = store()
    whole, lean = whole_request(body), review.parse(body)
    obj, _ = poisoned(whole.object, lean.object)
    old, _ = poisoned(whole.old_object, lean.old_object)
    trap = lean._replace(object=obj, old_object=old)
    want = answers(whole, view)
    assert answers(lean, view) == want
    assert answers(trap, view) == want


def test_every_pod_review_leaves_something_out() -> None:
    """The poisoning above is not vacuous: every pod review of the corpus, recorded or built,
    has values the lean decode leaves out (containers at least), each poisoned."""
    pods = [body for _, body in CORPUS if review.parse(body).kind == "Pod"]
    assert len(pods) >= 20
    for body in pods:
        _, count = poisoned(whole_request(body).object, review.parse(body).object)
        assert count > 0


def test_the_built_reviews_reach_every_outcome() -> None:
    """The corpus above exercises the rules, not only their early exits."""
    view = store()
    seen: set[str] = set()
    for _, body in CORPUS:
        for answer in answers(review.parse(body), view):
            response = answer["response"]
            seen.add("patch" if "patch" in response else "allowed")
            if not response["allowed"]:
                seen.add(response["status"].get("reason", ""))
            if response.get("warnings"):
                seen.add("warnings")
    want = {"patch", "allowed", "warnings", "ZoneConflict", "NodeNameConflict", "ZoneLoss"}
    assert want <= seen, seen


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


def at(data: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        data = data[step]
    return data


def verdicts(request: review.Request, view: Store) -> Any:
    """The answers to a request, or the first one's refusal."""
    try:
        return answers(request, view)
    except BadRequest as err:
        return err.message


@pytest.mark.parametrize("edit", OFF_SHAPE)
def test_an_object_off_the_shape_keeps_the_whole_decodes_value_and_answer(edit: str) -> None:
    body = recorded(edit)
    got, whole = review.parse(body), whole_request(body)
    assert_left_out_only(got.object, whole.object)
    value = at(got.object, OFF_SHAPE[edit])
    assert repr(value) == repr(at(whole.object, OFF_SHAPE[edit]))  # an int stays an int
    assert verdicts(got, store()) == verdicts(whole, store())


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


def stepped_over(value: bytes) -> bytes:
    """A review whose object's managedFields (which the shape steps over) hold ``value``."""
    return HEAD + b'"operation":"CREATE","object":{"metadata":{' + MANAGED + value + b"}]}}}}"


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b'{"kind":"AdmissionReview","request":{"uid":"a', id="truncated"),
        pytest.param(b"", id="empty"),
        pytest.param(stepped_over(b'"\\ud800"'), id="lone surrogate in managedFields"),
        pytest.param(b'{"request":{"uid":"\\udc00"}}', id="lone surrogate where read"),
        pytest.param(
            stepped_over(b'"\xed\xa0\x80"'), id="a surrogate's UTF-8 bytes in managedFields"
        ),
        pytest.param(stepped_over(b'"\xff"'), id="not UTF-8 in managedFields"),
        pytest.param(b'{"request":{"uid":"\xc3"}}', id="not UTF-8 where read"),
        pytest.param(stepped_over(b'"a\x01"'), id="a control character in managedFields"),
        pytest.param(
            stepped_over(b"[" * 1100 + b"]" * 1100), id="nesting past the limit in managedFields"
        ),
        pytest.param(b'{"request":{"object":{"spec":{"replicas":NaN}}}}', id="NaN"),
        pytest.param(stepped_over(b"-Infinity"), id="Infinity in managedFields"),
        pytest.param(b'{"request":{"object":{"spec":{"replicas":1e400}}}}', id="beyond a float"),
        pytest.param(b'{"request":{"uid":' + b"1" * 5000 + b"}}", id="an integer of 5000 digits"),
        pytest.param(b'{"request":{}} {}', id="trailing data"),
        pytest.param(stepped_over(b"[1,]"), id="a trailing comma in managedFields"),
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


def test_what_the_shape_steps_over_is_not_judged() -> None:
    """The documented difference: in managedFields, numbers beyond a float's range or the
    interpreter's digits are stepped over (the API server never sends them: it decodes objects
    into Go ints)."""
    body = (
        HEAD
        + b'"operation":"CREATE","object":{"metadata":{"name":"db-0",'
        + MANAGED
        + b"[1e400,"
        + b"1" * 5000
        + b"]}]}}}}"
    )
    with pytest.raises(BadRequest):
        codec.request_body(body, expected="an AdmissionReview")
    assert review.parse(body).object == {"metadata": {"name": "db-0"}}
